"""The GPU grid: what one GPU session measures, most valuable first (`scripts/gpu_check.sh` runs it).

1. `gpu-targets`: the three throughput targets (`plans.gpu_targets`: mlperf-scaled bf16 hbm
   captured at 2,048 and 65,536, dlrm-benchmark at 16,384) with their fp32 twins, and the eager
   step at 2,048, in 3 repeats: the points of item 4 that judge the targets, first.
2. `gpu-placements` (H4): mlperf-scaled with Zipf(1.05) ids and 10% of rows cached, its tables in
   hbm, host, uvm and cached (LRU, and LFU beside it), in `VERDICT_REPEATS`.
3. The CPU sensitivity study (the dense x sparse grid and every knob) mirrored on the GPU as one
   run, with the host's CPU loops at the grid's points, in `VERDICT_REPEATS`: H1 reads each
   model-shape knob's two ends (gpu-hbm), H2 and H3 the grid's GPU and host-CPU points. The knob
   ends and the grid share points (the base, and the grid's points that are dense-features or
   tables ends), so they are one run: split, a shared point's repeats would pair with one of them
   only. Only the batch-size knob's value (no rule reads it) rides along in the same repeats.
4. `gpu-presets`: mlperf-scaled and dlrm-benchmark at their batch of 2,048, captured in bf16
   and fp32 and eager in bf16 (`gpu-eager`: what the capture buys); `gpu-presets-large`: the
   same at batches 16,384 and 65,536, captured only (bf16 against fp32 where the GPU is busy).
   Points are named by preset and batch; each run is memory-checked before it allocates, and a
   run's builds are kept across its repeats where they fit together.
5. `gpu-dispatch-floor`: kaggle at its batch of 128. Its step is too small to keep a GPU busy:
   it measures the cost of dispatching a step, and no claim uses it (the study name says so).
6. The placements against id skew and table size, then the CPU loops on the GPU machine's own
   CPU (`cpu-loops`, all its cores): S1 and S3 on a CPU with AMX, a class of CPU the 2-core
   development machines do not have.

Repeats: a verdict word needs `analysis.stats.MIN_PAIRS` pairs (5), so the points the H1-H4 rules
read (items 2 and 3) are measured in `VERDICT_REPEATS` (a test holds it to MIN_PAIRS; studies
come before analysis, so it is not imported); the points no rule reads keep `REPEATS` (3). A
session on the same machine and versions resumes by repeat (`records.store.resume_key`): it
measures only the repeats the records lack, and a verdict run is measured in whole repeats, one
call's budget at a time (`lending.gpu_budget.whole_repeats`), since a repeat split between two
calls is measured in two runs, whose halves never pair, and no later call measures it again.

Budget: computed from the plan by `lending.gpu_budget.estimate` (the last H200 session's measured
costs, the GPU model's step times) and printed by gpu_check before it measures, call by call. The
targets' run ends inside the first call's budget (gpu_check's 290 s, after the tests, the profiler's
probes and the embedding benchmark; a test checks it); the runs past the budget resume in later
calls. By that estimate, with the tests in every call, the placements (H4) end in call 2 and the
sensitivity run (H1-H3) in call 4, and the whole plan needs 6 calls of 290 s (a test holds these
numbers to the code): two calls reach the targets and H4's five pairs, not H1-H3's.
"""

import dataclasses
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import NamedTuple

from dlrm_study.config import Config
from dlrm_study.config.variants import (
    GPU_EAGER,
    GPU_HBM,
    GPU_HBM_FP32,
    GPU_PLACEMENTS,
    GPU_PRESETS,
    HOST_OPTIMIZED_BF16,
    HOST_REFERENCE,
    OPTIMIZED_BF16,
    OPTIMIZED_FP32,
    REFERENCE,
)
from dlrm_study.plans import gpu_targets
from dlrm_study.plans.cpu import cpu_loops
from dlrm_study.plans.sensitivity import GPU_RECORDS, gpu_mirrors
from dlrm_study.plans.sweep import Sweep

PLACEMENT_VARIANTS = list(GPU_PLACEMENTS)
PRESET_VARIANTS = list(GPU_PRESETS)
LARGE_VARIANTS = [GPU_HBM, GPU_HBM_FP32]  # captured only: graph against eager is measured at 2,048
PRESETS = ["mlperf-scaled", "dlrm-benchmark"]
LARGE_BATCHES = [16_384, 65_536]
REPEATS = 3  # a point no claim's rule reads, measured in interleaved repeats (measure.runner)
VERDICT_REPEATS = 5  # the points the H1-H4 rules read: stats.MIN_PAIRS pairs, as a verdict word needs them
DRY_REPEATS, DRY_VERDICT_REPEATS = 2, 3  # a dry run's: it exercises the code, and keeps the two apart
# The host's CPU loops: the claim presets (S1, S3), without torchrec (not installed on the GPU host).
HOST_PRESETS = ["dlrm-benchmark", "mlperf-scaled"]
HOST_LOOPS = [REFERENCE, OPTIMIZED_FP32, OPTIMIZED_BF16]
# Not a throughput point: the study whose records no claim reads.
DISPATCH_FLOOR = "gpu-dispatch-floor"
TARGETS_RUN = gpu_targets.STUDY
PLACEMENTS_RUN = "gpu-placements"
SENSITIVITY_RUN = "gpu-sensitivity-"  # and the profile
SAME_HOST_RUN = "gpu-same-host"
SAME_HOST_VARIANTS = [GPU_HBM, HOST_OPTIMIZED_BF16, HOST_REFERENCE]


class GpuRun(NamedTuple):
    """One run of the session: its study name, the sweeps measured together, (the targets' run) which
    of their points it measures (`only(variant, config)`; None: all), and the claims whose verdict
    rules read its points (a verdict run: measured in `VERDICT_REPEATS`, whole repeats per call)."""

    study: str
    specs: list[Sweep]
    only: Callable[[str, Config], bool] | None = None
    claims: tuple[str, ...] = ()


def sweeps(out: Path, dry_run: bool) -> list[Sweep]:
    """Every sweep of the grid (`runs`), in order, each once (the targets' run measures some of the presets')."""
    seen: dict[str, Sweep] = {}
    for run in runs(out, dry_run):
        for spec in run.specs:
            seen.setdefault(spec.name, spec)
    return list(seen.values())


def runs(out: Path, dry_run: bool) -> list[GpuRun]:
    """The grid, most valuable first, as runs of sweeps measured together; records in `out`.

    The sensitivity study's GPU points (every knob and the dense x sparse grid) are one run, as on
    the CPU (`sensitivity.measure`), so every knob value pairs with the base point within a repeat.
    A dry run: the CPU, tiny sizes, the presets' stand-ins written under `out` (`gpu_targets.dry_configs`).
    """
    device, profile = ("cpu", "smoke") if dry_run else ("cuda", "quick")
    records = str(out / GPU_RECORDS)
    verdict = DRY_VERDICT_REPEATS if dry_run else VERDICT_REPEATS
    own = partial(grid_sweep, out, dry_run)

    zipf = ["data.id_distribution=zipf", "data.zipf_alpha=1.05", "train.cache_fraction=0.1"]
    if dry_run:  # tiny's 4 x 1,000 rows: a cache of 10% is smaller than one batch's rows
        zipf[-1] = "train.cache_fraction=0.5"
    # The presets (a dry run's stand-ins: two bases, as the real grid's, so its plan keeps their points apart).
    large = {"train.batch_size": [gpu_targets.DRY_BATCHES[b] for b in LARGE_BATCHES] if dry_run else LARGE_BATCHES}
    presets = own("gpu-presets", PRESETS, PRESET_VARIANTS, [])
    presets_large = own("gpu-presets-large", PRESETS, LARGE_VARIANTS, [], large)
    # (A dry run's floor: tiny at a batch of its own, or its points would be the presets'.)
    floor = own(DISPATCH_FLOOR, ["kaggle"], [GPU_HBM, GPU_EAGER], ["train.batch_size=24"] if dry_run else [])
    placements = own(PLACEMENTS_RUN, ["mlperf-scaled"], PLACEMENT_VARIANTS, zipf, times=verdict)
    skew = own(
        "gpu-placement-skew",
        ["mlperf-scaled"],
        PLACEMENT_VARIANTS,
        zipf[:1] + zipf[2:],
        {"data.zipf_alpha": [0.8, 1.2] if dry_run else [0.6, 1.05, 1.4]},
    )
    sizes = own(
        "gpu-placement-size",
        ["dlrm-benchmark"],
        PLACEMENT_VARIANTS,
        [*zipf[:2], "train.cache_fraction=0.2" if not dry_run else zipf[2], "data.lookups_per_table=10"],
        {"model.table_rows": ["4x500", "4x1000"] if dry_run else ["8x100000", "8x1000000", "8x4000000"]},
    )
    # The CPU study's specs name the points; its mirrors send their records to GPU_RECORDS. The
    # grid's mirror runs this host's CPU loops too, in the same run (H2/H3 pair them with the GPU).
    mirrored = gpu_mirrors(profile, out, device)
    for spec in mirrored:  # one run per session call: its budget counts repeats (each call is a run of its own)
        spec.out, spec.repeats, spec.runs = records, verdict, 1
    host = dataclasses.replace(cpu_loops(profile, out), variants=HOST_LOOPS, runs=1)
    if not dry_run:
        host.config = HOST_PRESETS
    targets = GpuRun(TARGETS_RUN, [presets, presets_large], partial(gpu_targets.is_target, dry_run=dry_run))
    # The verdict runs, H4's first (one point: the cheapest verdict), then H1-H3's (see the module docstring).
    verdicts = [
        GpuRun(PLACEMENTS_RUN, [placements], claims=("H4",)),
        GpuRun(SENSITIVITY_RUN + profile, mirrored, claims=("H1", "H2", "H3")),
    ]
    rest = [GpuRun(s.name, [s]) for s in (presets, presets_large, floor, skew, sizes, host)]
    return [targets, *verdicts, *rest]


def grid_sweep(
    out: Path,
    dry_run: bool,
    name: str,
    configs: list[str],
    variants: list[str],
    set_: list[str],
    grid: dict | None = None,
    times: int | None = None,
) -> Sweep:
    """A sweep of the grid, records in `out`; a dry run's on tiny, its presets' on their stand-ins (YAML
    files under `out`), on the CPU at a dry run's counts."""
    device = "cpu" if dry_run else "cuda"
    # A GPU point warms up and times blocks of steps (measure.gpu); these are its least counts.
    steps, warmup = (2, 1) if dry_run else (10, 10)
    stand_ins = gpu_targets.dry_configs(out) if dry_run else {}
    base = [stand_ins.get(c, "tiny") for c in configs] if dry_run else configs
    set_ = [*set_, f"train.device={device}"]
    times = times or (DRY_REPEATS if dry_run else REPEATS)
    return Sweep(name, base, set_, grid or {}, variants, times, steps, warmup, 0, str(out / GPU_RECORDS))


def same_host(out: Path, dry_run: bool) -> GpuRun:
    """The same-host pair (H2/H3's heart; S1/S3 on the GPU machine's CPU): the presets at their batch of 2,048,
    gpu-hbm beside the optimized bf16 and reference CPU loops on the host's cores, interleaved in one run,
    in the repeats a verdict needs."""
    verdict = DRY_VERDICT_REPEATS if dry_run else VERDICT_REPEATS
    spec = grid_sweep(out, dry_run, SAME_HOST_RUN, PRESETS, SAME_HOST_VARIANTS, [], times=verdict)
    return GpuRun(SAME_HOST_RUN, [spec])
