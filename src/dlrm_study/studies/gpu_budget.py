"""What a GPU session's plan should cost on an H200, from costs measured there and the GPU model's step times.

`estimate` walks the plan (`studies.gpu.runs`) as the session will: each run's measurements (points x
variants x repeats), its builds (one per run where its runs fit in half the GPU's memory together, as
`runner.KeptRuns` decides, else one per measurement), each measurement's steps as `measure.gpu` takes
them at the GPU model's slowest predicted step, and one profiled window per point. gpu_check prints it
before it measures, so a session knows which runs fit its budget and which resume in the next; the
tests check that the targets' run fits the first session's budget.
"""

from dataclasses import dataclass
from pathlib import Path

from dlrm_study import config
from dlrm_study.config import Config, Loop, Placement
from dlrm_study.config.memory import ring_batches
from dlrm_study.config.variants import REGISTRY, Variant
from dlrm_study.measure import gpu, sweep
from dlrm_study.perfmodel import gpu as gpu_model
from dlrm_study.studies import gpu as gpu_grid

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


@dataclass
class RunCost:
    study: str
    measurements: int
    builds: int
    seconds: float
    ends_at: float = 0.0  # seconds from the session's start, the runs before it and the fixed costs included


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


def run_cost(
    study: str, specs: list[sweep.Sweep], only=None, gpu_free: int = H200_FREE_BYTES, done: set | None = None
) -> RunCost:
    """One run's cost; `done`: the (config hash, variant) pairs earlier runs measured (skipped here, then added)."""
    done = set() if done is None else done
    plan, _ = sweep.merged_plan(specs, only)
    repeats = specs[0].repeats
    runs = [(variant, cfg) for _, cfgs in plan for variant, cfg in cfgs.items() if (cfg.hash(), variant) not in done]
    done |= {(cfg.hash(), variant) for variant, cfg in runs}
    kept = fits([cfg for _, cfg in runs], gpu_free, HOST_FREE_BYTES)
    seconds = 0.0
    for variant, cfg in runs:
        seconds += build_s(cfg) * (1 if kept else repeats)
        seconds += sum(measurement_s(cfg, variant, profiled=r == 0) for r in range(repeats))
    return RunCost(study, len(runs) * repeats, len(runs) if kept else len(runs) * repeats, seconds)


def estimate(runs: list, tests: bool = True, gpu_free: int = H200_FREE_BYTES) -> list[RunCost]:
    """Each run's cost, in the order the session runs them, with when it should end (fixed costs first).
    A point an earlier run measured is not measured again (the session resumes by config and variant)."""
    at = (TESTS_S if tests else 0.0) + PROBES_S + EMBEDDING_S
    costs, done = [], set()
    for run in runs:
        cost = run_cost(run.study, run.specs, run.only, gpu_free, done)
        at += cost.seconds
        cost.ends_at = at
        costs.append(cost)
    return costs


def lines(costs: list[RunCost], budget_s: float) -> list[str]:
    """What the plan should cost, run by run, and which runs fit `budget_s` (the rest resume later)."""
    out = [f"budget (estimated on an H200, {budget_s:.0f} s): tests, probes and embedding benchmark first"]
    for cost in costs:
        fits_budget = "" if cost.ends_at <= budget_s else " (past the budget: a later session)"
        out.append(
            f"  {cost.study}: {cost.measurements} measurements, {cost.builds} builds, about {cost.seconds:.0f} s, "
            f"ending near {cost.ends_at:.0f} s{fits_budget}"
        )
    return out


def targets_end_s(out: Path = Path("results/gpu-run")) -> float:
    """When the targets' run should end in a session on an H200 (its three repeats included)."""
    return estimate(gpu_grid.runs(out, dry_run=False))[0].ends_at
