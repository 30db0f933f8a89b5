"""A GPU lending's plan: two self-contained lendings that judge H1-H4, each claim in `VERDICT_RUNS` runs, each
run a process of its own, in phases estimated on an H200 from a cold start.

A lending is one call of at most 10 minutes (`scripts/gpu_lending.sh`, `--budget-s 540`). All of H1-H4 in 3 runs
do not fit one call by this estimate (about 920 s), so there are two (`LENDINGS`), each judging its own claims
from its own records only:

Both begin with `numerics` (`lending.numerics`): the GPU's embedding kernels against their PyTorch stand-ins at every
embedding shape the headline measures, recorded, before any timed record (about 15 s).

- **A** (H1, H4, and the targets): `targets-bf16` (the three targets, `plans.gpu_targets`, one repeat each);
  then `verdict-run-1` to `-3`, each one run (a run slot, `measure.context.one_run`) of H1's points (gpu-hbm at
  each model-shape knob's two ends, not batch size) and H4's (hbm, host and cached on mlperf-scaled, Zipf 1.05,
  10% cached) in `REPEATS_OF["A"]` whole repeats; then `targets-fp32` (the targets' fp32 twins, one repeat each:
  no rule reads them); then `uvm` (hbm beside uvm in a run of their own: uvm failed in the first lending, and it
  decides nothing, so last, apart).
- **B** (H2, H3): `verdict-run-1` to `-3`, each one run of the dense x sparse grid's points H2 or H3 reads (a
  dense-features end or a table-count end: 8 of the 9 points) on the GPU and on the host's optimized fp32 and
  bf16 loops, in `REPEATS_OF["B"]` whole repeat (24 measurements; two repeats would leave no room).

After the verdict phases, as far as the budget goes (optional, no rule reads them): the targets' repeats, a
smoke of the GPU tests, the profiled windows of the targets, the embedding benchmark, the same-host pair, and
the rest. The lending to run is the first whose claims have no verdict at today's GPU code
(`lending.gpu_session.choose_lending`); `--part A|B` names one.

Each phase is one process (`measure.isolated`); its estimate is its measurements' cost by `lending.gpu_budget`
(one run slot a verdict phase) plus a process's start (`PHASE_START_S`) and, in the first phase, Triton compiling
its kernels (`TRITON_COLD_S`). The first lending (2026-12-04, results/gpu-session/lending1-log.txt) ran each of
its headline phases within 6% of its estimate; PHASE_START_S, TRITON_COLD_S and the host CPU loops' cost
(`gpu_budget.CPU_MEASURE_S`) are still leads.
"""

import dataclasses
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from dlrm_study.config import Config
from dlrm_study.config.variants import GPU_CACHED, GPU_CACHED_LFU, GPU_HBM, GPU_HOST, GPU_UVM
from dlrm_study.errors import UsageError
from dlrm_study.lending import gpu_budget, numerics
from dlrm_study.plans import gpu as gpu_grid
from dlrm_study.plans import gpu_targets, sweep
from dlrm_study.plans.gpu import PLACEMENTS_RUN, SENSITIVITY_RUN, TARGETS_RUN, GpuRun

# Leads (not measured on the H200 yet): a phase process's start (Python, torch, the CUDA context: importing
# the phase's modules took about 3 s on a 2-core development machine), and the first phase's Triton
# compiling (later phases find the kernels in Triton's cache on disk). Compiling is cheap, so no cache
# travels: `scripts/triton_compile_check.py` builds all 10 kernels for sm_90, ptxas included, in 10.6 s of
# wall time with its imports (Triton 3.9 on a loaded 2-core Zen 3, 2026-12-03; its cache: 2.7 MB), and
# the H200's host has 16 cores. TRITON_COLD_S keeps twice that.
PHASE_START_S = 5.0
KERNEL_BUILD_S = 60.0  # the C++ kernels' build from t = 0 (25-60 s on 2 cores; a lead on the H200's 16)
TRITON_COLD_S = 20.0
NUMERICS_S = 15.0  # the kernels' numerics check at the headline's shapes (`lending.numerics`): a lead
GPU_TESTS_S = 25.0  # the smoke of the tests marked gpu (`SMOKE_TESTS`): a captured step and the Triton kernels
GPU_TESTS_TIMEOUT_S = 150.0
LIMIT_FACTOR = 3.0  # a phase's watchdog: this many times its estimate (at least MIN_LIMIT_S), within the budget
MIN_LIMIT_S = 60.0
PROFILES_FILE = "gpu_profiles.csv"  # the targets' profiled windows: apart from the records they judge
HEADLINE_STUDIES = (TARGETS_RUN, PLACEMENTS_RUN)
LISTED_STUDIES = (*HEADLINE_STUDIES, gpu_grid.SAME_HOST_RUN)  # a summary line per record: the headline's, same-host's
VERDICT_RUNS = 3  # runs of each claim's points in a lending: `analysis.clusters.MIN_RUNS` (a test holds it)
LENDINGS = {"A": ("H1", "H4"), "B": ("H2", "H3")}  # each judged from its own records only (a test holds it)
REPEATS_OF = {"A": 3, "B": 1}  # whole repeats a verdict run measures (B's grid: 24 measurements a repeat)
LENDING_LIMIT_S = 540.0  # each lending's estimate from a cold start stays under this (a test holds it)
VERDICTS_BY_S = 400.0  # each lending's verdict runs end by then, by the estimate, with room for it to be wrong
SMOKE_TESTS = ["-k", "captured_step or compiled_kernels_match"]  # the GPU tests a lending runs: a smoke (GPU_TESTS_S)


@dataclass
class Phase:
    """One phase: its kind (`numerics`, `runs`, `tests`, `profiles`, `embedding`), its runs, whether it is
    headline, and its estimate on an H200 (seconds, from its process's start)."""

    name: str
    kind: str = "runs"
    runs: list[GpuRun] = field(default_factory=list)
    headline: bool = False
    retry: bool = False  # a failed point is measured once more (the targets)
    whole: bool = False  # verdict runs: whole repeats only
    slot: int = 0  # the one run slot this phase measures, in its own process (0: every slot of its runs)
    shapes: list[numerics.Shape] = field(default_factory=list)  # the numerics check's: the headline's GPU shapes
    estimate_s: float = 0.0

    def limit_s(self, left_s: float) -> float:
        """The phase's watchdog: a multiple of its estimate, within what is left of the budget."""
        return max(0.0, min(left_s, max(MIN_LIMIT_S, LIMIT_FACTOR * self.estimate_s)))


def bf16_target(variant: str, cfg: Config, dry_run: bool) -> bool:
    return variant == gpu_targets.VARIANT and gpu_targets.is_target(variant, cfg, dry_run)


def fp32_twin(variant: str, cfg: Config, dry_run: bool) -> bool:
    return variant in gpu_targets.TWINS and gpu_targets.is_target(variant, cfg, dry_run)


def target_or_twin(variant: str, cfg: Config, dry_run: bool) -> bool:
    """A target or its fp32 twin (the eager step at 2,048 is no target: `gpu-presets` measures it, later)."""
    return variant in (gpu_targets.VARIANT, *gpu_targets.TWINS) and gpu_targets.is_target(variant, cfg, dry_run)


def h4_placement(variant: str, cfg: Config) -> bool:
    """The placements H4's rule reads (host, uvm, cached against hbm): LFU's cache, which no rule reads, later."""
    return variant != GPU_CACHED_LFU


def not_h4_placement(variant: str, cfg: Config) -> bool:
    return not h4_placement(variant, cfg)


def with_repeats(run: GpuRun, repeats: int, runs: int = 1) -> GpuRun:
    return run._replace(specs=[dataclasses.replace(spec, repeats=repeats, runs=runs) for spec in run.specs])


def verdict_run(run: GpuRun, dry_run: bool, lending: str, only, claims: tuple[str, ...]) -> GpuRun:
    """`run` cut to a claim's deciding points (`only`), in `VERDICT_RUNS` runs of the lending's whole repeats (a
    dry run's: one repeat)."""
    cut = with_repeats(run, 1 if dry_run else REPEATS_OF[lending], runs=VERDICT_RUNS)
    return cut._replace(only=only, claims=claims)


def knob_ends(specs: list[sweep.Sweep]) -> frozenset[str]:
    """The configs H1 reads: gpu-hbm at each model-shape knob's two ends (every knob sweep but batch size)."""
    ends: set[str] = set()
    for spec in specs:
        if "batch-size" in spec.name or "grid" in spec.name:
            continue
        found = sweep.points(spec)
        ends |= {found[0].cfg.hash(), found[-1].cfg.hash()}
    return frozenset(ends)


def grid_read(spec: sweep.Sweep) -> frozenset[str]:
    """The configs H2 or H3 reads on the dense x sparse grid, each variant's: every point at a dense-features
    end or a table-count end (H2 compares the dense ends at each table count, H3 the table ends at each dense
    count); the centre point no rule reads."""
    middles = {f"{key}={value}" for key, values in spec.grid.items() for value in values[1:-1]}
    return frozenset(p.cfg.hash() for p in sweep.points(spec) if not set(p.grid) <= middles)


def hashed(configs: frozenset[str], variant: str, cfg: Config) -> bool:
    return cfg.hash() in configs


def only_variants(variants: tuple[str, ...], variant: str, cfg: Config) -> bool:
    return variant in variants


def profile_run(run: GpuRun, work: Path) -> GpuRun:
    """The target points in bf16, one repeat, their records (with the profiled window) in PROFILES_FILE."""
    specs = [dataclasses.replace(s, repeats=1, out=str(work / PROFILES_FILE)) for s in run.specs]
    return GpuRun("gpu-target-profiles", specs, run.only)


def phases(work: Path, dry_run: bool, lending: str = "A") -> list[Phase]:
    """The lending's phases in order (records in `work`), each with its H200 estimate (`LENDINGS`)."""
    if lending not in LENDINGS:
        raise UsageError(f"no lending {lending!r}: choose one of {', '.join(LENDINGS)}")
    runs = {run.study: run for run in gpu_grid.runs(work, dry_run)}
    targets = runs.pop(TARGETS_RUN)
    bf16 = with_repeats(targets._replace(only=partial(bf16_target, dry_run=dry_run)), 1)
    placements = runs.pop(PLACEMENTS_RUN)
    lfu = placements._replace(only=not_h4_placement, claims=())  # no rule reads LFU's cache
    sensitivity = runs.pop(next(study for study in runs if study.startswith(SENSITIVITY_RUN)))
    grid, *knobs = sensitivity.specs
    if lending == "A":
        h1 = verdict_run(sensitivity._replace(specs=knobs), dry_run, "A", partial(hashed, knob_ends(knobs)), ("H1",))
        h4_only = partial(only_variants, (GPU_HBM, GPU_HOST, GPU_CACHED))
        h4 = verdict_run(placements, dry_run, "A", h4_only, ("H4",))
        uvm = placements._replace(only=partial(only_variants, (GPU_HBM, GPU_UVM)), claims=())  # shown, not judged
        uvm = with_repeats(uvm, 1, runs=VERDICT_RUNS + 1)
        fp32 = with_repeats(targets._replace(only=partial(fp32_twin, dry_run=dry_run)), 1)
        head = [
            Phase("targets-bf16", runs=[bf16], headline=True, retry=True),
            *verdict_phases([h1, h4]),
            Phase("targets-fp32", runs=[fp32], headline=True, retry=True),  # no rule reads it: after the verdicts
            Phase("uvm", runs=[uvm], slot=VERDICT_RUNS + 1),  # its own run: hbm beside it, apart from H4's
            Phase("targets-repeats", runs=[targets._replace(only=partial(target_or_twin, dry_run=dry_run))]),
        ]
    else:
        h23 = verdict_run(sensitivity._replace(specs=[grid]), dry_run, "B", partial(hashed, grid_read(grid)),
                          ("H2", "H3"))  # fmt: skip
        head = verdict_phases([h23])
    measured = [cfg for phase in head if phase.headline for run in phase.runs
                for _, _, cfg in gpu_budget.pending_items(run, set())[0]]  # fmt: skip
    plan = [
        Phase("numerics", kind="numerics", headline=True, shapes=numerics.shapes(measured)),
        *head,
        Phase("gpu-tests", kind="tests"),
        Phase("profiles", kind="profiles", runs=[profile_run(bf16, work)]),
        Phase("embedding", kind="embedding"),
        Phase("same-host", runs=[gpu_grid.same_host(work, dry_run)]),
        Phase("rest", runs=[lfu, *runs.values()]),
    ]
    estimate(plan)
    return plan


def verdict_phases(runs: list[GpuRun]) -> list[Phase]:
    """One phase (a process) per run slot of the verdict runs: `VERDICT_RUNS` runs, each its own process."""
    return [
        Phase(f"verdict-run-{slot}", runs=runs, headline=True, whole=True, slot=slot)
        for slot in range(1, VERDICT_RUNS + 1)
    ]


def claims_of(plan: list[Phase]) -> dict[str, list[int]]:
    """Each claim the plan's verdict phases measure, with the run slots (one a phase) that measure it."""
    found: dict[str, list[int]] = {}
    for phase in plan:
        for run in phase.runs:
            for claim in run.claims:
                found.setdefault(claim, []).append(phase.slot)
    return found


def estimate(plan: list[Phase]) -> None:
    """Each phase's `estimate_s` on an H200: its process's start, its runs' measurements less those an
    earlier phase measured (by run slot, repeat, variant and config), each run's builds and profiled windows."""
    counted: set[tuple[int, int, str, str]] = set()
    at = 0.0
    for number, phase in enumerate(plan):
        seconds = PHASE_START_S + (TRITON_COLD_S if number == 0 else 0.0)
        if any(v.startswith("host-") for run in phase.runs for spec in run.specs for v in spec.variants):
            seconds += max(0.0, KERNEL_BUILD_S - at)  # the host's loops wait for the C++ kernels built from t = 0
        if phase.kind == "numerics":
            seconds += NUMERICS_S
        elif phase.kind == "tests":
            seconds += GPU_TESTS_S
        elif phase.kind == "embedding":
            seconds += gpu_budget.EMBEDDING_S
        elif phase.kind == "profiles":
            seconds += gpu_budget.PROBES_S + runs_s(phase.runs, set(), profiled=True)
        else:
            seconds += runs_s(phase.runs, counted, profiled=False, slot=phase.slot)
        phase.estimate_s = seconds
        at += seconds


def runs_s(runs: list[GpuRun], counted: set, profiled: bool, slot: int = 0) -> float:
    """Seconds of the runs' measurements not in `counted` (then added to it), in one process. A phase of one run
    slot (`slot`) measures that slot only; otherwise a sweep of several runs is charged once a slot, builds
    included: the runner builds a slot's points anew."""
    seconds = 0.0
    for run in runs:
        items, _ = gpu_budget.pending_items(run, set())
        items = [(r, v, cfg) for r, v, cfg in items if (slot, r, v, cfg.hash()) not in counted]
        counted |= {(slot, r, v, cfg.hash()) for r, v, cfg in items}
        seconds += (1 if slot else run.specs[0].runs) * slot_s(items, profiled)
    return seconds


def slot_s(items: list, profiled: bool) -> float:
    """Seconds of one run's measurements (`gpu_budget.Item`s), its builds included."""
    call = gpu_budget.Call(0.0)
    if not profiled:
        call.profiled = {cfg.hash() for _, _, cfg in items}  # a lending's runs do not profile
    return call.take(items, gpu_budget.kept(items))[0]


def headline_s(plan: list[Phase]) -> float:
    """When the headline phases should end, from a cold start (the phases before the first other one)."""
    return sum(phase.estimate_s for phase in plan if phase.headline)


def verdicts_end_s(plan: list[Phase]) -> float:
    """When the last verdict run should end, from a cold start (`VERDICTS_BY_S` holds it)."""
    ends = [sum(p.estimate_s for p in plan[: at + 1]) for at, phase in enumerate(plan) if phase.whole]
    return max(ends, default=0.0)


def plan_lines(plan: list[Phase], budget_s: float, lending: str = "A") -> list[str]:
    """The plan before anything runs: the claims it judges, each phase's estimate and when it should end."""
    judged = ", ".join(f"{claim} in runs {', '.join(map(str, slots))}" for claim, slots in claims_of(plan).items())
    lines = [f"lending {lending} ({judged}; each run a process), estimated on an H200 from a cold start; "
             f"budget {budget_s:.0f} s:"]  # fmt: skip
    at = 0.0
    for phase in plan:
        at += phase.estimate_s
        mark = "headline, " if phase.headline else ""
        past = "" if at <= budget_s else " (past the budget: a later lending resumes it)"
        lines.append(
            f"  {phase.name} ({mark}{phase.kind}): about {phase.estimate_s:.0f} s, finishing near {at:.0f} s{past}"
        )
    lines.append(
        f"  the verdict phases end near {verdicts_end_s(plan):.0f} s, the headline's near "
        f"{headline_s(plan):.0f} s (held under {LENDING_LIMIT_S:.0f} s)"
    )
    return lines
