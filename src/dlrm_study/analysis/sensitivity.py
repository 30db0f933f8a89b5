"""Notebooks 03 and 04's records: one knob's effect, the base point's intervals, GPU over CPU on the grid."""

from pathlib import Path

import pandas as pd

from dlrm_study.analysis import clusters, gpu_loop, stats, wording
from dlrm_study.analysis.current import current, newest
from dlrm_study.analysis.identity import RECORDS, record_ids
from dlrm_study.analysis.readers import check_cells, sweep_records
from dlrm_study.analysis.wording import variant_words
from dlrm_study.config.variants import ALIASES, BF16_PAIR, GPU_HBM, ORDER
from dlrm_study.errors import UsageError
from dlrm_study.plans import sweep
from dlrm_study.plans.sensitivity import GPU_RECORDS, KNOBS, SMOKE_KNOBS
from dlrm_study.plans.sweep import Sweep
from dlrm_study.records import columns as col
from dlrm_study.records import store


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
    return with_knob(knob, sweep_records(spec, machine))


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


def base_intervals(records: pd.DataFrame, device: str | None = None) -> list[str]:
    """The base point's 95% intervals over all repeats: each variant's samples/s, and optimized over
    reference (paired); of one device's records where `device` names it."""
    if device is not None:
        records = records[records[col.DEVICE] == device]
    lines = []
    for _, row in clusters.summarize(records, ["variant"]).iterrows():
        described = wording.describe(row.center, row.low, row.high, digits=0)
        lines.append(
            f"{variant_words(row.variant)}: {described} samples/s, +-{row.half_width:.1%} ({row.n:.0f} repeats)"
        )
    for variant in BF16_PAIR:
        r = clusters.paired_ratio(records, variant, "reference")
        if r.n:
            lines.append(
                f"{variant_words(variant)} / reference (paired): {wording.describe(r.center, r.low, r.high, 'x')}, "
                f"+-{r.half_width:.1%} ({r.n} pairs)"
            )
    return lines + wording.flag_note(records)


def knob_findings(records: pd.DataFrame, knob: str) -> list[str]:
    """One sentence per variant: samples/s at the knob's largest value over its smallest, paired within
    repeats of one run (all repeats, and without the flagged ones: `wording.paired_finding`)."""
    if records.empty:
        return [f"{KNOBS[knob][2]}: no finding: no records"]
    low_x, high_x = records["x"].min(), records["x"].max()
    lines = []
    for variant in dict.fromkeys(records[col.VARIANT]):
        f = wording.paired_finding(records[records[col.VARIANT] == variant], high_x, low_x, between="x")
        if not f.all.n:
            continue
        lines.append(
            f"{variant_words(variant)}: from {low_x:,.0f} to {high_x:,.0f} {KNOBS[knob][2]}, samples/s {f.text()}"
        )
    if not lines:
        lines.append(f"{KNOBS[knob][2]}: no finding: {wording.unpaired_reason(records, 'x')}")
    return lines + wording.flag_note(records)


def rates_table(records: pd.DataFrame) -> pd.DataFrame:
    """Thousand samples/s per knob value and variant: geometric mean of all repeats [95% interval], the
    knob's values as written (`16`, `10,000`), the rows named by the knob."""
    if records.empty:
        return pd.DataFrame()
    summary = clusters.summarize(records, ["x", "variant"])
    summary["k samples/s"] = [
        wording.describe(r.center / 1e3, r.low / 1e3, r.high / 1e3, digits=1) for r in summary.itertuples()
    ]
    table = summary.pivot(index="x", columns="variant", values="k samples/s")
    table.index = [f"{x:,.0f}" if float(x).is_integer() else f"{x:g}" for x in table.index]
    table.index.name = str(records["knob"].iloc[0]) if "knob" in records else "x"
    table.columns.name = None
    return table[[v for v in ORDER if v in table.columns] + [v for v in table.columns if v not in ORDER]]


def gpu_records(spec: Sweep) -> pd.DataFrame:
    """A GPU sweep's stored records on every GPU machine, or an empty frame where none were measured."""
    try:
        return sweep_records(spec, machine=None)
    except UsageError:
        return pd.DataFrame()


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

    def rates(frame: pd.DataFrame) -> pd.DataFrame:  # one record per cell (two are an error, not a median)
        frame = frame[frame[col.RUN_ID].map(stats.interleaved)]
        frame = check_cells(frame.assign(tables=frame["model.table_rows"].map(grid_tables)), keys)
        return frame.assign(_id=record_ids(frame)).set_index(keys)[[col.SAMPLES_PER_S, "_id"]]

    both = rates(gpu).merge(
        rates(cpu[cpu[col.VARIANT] == best]), left_index=True, right_index=True, suffixes=("_gpu", "_cpu")
    )
    ratio = (both[f"{col.SAMPLES_PER_S}_gpu"] / both[f"{col.SAMPLES_PER_S}_cpu"]).rename("ratio")
    ids = pd.Series([(g, c) for g, c in zip(both["_id_gpu"], both["_id_cpu"], strict=True)], index=both.index)
    found = pd.DataFrame({"ratio": ratio, RECORDS: ids}).dropna(subset=["ratio"]).reset_index()
    return found, ALIASES[best]


def gpu_over_cpu(records: pd.DataFrame) -> pd.DataFrame:
    """GPU over the fastest CPU loop at each (dense features, tables) point: the median of the paired
    per-repeat ratios (`gpu_over_cpu_pairs`); empty where no GPU host measured its own CPU grid."""
    pairs, _ = gpu_over_cpu_pairs(records)
    if pairs.empty:
        return pd.DataFrame()
    ratio = pairs.groupby(["model.dense_features", "tables"])["ratio"].median()
    ratio.index.names = ["dense features", "tables"]
    return ratio.unstack("dense features")


def gpu_status(out: Path) -> str:
    """Which GPU records this results folder holds, per GPU machine (`gpu_loop.census`: the records its verdicts
    read, each machine's newest code with warm-ups out, counted as docs/results.md counts them)."""
    path = out / GPU_RECORDS
    frame = store.load(path) if path.exists() else pd.DataFrame()
    gpu = frame[frame["device"] == "cuda"] if "device" in frame else frame.iloc[0:0]
    if gpu.empty:
        return (
            "GPU: not yet measured (no GPU records in this results folder; `bash scripts/gpu_check.sh` on a GPU "
            "makes them); no GPU curve or heatmap is drawn."
        )
    kept = current(gpu, newest([gpu]))
    return "\n".join(
        "GPU: " + gpu_loop.census_said(gpu_loop.census(kept[kept[col.MACHINE] == m]), m)
        for m in sorted(set(kept[col.MACHINE]))
    )


def grid_rates(records: pd.DataFrame) -> pd.DataFrame:
    """The dense x sparse grid's CPU rates on one machine: thousand samples/s, a row per table count, a column per
    loop and dense features (medians of repeats)."""
    frame = records.assign(tables=records["model.table_rows"].map(grid_tables))
    rates = frame.pivot_table(index="tables", columns=[col.VARIANT, "model.dense_features"],
                              values=col.SAMPLES_PER_S, aggfunc="median")  # fmt: skip
    return rates / 1000
