"""Each operator's time against its own bound, per machine (notebook 02): where a loop stands.

From records that carry a per-operator breakdown (`op_<name>_ms`, from profiled steps) and the
roofline bound split by operator (`roofline_op_<name>_ms`, `perfmodel.operator_bounds`): `dlrm-study
bench` and `make compare-upstream` write both. Per machine, config and variant: each operator's
median ms per step over repeats beside its bound, and the share of its bound achieved (bound over
time, per repeat: median and 95% interval), then the two halves of the step the targets name
(embeddings: forward and backward + update; MLPs: bottom, interaction, top and dense backward),
each against `TARGET`, and the whole timed step against the whole bound.

A part timed faster than its bound in any repeat shows the bound is not this machine's limit there
(a rate measured under load, or a probe a loop outdid): its row says "bound invalid here" and has no
share (never one over 100%) and no verdict; `beaten` counts such repeats.

Each machine's newest code only, and within it each config's newest limits: a loop that beats a cached
limit has it measured again (`measure.limits`), so the records measured against the limits it replaced
carry a bound that is no longer the machine's. Both kinds are left out and counted under the table.
"""

from pathlib import Path

import pandas as pd

from dlrm_study.analysis import clusters, wording
from dlrm_study.analysis.current import newest_code_only
from dlrm_study.analysis.readers import LEFT_OUT, leave_out
from dlrm_study.perfmodel.operator_bounds import BOUNDED
from dlrm_study.records import columns as col
from dlrm_study.records import store

GROUP = [col.MACHINE, col.CONFIG_NAME, col.VARIANT]
HALVES = {
    "embeddings": ("embedding_forward", "embedding_backward_update"),
    "MLPs": ("bottom_mlp", "interaction", "top_mlp", "dense_backward"),
}
TARGET = 0.85  # the study's target: each half of the step within 85% of its bound (README)
COLUMNS = [*GROUP, "part", "ms", "bound_ms", "of_bound", "low", "high", "n", "beaten"]
INVALID = "bound invalid here"
SUPERSEDED = "measured against limits since re-measured"


def rates_of(records: pd.DataFrame) -> list[str]:
    """The machine limits each record carries (`roofline_<kind>_gflops`, `roofline_<access>_gbps`)."""
    return [c for c in records.columns if c.startswith("roofline_") and c.endswith(("_gflops", "_gbps"))]


def newest_limits(records: pd.DataFrame) -> pd.DataFrame:
    """Each machine and config's records measured against its newest limits (those of its latest record), the
    others counted under SUPERSEDED; records that carry no limits pass as they are."""
    rates = rates_of(records)
    if records.empty or not rates:
        return records
    limits = records[rates].apply(pd.to_numeric, errors="coerce").fillna(-1.0)
    signature = pd.util.hash_pandas_object(limits, index=False)
    if col.TIMESTAMP in records:
        order = records[col.TIMESTAMP].fillna("").astype(str)
    else:  # records without timestamps (tests): the file's order
        order = pd.Series(range(len(records)), index=records.index)
    newest = signature.groupby([records[c] for c in GROUP[:2]]).transform(lambda s: s.loc[order[s.index].idxmax()])
    return leave_out(records, signature == newest, SUPERSEDED)


def judged(records: pd.DataFrame) -> pd.DataFrame:
    """What the table reads: each machine's newest code, then each machine and config's newest limits."""
    return newest_limits(newest_code_only(records))


def table(records: pd.DataFrame) -> pd.DataFrame:
    """One row per machine, config, variant and part (each bounded operator, each half, the step)."""
    parts = {name: (name,) for name in BOUNDED} | HALVES
    need = [col.op_column(n) for names in parts.values() for n in names]
    need += [col.bound_column(n) for names in parts.values() for n in names]
    if records.empty or any(c not in records for c in need):
        return pd.DataFrame(columns=COLUMNS)
    rows, records = [], judged(records.dropna(subset=need))
    for key, runs in records.groupby(GROUP, sort=True):
        for part, names in parts.items():
            ms = runs[[col.op_column(n) for n in names]].sum(axis=1)
            bound = runs[[col.bound_column(n) for n in names]].sum(axis=1)
            rows.append(row(key, part, ms, bound, runs))
        rows.append(row(key, "step (timed)", runs[col.MS_MEDIAN], runs[col.ROOFLINE_MS], runs))
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame.attrs[LEFT_OUT] = records.attrs.get(LEFT_OUT, {})
    return frame


def row(key: tuple, part: str, ms: pd.Series, bound: pd.Series, records: pd.DataFrame) -> list:
    """One table row: the part's median ms and bound, its share of the bound with its 95% interval (runs as
    clusters, of `records`' runs), and the repeats that beat the bound (then no share: a share over 100% would
    only say the bound is wrong)."""
    shares = bound / ms
    beaten = int((shares > 1).sum())
    center, low, high = (float("nan"),) * 3 if beaten else clusters.interval_of(records, shares)
    return [*key, part, ms.median(), bound.median(), center, low, high, len(ms), beaten]


def report(records: pd.DataFrame) -> str:
    """The table as text, a block per machine, config and variant, the halves judged against TARGET."""
    frame = table(records)
    if frame.empty:
        return "no records carry both a per-operator breakdown and the roofline bound (dlrm-study bench writes both)"
    emulated = emulated_bf16(records)
    lines = []
    for key, rows in frame.groupby(GROUP, sort=True):
        lines.append(" / ".join(map(str, key)) + f" ({rows['n'].max()} repeats): ms per step, bound, share of bound")
        for r in rows.itertuples():
            if r.beaten:
                lines.append(f"  {r.part:<28}{r.ms:9.2f}{r.bound_ms:9.2f}   {INVALID}: faster than its bound in "
                             f"{r.beaten} of {r.n} repeats: not this machine's limit")  # fmt: skip
                continue
            share = wording.describe(r.of_bound, r.low, r.high, percent=True, digits=2)
            judged = f"   target >= {TARGET:.0%}: {judge(r.low, r.high)}" if r.part in HALVES else ""
            if judged and key in emulated:
                judged = "   bf16 emulated here: not judged"
            lines.append(f"  {r.part:<28}{r.ms:9.2f}{r.bound_ms:9.2f}   {share}{judged}")
    for (machine, reason), count in sorted(frame.attrs.get(LEFT_OUT, {}).items()):
        lines.append(f"{machine}: {count} records left out, {reason}")
    return "\n".join(lines)


def emulated_bf16(records: pd.DataFrame) -> set[tuple]:
    """The (machine, config, variant) groups of bf16 records measured without native bf16: their target
    speaks of bf16 hardware, so they are shown, not judged."""
    if col.NATIVE_BF16 not in records or col.PRECISION not in records:
        return set()
    slow = records[(records[col.PRECISION].astype(str) == "bf16") & (records[col.NATIVE_BF16].astype(str) == "False")]
    return {tuple(key) for key in slow[GROUP].drop_duplicates().itertuples(index=False)}


def judge(low: float, high: float) -> str:
    """The verdict on a half against TARGET from its interval (`low` is NaN for one repeat)."""
    if low != low:
        return "one repeat: no verdict"
    return "meets" if low >= TARGET else "misses" if high < TARGET else "inconclusive"


def stored_report(folder: Path) -> str:
    """`report` of a results folder's bench records (`bench.csv`; notebook 02's cell)."""
    path = folder / "bench.csv"
    return report(store.load(path)) if path.is_file() else "no bench records here"
