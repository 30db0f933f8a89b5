"""Notebooks 03 and 04: one knob at a time around a base config, CPU loops and (mirrored) GPU.

The base is `dlrm-benchmark` scaled to 8 x 100,000 rows, 20 lookups per table and batch
1,024, named `dlrm-benchmark-scaled` in records and captions. Every one-knob sweep contains
the base point. The whole study (the dense x sparse grid and every knob) is measured together
(`studies.sensitivity.measure`), in RUNS runs: in each, the base is measured once per repeat, every curve passes
through the same measurement, and every knob value pairs with it within a repeat of that run.
"""

import dataclasses
from pathlib import Path

from dlrm_study.config.variants import ALIASES, BF16_PAIR, GPU_HBM, REFERENCE
from dlrm_study.plans.profiles import RUNS, SWEEP
from dlrm_study.plans.sweep import Sweep

BASE_NAME = "dlrm-benchmark-scaled"
SENSITIVITY_BASE = [
    f"name={BASE_NAME}",
    "model.table_rows=8x100000",
    "data.lookups_per_table=20",
    "train.batch_size=1024",
]
BASE_DESCRIPTION = (
    f"{BASE_NAME}: dlrm-benchmark (512 dense features, bottom 512-512-64, top 1024-1024-1024-1, dim 64) "
    "with 8 x 100,000 rows, 20 lookups per table, batch 1,024"
)
SENSITIVITY_VARIANTS = [REFERENCE, *BF16_PAIR]

# Knobs, one at a time around the base: name -> (grid key, values, axis label, the base's value).
KNOBS = {
    "dense_features": ("model.dense_features", [16, 64, 512, 1024], "dense features", 512),
    "tables": ("model.table_rows", ["2x100000", "8x100000", "32x100000"], "sparse features (tables)", "8x100000"),
    "rows": ("model.table_rows", ["8x10000", "8x100000", "8x1000000"], "rows per table", "8x100000"),
    "lookups": ("data.lookups_per_table", [1, 20, 100], "lookups per table (pooling factor)", 20),
    "embedding_dim": (
        "model.embedding_dim+model.bottom_mlp",
        [[16, "512-16"], [64, "512-64"], [128, "512-128"]],  # the bottom MLP ends in the dimension
        "embedding dimension",
        [64, "512-64"],
    ),
    "mlp_width": (
        "model.top_mlp",
        ["256-256-256-1", "1024-1024-1024-1", "4096-4096-4096-1"],
        "top-MLP width (3 hidden layers, as the base)",
        "1024-1024-1024-1",
    ),
    "batch_size": ("train.batch_size", [256, 1024, 4096], "batch size", 1024),
}
# What the quick profile leaves out to afford its repeats (`full` measures every value).
QUICK_DROPS: dict[str, list] = {
    "dense_features": [64],
    "rows": ["8x1000000"],
    "mlp_width": ["4096-4096-4096-1"],
    "batch_size": [4096],
}
SMOKE_KNOBS = {  # the same knobs on `tiny`, small enough for CI; the first value is tiny's own
    "dense_features": [13, 4],
    "tables": ["4x1000", "2x1000"],
    "rows": ["4x1000", "4x100"],
    "lookups": [4, 1],
    "embedding_dim": [[8, "16-8"], [16, "16-16"]],
    "mlp_width": ["16-1", "8-1"],
    "batch_size": [32, 16],
}


def values(knob: str, profile: str) -> list:
    """The knob's values measured in a profile."""
    if profile == "smoke":
        return SMOKE_KNOBS[knob]
    kept = KNOBS[knob][1]
    return [v for v in kept if v not in QUICK_DROPS.get(knob, [])] if profile == "quick" else kept


def dropped(knob: str, profile: str) -> list:
    """The knob's values the profile leaves out (the notebook says so)."""
    return [v for v in KNOBS[knob][1] if v not in values(knob, profile)] if profile != "smoke" else []


def sized(name: str, profile: str, variants: list[str], grid: dict, out: Path) -> Sweep:
    p = SWEEP[profile]
    smoke = profile == "smoke"
    return Sweep(
        name=f"{name}-{profile}",
        config="tiny" if smoke else "dlrm-benchmark",
        set=["train.batch_size=32"] if smoke else list(SENSITIVITY_BASE),
        grid=grid,
        variants=variants,
        repeats=p.repeats,
        steps=p.steps,
        warmup=p.warmup,
        profile_steps=0,
        out=str(out / "sweeps.csv"),
        runs=RUNS[profile],
    )


def sensitivity(knob: str, profile: str, out: Path) -> Sweep:
    """One knob varied around the base (tiny in the smoke profile), the CPU loops at every value."""
    key = KNOBS[knob][0]
    return sized(
        f"sensitivity-{knob.replace('_', '-')}", profile, SENSITIVITY_VARIANTS, {key: values(knob, profile)}, out
    )


def study_sweeps(profile: str, out: Path) -> list[Sweep]:
    """The whole sensitivity study: the dense x sparse grid (notebook 03, H2/H3 first) and every one-knob
    sweep (notebooks 03 and 04)."""
    return [dense_sparse_grid(profile, out), *(sensitivity(knob, profile, out) for knob in KNOBS)]


def gpu_mirrors(profile: str, out: Path, device: str = "cuda") -> list[Sweep]:
    """The study's points on the gpu loop (`study_sweeps`' order); the grid's with this host's CPU loops
    beside the GPU (H2/H3)."""
    grid, *knobs = study_sweeps(profile, out)
    return [on_gpu(grid, device, host=True), *(on_gpu(spec, device) for spec in knobs)]


# --- the dense x sparse grid, and the same points on a GPU ---------------------------------------

GPU_RECORDS = "gpu_sweeps.csv"
NUMERICS_RECORDS = "gpu_numerics.csv"  # a lending's check of its GPU kernels (`lending.numerics`)
DENSE_SPARSE_GRID = {
    "model.dense_features": [16, 512, 1024],
    "model.table_rows": ["2x100000", "8x100000", "32x100000"],
}
SMOKE_DENSE_SPARSE_GRID = {"model.dense_features": [4, 13], "model.table_rows": ["2x1000", "4x1000"]}


GRID_CPU_VARIANTS = list(BF16_PAIR)  # the fastest one measured is chosen from the records


def dense_sparse_grid(profile: str, out: Path) -> Sweep:
    """Notebook 03's heatmap: dense x sparse features, both optimized CPU loops at every point (bf16 where
    native: `sweep.plan`). Which is faster is read from the records, never from the CPU reading them."""
    grid = SMOKE_DENSE_SPARSE_GRID if profile == "smoke" else DENSE_SPARSE_GRID
    return sized("dense-sparse-grid", profile, list(GRID_CPU_VARIANTS), dict(grid), out)


def on_gpu(spec: Sweep, device: str = "cuda", variants: tuple[str, ...] = (GPU_HBM,), host: bool = False) -> Sweep:
    """The same points on the gpu loop: GPU variants, records in GPU_RECORDS beside the CPU ones.

    `host`: the sweep's CPU loops too, on the GPU machine's host in the same run (`host-<loop>`,
    device cpu), so GPU over CPU is a ratio of one machine and one run, paired per repeat.
    More steps than on the CPU: a GPU step takes milliseconds, and the first ones compile kernels.
    """
    if host:
        variants = (*variants, *(alias for alias, loop in ALIASES.items() if loop in spec.variants))
    steps, warmup = (spec.steps, spec.warmup) if device == "cpu" else (max(spec.steps, 20), max(spec.warmup, 5))
    return dataclasses.replace(
        spec,
        name=f"gpu-{spec.name}",
        set=[*spec.set, f"train.device={device}"],
        variants=list(variants),
        steps=steps,
        warmup=warmup,
        profile_steps=0,
        out=str(Path(spec.out).with_name(GPU_RECORDS)),
    )
