"""One GPU lending's plan: the headline first, in phases, each estimated on an H200 from a cold start.

A lending is one call of at most 10 minutes (`scripts/gpu_lending.sh`). Its phases, in order:

1. `targets-bf16`: the three targets (`studies.gpu_targets`) in bf16, one repeat each;
2. `targets-fp32`: their fp32 twins, one repeat each;
3. `placements`: H4's placements (host, uvm, cached and hbm: what its rule reads) in `H4_RUNS` runs of
   `H4_REPEATS` whole repeats each, one run after the other in the phase's process (not yet a process per run,
   as the CPU's are: `studies.runs`): a verdict word needs `analysis.clusters.MIN_RUNS` (3) runs and
   `analysis.stats.MIN_PAIRS` (5) pairs; every repeat counts (records of protocol 2: the GPU step warms up for
   `measure.gpu.WARMUP_S` before each point's timing), so 3 runs of 3 give 9 pairs, 6 even if repeat 0 were
   dropped (the first lending measured one run of 5: "one run");
4. `targets-repeats`: the targets and twins up to `studies.gpu.REPEATS` repeats;
5. then, as far as the budget goes: the GPU tests, the profiled windows of the target points (records
   first, profiles after, in their own file: what explains a missed target), the embedding benchmark,
   `same-host` (gpu-hbm beside the optimized bf16 and reference CPU loops on the host's cores,
   `studies.gpu.same_host`, interleaved, in `VERDICT_REPEATS`: no rule reads it, as H2 and H3 read the
   dense x sparse grid and S1 and S3 the CPU study, so it is no headline), H1-H3's grid, and the rest (the
   eager step, LFU's cache, the presets, skew and size, the host's CPU loops).

Phases 1-3 are the headline, kept under `HEADLINE_LIMIT_S` by the estimate (a test holds it); the targets'
repeats 2 and 3 (about 95 s, most of it the fp32 twin at 65,536) would take it past that, so they come right
after it. The same-host pair's gpu-hbm point at mlperf-scaled's 2,048 is a target's point: a point is measured
once per repeat whatever the study (`records.store.resume_key`), so the same-host run measures it only at the
repeats the targets' runs left, and a target is read by its config, wherever it was measured
(`gpu_targets.measured`). Each phase is
one process (`measure.isolated`); its estimate is its runs' cost by `studies.gpu_budget` plus a
process's start (`PHASE_START_S`) and, in the first phase, Triton compiling its kernels (`TRITON_COLD_S`).
Both are leads. The first lending (2026-12-04, results/gpu-session/lending1-log.txt) ran each headline phase
within 6% of its estimate (266 s against 271 s in all) and the targets' repeats in 99 s against 88; its
Triton kernels did not compile (the torch twins ran), so TRITON_COLD_S is still unmeasured.
"""

import dataclasses
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from dlrm_study.config import Config
from dlrm_study.config.variants import GPU_CACHED_LFU
from dlrm_study.studies import gpu as gpu_grid
from dlrm_study.studies import gpu_budget, gpu_targets
from dlrm_study.studies.gpu import PLACEMENTS_RUN, SENSITIVITY_RUN, TARGETS_RUN, GpuRun

# Leads (not measured on the H200 yet): a phase process's start (Python, torch, the CUDA context: importing
# the phase's modules took about 3 s on a 2-core development machine), and the first phase's Triton
# compiling (later phases find the kernels in Triton's cache on disk). Compiling is cheap, so no cache
# travels: `scripts/triton_compile_check.py` builds all 10 kernels for sm_90, ptxas included, in 10.6 s of
# wall time with its imports (Triton 3.9 on a loaded 2-core Zen 3, 2026-12-03; its cache: 2.7 MB), and
# the H200's host has 16 cores. TRITON_COLD_S keeps twice that.
PHASE_START_S = 5.0
TRITON_COLD_S = 20.0
GPU_TESTS_S = 60.0  # the tests marked gpu: 11, one compiling the C++ kernels (25-60 s)
GPU_TESTS_TIMEOUT_S = 150.0
HEADLINE_LIMIT_S = 300.0  # the headline's estimate from a cold start stays under this (a test holds it)
LIMIT_FACTOR = 3.0  # a phase's watchdog: this many times its estimate (at least MIN_LIMIT_S), within the budget
MIN_LIMIT_S = 60.0
PROFILES_FILE = "gpu_profiles.csv"  # the targets' profiled windows: apart from the records they judge
HEADLINE_STUDIES = (TARGETS_RUN, PLACEMENTS_RUN)
LISTED_STUDIES = (*HEADLINE_STUDIES, gpu_grid.SAME_HOST_RUN)  # a summary line per record: the headline's, same-host's
H4_RUNS, H4_REPEATS = 3, 3  # runs of whole repeats: 9 pairs (6 even were repeat 0 a warm-up), over MIN_RUNS (3) runs


@dataclass
class Phase:
    """One phase: its kind (`runs`, `tests`, `profiles`, `embedding`), its runs, whether it is headline, and
    its estimate on an H200 (seconds, from its process's start)."""

    name: str
    kind: str = "runs"
    runs: list[GpuRun] = field(default_factory=list)
    headline: bool = False
    retry: bool = False  # a failed point is measured once more (the targets)
    whole: bool = False  # verdict runs: whole repeats only
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


def in_runs(run: GpuRun, dry_run: bool) -> GpuRun:
    """A verdict run as `H4_RUNS` runs of whole repeats (a dry run's: its own repeats, in as many runs)."""
    return with_repeats(run, run.specs[0].repeats if dry_run else H4_REPEATS, runs=H4_RUNS)


def profile_run(run: GpuRun, work: Path) -> GpuRun:
    """The target points in bf16, one repeat, their records (with the profiled window) in PROFILES_FILE."""
    specs = [dataclasses.replace(s, repeats=1, out=str(work / PROFILES_FILE)) for s in run.specs]
    return GpuRun("gpu-target-profiles", specs, run.only)


def phases(work: Path, dry_run: bool) -> list[Phase]:
    """The lending's phases in order (records in `work`), each with its H200 estimate."""
    runs = {run.study: run for run in gpu_grid.runs(work, dry_run)}
    targets = runs.pop(TARGETS_RUN)
    bf16 = with_repeats(targets._replace(only=partial(bf16_target, dry_run=dry_run)), 1)
    placements = runs.pop(PLACEMENTS_RUN)
    h4, lfu = placements._replace(only=h4_placement), placements._replace(only=not_h4_placement)
    sensitivity = next(study for study in runs if study.startswith(SENSITIVITY_RUN))
    twins = partial(target_or_twin, dry_run=dry_run)
    fp32 = with_repeats(targets._replace(only=partial(fp32_twin, dry_run=dry_run)), 1)
    plan = [
        Phase("targets-bf16", runs=[bf16], headline=True, retry=True),
        Phase("targets-fp32", runs=[fp32], headline=True, retry=True),
        Phase("placements", runs=[in_runs(h4, dry_run)], headline=True, whole=True),
        Phase("targets-repeats", runs=[targets._replace(only=twins)], retry=True),
        Phase("gpu-tests", kind="tests"),
        Phase("profiles", kind="profiles", runs=[profile_run(bf16, work)]),
        Phase("embedding", kind="embedding"),
        Phase("same-host", runs=[gpu_grid.same_host(work, dry_run)]),
        Phase("sensitivity", runs=[runs.pop(sensitivity)], whole=True),
        Phase("rest", runs=[lfu, *runs.values()]),  # LFU's cache alone: H4's points are the placements phase's
    ]
    estimate(plan)
    return plan


def estimate(plan: list[Phase]) -> None:
    """Each phase's `estimate_s` on an H200: its process's start, its runs' measurements less those an
    earlier phase measured (by repeat, variant and config), each run's builds and profiled windows."""
    counted: set[tuple[int, str, str]] = set()
    for number, phase in enumerate(plan):
        seconds = PHASE_START_S + (TRITON_COLD_S if number == 0 else 0.0)
        if phase.kind == "tests":
            seconds += GPU_TESTS_S
        elif phase.kind == "embedding":
            seconds += gpu_budget.EMBEDDING_S
        elif phase.kind == "profiles":
            seconds += gpu_budget.PROBES_S + runs_s(phase.runs, set(), profiled=True)
        else:
            seconds += runs_s(phase.runs, counted, profiled=False)
        phase.estimate_s = seconds


def runs_s(runs: list[GpuRun], counted: set, profiled: bool) -> float:
    """Seconds of the runs' measurements not in `counted` (then added to it), in one process; a sweep of several
    runs (slots) is charged once a slot, builds included: the runner builds a slot's points anew."""
    seconds = 0.0
    for run in runs:
        items, _ = gpu_budget.pending_items(run, set())
        items = [(r, v, cfg) for r, v, cfg in items if (r, v, cfg.hash()) not in counted]
        counted |= {(r, v, cfg.hash()) for r, v, cfg in items}
        seconds += run.specs[0].runs * slot_s(items, profiled)
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


def plan_lines(plan: list[Phase], budget_s: float) -> list[str]:
    """The plan before anything runs: each phase's estimate and when it should end, against the budget."""
    lines = [f"lending plan (estimated on an H200 from a cold start; budget {budget_s:.0f} s):"]
    at = 0.0
    for phase in plan:
        at += phase.estimate_s
        mark = "headline, " if phase.headline else ""
        past = "" if at <= budget_s else " (past the budget: a later lending resumes it)"
        lines.append(
            f"  {phase.name} ({mark}{phase.kind}): about {phase.estimate_s:.0f} s, finishing near {at:.0f} s{past}"
        )
    lines.append(f"  the headline phases: about {headline_s(plan):.0f} s (held under {HEADLINE_LIMIT_S:.0f} s)")
    return lines
