"""bf16 against fp32 in the optimized loop, operator by operator, per machine (notebook 02, claim S3).

From any records of `optimized-bf16` and `optimized-fp32` measured side by side (a sweep's or
`dlrm-study compare`'s repeats): per machine and config, the bf16/fp32 ratio of each profiled
operator's time and of samples/s, paired within repeats (`stats.paired_ratios`), beside the
machine's own measured bf16/fp32 GEMM rate at the config's layer shapes and its random-row
gather rate, where the records carry the roofline's rates (`roofline.rates`). A time ratio
below 1 is an operator bf16 makes faster; a GEMM ratio near or below 1 is hardware (or a
library path) whose bf16 GEMM is no faster than its fp32 one, which no loop can make up for.

Each machine's records of its newest code only, warm-ups and the load guard's contended runs out: the records S3's
verdict reads (`evidence_records`, `claims.s3.s3_records`), so the table's bf16 over fp32 is the verdict's quantity
(at 95%; the verdict's intervals are at its own level) and never pools an earlier code's runs into it.
"""

from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd

from dlrm_study.analysis import clusters, wording
from dlrm_study.analysis.contention import contended_runs, without_contended
from dlrm_study.analysis.current import current, newest
from dlrm_study.analysis.evidence import Evidence
from dlrm_study.analysis.readers import pool
from dlrm_study.config.variants import BF16_PAIR
from dlrm_study.records import columns as col
from dlrm_study.records import store

FP32, BF16 = BF16_PAIR
# One repeat of one measurement run: the two variants pair up within it.
RUN = [col.MACHINE, col.STUDY, col.CONFIG_NAME]
TABLE = [*RUN, "quantity", "n", "center", "low", "high", "fp32", "bf16"]
LOOP, GEMM, GATHER = "samples/s", "GEMM rate (roofline)", "gather bytes/s (roofline)"
RECORD_FILES = ("sweeps.csv", "bench.csv")  # the CPU sweeps' and `dlrm-study compare`'s records


# The studies whose points are whole presets, one config per name: the CPU loops side by side
# (notebooks 01-02's sweep, `dlrm-study compare`). A sweep over a knob names many configs alike.
PRESET_STUDIES = r"^(cpu-loops|cpu-compare)"


def stored_records(folder: Path) -> pd.DataFrame:
    """Every machine's records of the CPU loops on the presets in a results folder, each machine's newest code only
    (`analysis.current`: warm-ups out), the runs the load guard caught left out."""
    caught = contended_runs(folder)
    frames = [store.load(folder / name) for name in RECORD_FILES if (folder / name).is_file()]
    frames = [f[f[col.STUDY].astype(str).str.match(PRESET_STUDIES)] for f in frames if not f.empty]
    frames = [without_contended(f, caught) for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=[col.VARIANT])
    return current(pd.concat(frames, ignore_index=True), newest(frames))


def evidence_records(
    evidence: Evidence,
    of: Callable[[Evidence, str], Evidence] = Evidence.of,
    studies: tuple[str, str] = ("cpu-loops-quick", "cpu-compare"),
) -> pd.DataFrame:
    """What S3's verdict reads of every machine, every preset kept (`claims.s3.s3_records`): each machine's part of
    the evidence (`of`: `report.reading.of` keeps the parts) of the CPU loops and of `dlrm-study compare`, pooled by
    point identity as the verdict pools them, at its newest code, warm-ups and contended runs out, at the machine's
    most threads. Their `study` is `studies` (the CPU loops' study, whatever name their points were measured under,
    and the comparison's), joined where both hold records: one table per machine and preset. Notebook 02's table."""
    frames = []
    for machine in evidence.machines():
        part = of(evidence, machine)
        loops = pool(part.cpu_loops, part.cpu_compare)  # in their order, as the verdict pools them
        if loops.empty or col.VARIANT not in loops:
            continue
        named = [studies[0]] * len(part.cpu_loops) + [studies[1]] * len(part.cpu_compare)
        loops = loops.assign(**{col.STUDY: named})  # the evidence is shared: never written to
        if col.THREADS in loops:  # the verdict's size: the machine's most threads
            threads = loops[col.THREADS].astype(float)
            loops = loops[threads == threads.max()]
        frames.append(loops.assign(**{col.STUDY: " and ".join(dict.fromkeys(loops[col.STUDY].astype(str)))}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[col.VARIANT])


def bf16_vs_fp32(records: pd.DataFrame) -> pd.DataFrame:
    """Per machine, study and config: bf16/fp32 of samples/s and of each operator's ms, and the
    measured GEMM and gather ratios, one row each (`quantity`); `fp32` and `bf16` are the medians.

    Ratios of measured repeats carry their 95% interval (`low`, `high`) and number of pairs `n`;
    the roofline's rates are one measurement per run (their `n` counts records, no interval).
    Every repeat counts (flagged ones too: `stats`); the flags stay in the records.
    """
    pair = records[records[col.VARIANT].isin([BF16, FP32])]
    if pair.empty:
        return pd.DataFrame(columns=TABLE)
    rows = [ratio_rows(pair, col.SAMPLES_PER_S, LOOP)]
    timed = pair
    rows += [ratio_rows(timed, col.op_column(name), name) for name in col.OPERATORS if col.op_column(name) in timed]
    rows += [rate_rows(pair, f"roofline_{kind}_{{}}_{unit}", label) for kind, unit, label in RATES]
    rows = [r for r in rows if not r.empty]
    return pd.concat(rows, ignore_index=True)[TABLE] if rows else pd.DataFrame(columns=TABLE)


# (kind, unit, label) of the roofline's rates compared: the GEMMs and the random-row gather.
RATES = [("gemm", "gflops", GEMM), ("gather", "gbps", GATHER)]


def ratio_rows(records: pd.DataFrame, column: str, label: str) -> pd.DataFrame:
    """bf16's value over fp32's per repeat, summarised per run; with both variants' medians."""
    measured = records.dropna(subset=[column])
    ratios = clusters.paired_ratios(measured, RUN, BF16, FP32, column)
    if ratios.empty:
        return ratios
    medians = measured.pivot_table(index=RUN, columns=col.VARIANT, values=column, aggfunc="median")
    ratios = ratios.join(medians.rename(columns={FP32: "fp32", BF16: "bf16"}), on=RUN)
    return ratios.assign(quantity=label)


def rate_rows(records: pd.DataFrame, pattern: str, label: str) -> pd.DataFrame:
    """The machine's measured bf16 rate over its fp32 rate at the run's shapes (median over its records)."""
    fp32, bf16 = pattern.format("fp32"), pattern.format("bf16")
    if fp32 not in records or bf16 not in records:
        return pd.DataFrame()
    carried = records.dropna(subset=[fp32, bf16])
    if carried.empty:
        return pd.DataFrame()
    out = carried.groupby(RUN, dropna=False).agg(n=(fp32, "size"), fp32=(fp32, "median"), bf16=(bf16, "median"))
    out = out.reset_index().assign(quantity=label, low=float("nan"), high=float("nan"))
    return out.assign(center=out["bf16"] / out["fp32"])


def explain(table: pd.DataFrame) -> pd.DataFrame:
    """One run's rows as a readable table: quantity, fp32, bf16 and the ratio with its interval."""
    ratios = [wording.describe(c, lo, hi, "x") for c, lo, hi in table[["center", "low", "high"]].to_numpy()]
    return pd.DataFrame(
        {
            "fp32": table["fp32"].round(2).to_numpy(),
            "bf16": table["bf16"].round(2).to_numpy(),
            "bf16 / fp32": ratios,
            "pairs": table["n"].to_numpy(),
        },
        index=pd.Index(table["quantity"], name="bf16 vs fp32"),
    )


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per machine, study and config: the loop's bf16/fp32 next to the measured GEMM and gather ratios."""
    shown = table.assign(
        ratio=[wording.describe(c, lo, hi, "x") for c, lo, hi in table[["center", "low", "high"]].to_numpy()]
    )
    wide = shown[shown["quantity"].isin([LOOP, GEMM, GATHER])].pivot(index=RUN, columns="quantity", values="ratio")
    names = {LOOP: "loop bf16/fp32 (samples/s)", GEMM: "GEMM bf16/fp32", GATHER: "gather bf16/fp32 (bytes/s)"}
    return wide.reindex(columns=[LOOP, GEMM, GATHER]).rename(columns=names).fillna("not in the records")


def breakdowns(table: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame]]:
    """(title, `explain` table) of every run whose records carry a per-operator breakdown."""
    for run, rows in table.groupby(RUN, sort=True):
        if len(rows) > rows["quantity"].isin([LOOP, GEMM, GATHER]).sum():
            yield " / ".join(map(str, run)), explain(rows)
