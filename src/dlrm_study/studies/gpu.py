"""The GPU grid: what one GPU session measures, most valuable first (`scripts/gpu_check.sh` runs it).

1. `gpu-presets`: mlperf-scaled and dlrm-benchmark at their batch of 2,048, captured in bf16
   and fp32 and eager in bf16 (`gpu-eager`: what the capture buys).
2. `gpu-presets-large`: the same at batches 16,384 and 65,536 (the throughput targets; bf16
   against fp32 where the GPU is busy). Each run is memory-checked before it allocates.
3. `gpu-dispatch-floor`: kaggle at its batch of 128. Its step is too small to keep a GPU busy:
   it measures the cost of dispatching a step, and no claim uses it (the study name says so).
4. `gpu-placements`, then the CPU sensitivity study (the dense x sparse grid and every knob)
   mirrored on the GPU as one run, then the placements against id skew and table size.
5. Last, the CPU loops on the GPU machine's own CPU (`cpu-loops`, all its cores): S1 and S3 on
   a CPU with AMX, a class of CPU the 2-core development machines do not have.

Budget, from the last H200 session (results/gpu-session/: the GPU tests 29 s, copy bandwidth
and embedding benchmark about 25 s, a preset build about 6 s, the 18 preset measurements of
the old grid about 35 s): items 1-3 are 60 measurements over 18 builds; each measurement now
warms up for at most 2 s (mostly 50 steps, well under), times 5 blocks of about 0.1 s and
profiles 5 steps: about 2 s, so about 120 s + 18 x 6 s of builds + about 60 s of tests and
embedding benchmark, inside gpu_check's 290 s budget. What is left resumes in a second call.
Item 5 has not run on that host yet: 30 measurements of 22 steps, about 5 minutes on the study's
2-vCPU machines (half of their cpu-loops study), so a fraction of that on 16 cores.
"""

import dataclasses
from pathlib import Path

from dlrm_study.config.variants import (
    GPU_EAGER,
    GPU_HBM,
    GPU_PLACEMENTS,
    GPU_PRESETS,
    OPTIMIZED_BF16,
    OPTIMIZED_FP32,
    REFERENCE,
)
from dlrm_study.measure.sweep import Sweep
from dlrm_study.studies.cpu import cpu_loops
from dlrm_study.studies.sensitivity import GPU_RECORDS, gpu_mirrors

PLACEMENT_VARIANTS = list(GPU_PLACEMENTS)
PRESET_VARIANTS = list(GPU_PRESETS)
LARGE_BATCHES = [16_384, 65_536]
REPEATS = 3  # every GPU point, measured in interleaved repeats (measure.runner)
# The host's CPU loops: the claim presets (S1, S3), without torchrec (not installed on the GPU host).
HOST_PRESETS = ["dlrm-benchmark", "mlperf-scaled"]
HOST_LOOPS = [REFERENCE, OPTIMIZED_FP32, OPTIMIZED_BF16]
# Not a throughput point: the study whose records no claim reads.
DISPATCH_FLOOR = "gpu-dispatch-floor"


def sweeps(out: Path, dry_run: bool) -> list[Sweep]:
    """Every sweep of the grid (`runs`), in order."""
    return [spec for _, group in runs(out, dry_run) for spec in group]


def runs(out: Path, dry_run: bool) -> list[tuple[str, list[Sweep]]]:
    """The grid, most valuable first, as (study, sweeps measured as one run); records in `out`.

    The sensitivity study's GPU points (every knob and the dense x sparse grid) are one run, as on
    the CPU (`sensitivity.measure`), so every knob value pairs with the base point within a repeat.
    A dry run: the CPU, tiny sizes.
    """
    device, profile = ("cpu", "smoke") if dry_run else ("cuda", "quick")
    # A GPU point warms up and times blocks of steps (measure.gpu); these are its least counts.
    steps, warmup = (2, 1) if dry_run else (10, 10)
    records = str(out / GPU_RECORDS)
    repeats = 2 if dry_run else REPEATS

    def own(name: str, configs: list[str], variants: list[str], set_: list[str], grid: dict | None = None) -> Sweep:
        base = ["tiny"] if dry_run else configs
        set_ = [*set_, f"train.device={device}"]
        return Sweep(name, base, set_, grid or {}, variants, repeats, steps, warmup, 0, records)

    zipf = ["data.id_distribution=zipf", "data.zipf_alpha=1.05", "train.cache_fraction=0.1"]
    if dry_run:  # tiny's 4 x 1,000 rows: a cache of 10% is smaller than one batch's rows
        zipf[-1] = "train.cache_fraction=0.5"
    large = {"train.batch_size": [48, 96] if dry_run else LARGE_BATCHES}  # (dry: no other sweep's points)
    presets = own("gpu-presets", ["mlperf-scaled", "dlrm-benchmark"], PRESET_VARIANTS, [])
    presets_large = own("gpu-presets-large", ["mlperf-scaled", "dlrm-benchmark"], PRESET_VARIANTS, [], large)
    # (A dry run's floor: tiny at a batch of its own, or its points would be the presets'.)
    floor = own(DISPATCH_FLOOR, ["kaggle"], [GPU_HBM, GPU_EAGER], ["train.batch_size=24"] if dry_run else [])
    placements = own("gpu-placements", ["mlperf-scaled"], PLACEMENT_VARIANTS, zipf)
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
    for spec in mirrored:
        spec.out, spec.repeats = records, repeats
    host = dataclasses.replace(cpu_loops(profile, out), variants=HOST_LOOPS)
    if not dry_run:
        host.config = HOST_PRESETS
    alone = [(spec.name, [spec]) for spec in (presets, presets_large, floor, placements)]
    return [*alone, (f"gpu-sensitivity-{profile}", mirrored), *((s.name, [s]) for s in (skew, sizes, host))]
