"""What a GPU session's plan should cost on an H200, and in which call of the budget each run ends.

`estimate` walks the plan (`plans.gpu.runs`) as the calls will, one budget (gpu_check's 290 s) each:
a call first pays the tests and the profiler's probes (the first call the embedding benchmark too),
then takes the runs in order. A run's measurements are its points x variants x repeats; its builds
one per point in each call that measures it where its points fit in half the GPU's memory together
(as `runner.KeptRuns` decides), else one per measurement; each measurement's steps as `measure.gpu`
takes them at the GPU model's slowest predicted step, with one profiled window per point in each
call (a new process). A run no claim's rule reads is cut where the budget runs out, the next call
resuming it; a verdict run (H1-H4) is measured in whole repeats (`whole_repeats`), since a repeat
split between two calls is two runs whose records never pair. gpu_check prints the estimate before
it measures and gates the verdict runs' repeats on it; the tests check that the targets' run fits
the first call.
"""

from dataclasses import dataclass
from pathlib import Path

from dlrm_study import config
from dlrm_study.config import Config, Loop, Placement
from dlrm_study.config.memory import ring_batches
from dlrm_study.config.variants import REGISTRY, Variant
from dlrm_study.measure import gpu, sweep
from dlrm_study.perfmodel import gpu as gpu_model
from dlrm_study.plans import gpu as gpu_grid

# Measured on the H200 (results/gpu-session/run1-log.txt, the session at 577ad01).
TESTS_S = 29.0  # the tests marked gpu
EMBEDDING_S = 25.0  # copy bandwidths and the embedding benchmark of four placements in 3 repeats
BUILD_S_PER_GIB = 1.2  # a run's tables made on the host and copied in (a preset at 2,048: about 6 s)
# Not measured there yet (leads): the profiler's two probes (two processes starting CUDA), a run's fixed
# cost besides its tables, the host's cost of making and staging a ring's ids, a measurement's fixed cost
# (its capture, reading its trace, writing its record), a CPU loop's measurement on the 16-core host.
PROBES_S = 15.0
BUILD_FIXED_S = 1.0
STAGE_NS_PER_ID = 40.0
MEASURE_FIXED_S = 1.0
CPU_MEASURE_S = 3.0
H200_FREE_BYTES = 139 << 30  # the GPU's free memory at a session's start
HOST_FREE_BYTES = 120 << 30
OPS_PER_STEP = 350  # kernels of a step (the profiled records say 250 to 370)
BUDGET_S = 290.0  # gpu_check's default --budget-s
# A verdict run's repeat starts only where a tenth more than its estimate still ends inside the budget:
# the estimate leans on the leads above, and a repeat the deadline cuts loses its pairs for good.
WHOLE_MARGIN = 1.1
MAX_CALLS = 20  # the estimate stops here (a plan that needs more says so)
Item = tuple[int, str, Config]  # one measurement of a run: (repeat, variant, config), in the runner's order


@dataclass
class RunCost:
    study: str
    measurements: int
    builds: int = 0
    seconds: float = 0.0  # in every call that measures it, its builds in each included
    repeats: int = 0
    claims: tuple[str, ...] = ()  # a verdict run's claims: measured in whole repeats
    call: int = 0  # the call it ends in (1: the first; 0: not within MAX_CALLS)
    ends_at: float = 0.0  # seconds into that call, the call's own fixed costs included


def step_ms(cfg: Config, variant: str) -> float:
    """The GPU model's slowest predicted step (a captured step dispatches one replay)."""
    placement = Variant.named(variant).setting("placement") if variant in REGISTRY else None
    placement = Placement(placement or Placement.HBM)
    captured = cfg.train.cuda_graph and placement in (Placement.HBM, Placement.UVM)
    hit = 0.9 if placement == Placement.CACHED else 1.0
    device = gpu_model.DEVICES["h200"]
    _, slow = gpu_model.step_range_ms(
        cfg, device, gpu_model.efficiency_range(), placement, hit, OPS_PER_STEP, 1 if captured else OPS_PER_STEP
    )
    return slow


def measurement_s(cfg: Config, variant: str, profiled: bool) -> float:
    """Seconds of one measurement of a gpu-loop point as `measure.gpu.measure_training` takes it."""
    if cfg.train.loop != Loop.GPU:
        return CPU_MEASURE_S
    s = step_ms(cfg, variant) / 1e3
    warm = min(gpu.WARMUP_STEPS * s, max(gpu.WARMUP_S, 10 * s))
    block = min(max(gpu.BLOCK_S, gpu.BLOCK_STEPS[0] * s), gpu.BLOCK_STEPS[1] * s)
    steps_s = warm + 3 * s + gpu.BLOCKS * block + gpu.ENQUEUE_TRIALS * s
    return MEASURE_FIXED_S + steps_s + (gpu.PROFILE_STEPS * s if profiled else 0.0)


def build_s(cfg: Config) -> float:
    """Seconds to build a run: its tables (host and device) and, for the gpu loop, its ring of staged batches."""
    tables = sum(config.table_bytes(cfg, Placement.HBM))
    seconds = BUILD_FIXED_S + tables / 2**30 * BUILD_S_PER_GIB
    if cfg.train.loop == Loop.GPU:
        capacity = cfg.train.batch_size * cfg.model.num_tables * cfg.data.lookups_per_table
        seconds += ring_batches(capacity) * capacity * STAGE_NS_PER_ID / 1e9
    return seconds


def fits(configs: list[Config], gpu_free: int, host_free: int) -> bool:
    """`runner.fits_together` on a GPU with `gpu_free` bytes free (the plan is made before any GPU is seen)."""
    device = host = 0
    for cfg in configs:
        on_gpu = cfg.train.loop == Loop.GPU and cfg.train.device.startswith("cuda")
        d, h = config.split_memory(cfg) if on_gpu else (0, config.estimate_memory(cfg).total)
        device, host = device + d, host + h
    return device <= gpu_free / 2 and host <= host_free / 2


def fixed_s(first: bool, tests: bool = True) -> float:
    """A call's costs before its runs: the tests, the profiler's probes, and (the first call only: later
    ones find its records) the embedding benchmark."""
    return (TESTS_S if tests else 0.0) + PROBES_S + (EMBEDDING_S if first else 0.0)


class Call:
    """One call's process, `at` seconds in: what it has built and profiled (a new call does both anew)."""

    def __init__(self, at: float) -> None:
        self.at = at
        self.built: set[tuple[str, str]] = set()
        self.profiled: set[str] = set()

    def take(self, items: list[Item], kept: bool, dry: bool = False) -> tuple[float, int]:
        """Seconds and builds of measuring `items` next; counted in (`at`, built, profiled) unless `dry`."""
        seconds, builds = 0.0, 0
        built, profiled = set(self.built), set(self.profiled)
        for _, variant, cfg in items:
            key = (cfg.hash(), variant)
            if not kept or key not in built:
                seconds, builds = seconds + build_s(cfg), builds + 1
                built.add(key)
            seconds += measurement_s(cfg, variant, profiled=key[0] not in profiled)
            profiled.add(key[0])
        if not dry:
            self.at, self.built, self.profiled = self.at + seconds, built, profiled
        return seconds, builds

    def copy(self) -> "Call":
        twin = Call(self.at)
        twin.built, twin.profiled = set(self.built), set(self.profiled)
        return twin


def by_repeat(items: list[Item]) -> list[list[Item]]:
    """A run's pending measurements, repeat by repeat (the runner's order: repeat-major)."""
    groups: dict[int, list[Item]] = {}
    for item in items:
        groups.setdefault(item[0], []).append(item)
    return list(groups.values())


def whole_repeats(items: list[Item], kept: bool, call: Call, budget_s: float, tests: bool = True) -> int:
    """How many of a verdict run's pending repeats (`items`) to start now, whole: those whose cost, times
    WHOLE_MARGIN, ends inside `budget_s` from `call.at`. A first repeat no call could hold (more than a
    later call's budget after its fixed costs) is started anyway: waiting would not make it fit."""
    trial, spent, n = call.copy(), 0.0, 0
    for part in by_repeat(items):
        spent += trial.take(part, kept)[0]
        if call.at + WHOLE_MARGIN * spent > budget_s:
            break
        n += 1
    if n == 0 and items:
        alone = Call(0.0).take(by_repeat(items)[0], kept, dry=True)[0]
        n = int(WHOLE_MARGIN * alone > budget_s - fixed_s(False, tests))
    return n


def pending_items(run, done: set) -> tuple[list[Item], bool]:
    """A run's measurements (`plans.gpu.GpuRun`), less the (config hash, variant) pairs earlier runs measured
    (added to `done`), and whether its points are kept across its repeats."""
    plan, _ = sweep.merged_plan(run.specs, run.only)
    new = [(variant, cfg) for _, cfgs in plan for variant, cfg in cfgs.items() if (cfg.hash(), variant) not in done]
    done |= {(cfg.hash(), variant) for variant, cfg in new}
    items = [(r, variant, cfg) for r in range(run.specs[0].repeats) for variant, cfg in new]
    return items, kept(items)


def kept(items: list[Item]) -> bool:
    """Whether a run measuring `items` keeps its points across its repeats, on an H200 (`fits`)."""
    configs = {(cfg.hash(), variant): cfg for _, variant, cfg in items}
    return fits(list(configs.values()), H200_FREE_BYTES, HOST_FREE_BYTES)


def estimate(runs: list, tests: bool = True, budget_s: float = BUDGET_S) -> list[RunCost]:
    """Each run's cost and the call of `budget_s` it ends in, the calls taken as the session takes them:
    the runs in order, a point an earlier run measured not measured again (the session resumes by
    config, variant and repeat), a run cut at the budget resumed first in the next call, a verdict run
    in whole repeats (`whole_repeats`; the runs after it go on where one does not fit)."""
    done: set = set()
    work = [pending_items(run, done) for run in runs]
    costs = [
        RunCost(run.study, len(items), repeats=run.specs[0].repeats, claims=run.claims)
        for run, (items, _) in zip(runs, work, strict=True)
    ]
    for number in range(1, MAX_CALLS + 1):
        call = Call(fixed_s(number == 1, tests))
        for (items, keep), cost in zip(work, costs, strict=True):
            if not items:
                continue
            if cost.claims:
                n = whole_repeats(items, keep, call, budget_s, tests)
                now = [item for part in by_repeat(items)[:n] for item in part]
            else:
                now, trial = [], call.copy()
                while len(now) < len(items) and trial.at <= budget_s:  # the runner's deadline: before each start
                    now.append(items[len(now)])
                    trial.take(now[-1:], keep)
            seconds, builds = call.take(now, keep)
            cost.seconds, cost.builds = cost.seconds + seconds, cost.builds + builds
            del items[: len(now)]
            if not items:
                cost.call, cost.ends_at = number, call.at
        if not any(items for items, _ in work):
            break
    return costs


def calls(costs: list[RunCost]) -> int:
    """The calls the plan needs (0: more than MAX_CALLS)."""
    return 0 if any(not c.call for c in costs) else max((c.call for c in costs), default=0)


def lines(costs: list[RunCost], budget_s: float, tests: bool = True) -> list[str]:
    """What the plan should cost, run by run, and the call of `budget_s` each run ends in."""
    first, later = fixed_s(True, tests), fixed_s(False, tests)
    out = [
        f"budget (estimated on an H200, calls of {budget_s:.0f} s): each call first runs the tests and probes "
        f"(about {later:.0f} s; the first with the embedding benchmark, {first:.0f} s)"
    ]
    for cost in costs:
        what = f"{cost.repeats} repeats" + (f", whole, for {'/'.join(cost.claims)}" if cost.claims else "")
        ends = f"ending in call {cost.call} near {cost.ends_at:.0f} s" if cost.call else f"not within {MAX_CALLS} calls"
        out.append(
            f"  {cost.study} ({what}): {cost.measurements} measurements, {cost.builds} builds, "
            f"about {cost.seconds:.0f} s, {ends}"
        )
    needed = calls(costs)
    out.append(f"  the whole plan: {needed} calls" if needed else f"  the whole plan: more than {MAX_CALLS} calls")
    return out


def targets_end_s(out: Path = Path("results/gpu-run")) -> float:
    """When the targets' run should end in the first call on an H200 (its three repeats included; inf past it)."""
    first = estimate(gpu_grid.runs(out, dry_run=False))[0]
    return first.ends_at if first.call == 1 else float("inf")
