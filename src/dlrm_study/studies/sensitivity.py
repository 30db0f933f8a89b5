"""Notebooks 03 and 04: one knob at a time around a base config, CPU loops and (mirrored) GPU.

The base is `dlrm-benchmark` scaled to 8 x 100,000 rows, 20 lookups per table and batch
1,024, named `dlrm-benchmark-scaled` in records and captions. Every one-knob sweep contains
the base point. The whole study (the dense x sparse grid and every knob) is measured as one
run (`measure`): the base is measured once per repeat, every curve passes through the same
measurement, and every knob value pairs with it within a repeat of that run.
"""

import dataclasses
from pathlib import Path

import pandas as pd

from dlrm_study import results, sweep
from dlrm_study.errors import UsageError
from dlrm_study.measure import stats
from dlrm_study.records import columns as col
from dlrm_study.records.variants import ALIASES, BF16_PAIR, GPU_HBM, REFERENCE
from dlrm_study.studies.profiles import SWEEP
from dlrm_study.sweep import Sweep

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


def measure(profile: str, out: Path, device: str = "auto") -> list[str]:
    """The whole study measured as one run, so every knob value pairs with the base point within a
    repeat (`sweep.run_together`), and its GPU points as a second run where this machine has a GPU.
    Notebooks 03 and 04 both call it: the second finds everything recorded. One line per run."""
    runs = [(f"sensitivity-{profile}", study_sweeps(profile, out))]
    if gpu_here(device):
        runs.append((f"gpu-sensitivity-{profile}", gpu_mirrors(profile, out)))
    return [f"{study}: {sweep.run_together(group, study, progress=False)}" for study, group in runs]


def knob_value(knob: str, grid: str) -> float:
    """The x of a record's grid assignment: `model.table_rows=8x100000` is 8 tables or 1e5 rows."""
    first = grid.split()[0].split("=", 1)[1]
    if knob == "tables":
        return float(first.split("x")[0]) if "x" in first else float(len(first.split("-")))
    if knob == "rows":
        return float(first.split("x")[-1].split("-")[0])
    if knob == "mlp_width":
        return float(first.split("-")[0])
    return float(first)


def sensitivity_records(knob: str, spec: Sweep, machine: str | None = "this") -> pd.DataFrame:
    """A sensitivity sweep's records on one machine, with `x` (the knob's value) and `knob` (its label)."""
    return with_knob(knob, sweep.records(spec, machine))


def with_knob(knob: str, records: pd.DataFrame) -> pd.DataFrame:
    """The records with `x`, the knob's value at each point, and `knob`, its axis label."""
    frame = records.copy()
    frame["x"] = frame[col.POINT].map(lambda grid: knob_value(knob, grid))
    frame["knob"] = KNOBS[knob][2]
    return frame


def base_point(records: pd.DataFrame, knob: str, profile: str) -> pd.DataFrame:
    """The knob sweep's records at the base point."""
    base = SMOKE_KNOBS[knob][0] if profile == "smoke" else KNOBS[knob][3]
    label = " ".join(sweep.assignments(KNOBS[knob][0], base))
    return records[records[col.POINT] == label]


def base_intervals(records: pd.DataFrame) -> list[str]:
    """The base point's 95% intervals over all repeats: each variant's samples/s, and optimized over
    reference (paired)."""
    lines = []
    for _, row in stats.summarize(records, ["variant"]).iterrows():
        described = stats.describe(row.center, row.low, row.high, digits=0)
        lines.append(f"{row.variant}: {described} samples/s, +-{row.half_width:.1%} ({row.n:.0f} repeats)")
    for variant in BF16_PAIR:
        r = stats.paired_ratio(records, variant, "reference")
        if r.n:
            lines.append(
                f"{variant} / reference (paired): {stats.describe(r.center, r.low, r.high, 'x')}, "
                f"+-{r.half_width:.1%} ({r.n} pairs)"
            )
    return lines + stats.flag_note(records)


def knob_findings(records: pd.DataFrame, knob: str) -> list[str]:
    """One sentence per variant: samples/s at the knob's largest value over its smallest, paired within
    repeats of one run (all repeats, and without the flagged ones: `stats.paired_finding`)."""
    if records.empty:
        return [f"{KNOBS[knob][2]}: no finding: no records"]
    low_x, high_x = records["x"].min(), records["x"].max()
    lines = []
    for variant in dict.fromkeys(records[col.VARIANT]):
        f = stats.paired_finding(records[records[col.VARIANT] == variant], high_x, low_x, between="x")
        if not f.all.n:
            continue
        lines.append(f"{variant}: from {low_x:,.0f} to {high_x:,.0f} {KNOBS[knob][2]}, samples/s {f.text()}")
    if not lines:
        lines.append(f"{KNOBS[knob][2]}: no finding: {stats.unpaired_reason(records, 'x')}")
    return lines + stats.flag_note(records)


def rates_table(records: pd.DataFrame) -> pd.DataFrame:
    """Thousand samples/s per knob value and variant: median of all repeats [95% interval]."""
    if records.empty:
        return pd.DataFrame()
    summary = stats.summarize(records, ["x", "variant"])
    summary["k samples/s"] = [
        stats.describe(r.center / 1e3, r.low / 1e3, r.high / 1e3, digits=1) for r in summary.itertuples()
    ]
    return summary.pivot(index="x", columns="variant", values="k samples/s")


# --- the dense x sparse grid, and the same points on a GPU ---------------------------------------

GPU_RECORDS = "gpu_sweeps.csv"
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


def gpu_records(spec: Sweep) -> pd.DataFrame:
    """A GPU sweep's stored records on every GPU machine, or an empty frame where none were measured."""
    try:
        return sweep.records(spec, machine=None)
    except UsageError:
        return pd.DataFrame()


def with_gpu(knob: str, cpu_spec: Sweep, machine: str | None = "this") -> pd.DataFrame:
    """A sensitivity sweep's CPU records and, where measured, its GPU records (plotted as one)."""
    frame = sensitivity_records(knob, cpu_spec, machine)
    gpu = gpu_records(on_gpu(cpu_spec))
    if gpu.empty:
        return frame
    return pd.concat([frame, with_knob(knob, gpu)], ignore_index=True)


def grid_tables(rows: object) -> int:
    """The number of tables a `model.table_rows` value names (`8x100000` or `100-100-100`)."""
    text = str(rows)
    return int(text.split("x")[0]) if "x" in text else len(text.split("-"))


def fastest_cpu_loop(cpu: pd.DataFrame) -> str | None:
    """The CPU loop with the highest median samples/s in these records (chosen from them, not from this CPU)."""
    return str(cpu.groupby(col.VARIANT)[col.SAMPLES_PER_S].median().idxmax()) if not cpu.empty else None


def gpu_over_cpu_pairs(records: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """GPU (`gpu-hbm`) over the fastest CPU loop (`host-*`) per grid point and repeat, from the records of
    the grid mirrored on a GPU with its host's CPU loops (`on_gpu(..., host=True)`), paired within one
    run of one machine.

    Returns (dense features, tables, machine, run_id, repeat, ratio) rows and the CPU loop used. A GPU
    record and a CPU record of different machines or runs never pair: GPU over CPU is measured on the
    GPU's own host, in the same run (docs/claims.md).
    """
    keys = ["model.dense_features", "tables", col.MACHINE, col.RUN_ID, col.REPEAT]
    if records.empty:
        return pd.DataFrame(columns=[*keys, "ratio"]), None
    gpu = records[records[col.VARIANT] == GPU_HBM]
    cpu = records[records[col.VARIANT].isin(ALIASES)]
    best = fastest_cpu_loop(cpu)
    if gpu.empty or best is None:
        return pd.DataFrame(columns=[*keys, "ratio"]), best

    def rates(frame: pd.DataFrame) -> pd.Series:
        frame = frame[frame[col.RUN_ID].map(stats.interleaved)]
        return frame.assign(tables=frame["model.table_rows"].map(grid_tables)).groupby(keys)[col.SAMPLES_PER_S].median()

    ratio = (rates(gpu) / rates(cpu[cpu[col.VARIANT] == best])).dropna().rename("ratio").reset_index()
    return ratio, ALIASES[best]


def gpu_over_cpu(records: pd.DataFrame) -> pd.DataFrame:
    """GPU over the fastest CPU loop at each (dense features, tables) point: the median of the paired
    per-repeat ratios (`gpu_over_cpu_pairs`); empty where no GPU host measured its own CPU grid."""
    pairs, _ = gpu_over_cpu_pairs(records)
    if pairs.empty:
        return pd.DataFrame()
    ratio = pairs.groupby(["model.dense_features", "tables"])["ratio"].median()
    ratio.index.names = ["dense features", "tables"]
    return ratio.unstack("dense features")


def gpu_here(device: str) -> bool:
    """Whether a notebook's `device` parameter lets it measure on a GPU now."""
    import torch

    return device in ("auto", "cuda") and torch.cuda.is_available()


def gpu_status(out: Path) -> str:
    """Which GPU records this results folder holds: where and when they were measured."""
    path = out / GPU_RECORDS
    frame = results.load(path) if path.exists() else pd.DataFrame()
    gpu = frame[frame["device"] == "cuda"] if "device" in frame else frame.iloc[0:0]
    if gpu.empty:
        return (
            "GPU: not yet measured (no GPU records in this results folder; `bash scripts/gpu_check.sh` on a GPU "
            "makes them); no GPU curve or heatmap is drawn."
        )
    first = gpu.iloc[0]
    when = str(gpu[col.TIMESTAMP].min())[:10]
    return (
        f"GPU: {len(gpu)} records measured on {first[col.GPU_MODEL]} ({when}, commit {str(first[col.GIT_COMMIT])[:7]})."
    )
