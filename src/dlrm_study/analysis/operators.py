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

Each machine's newest code only, of it each loop's newest invocation, and within it each config's newest limits: a
loop that beats a cached limit has it measured again (`measure.limits`), so the records measured against the limits
it replaced carry a bound that is no longer the machine's. All three kinds are left out and counted under the table.
"""

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from dlrm_study.analysis import clusters, wording
from dlrm_study.analysis.current import newest_code_only
from dlrm_study.analysis.readers import LEFT_OUT, leave_out
from dlrm_study.perfmodel import physical
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
EARLIER_INVOCATION = "of an earlier invocation than the newest (one invocation per row)"


@dataclasses.dataclass(frozen=True)
class Bound:
    """Which bound a table reads: each operator's column, the step's rows (label, column), whether the records
    carry the limits it was computed from (then only each config's newest limits count), and what a part
    faster than it says."""

    name: str
    operator: Callable[[str], str]
    steps: tuple[tuple[str, str], ...]
    limits_in_records: bool
    beaten: str


ROOFLINE = Bound("bound", col.bound_column, (("step (timed)", col.ROOFLINE_MS),), True, "not this machine's limit")
PHYSICAL = Bound(
    "physical bound",
    physical.op_column,
    (("step (timed), in sequence", physical.SEQUENTIAL), ("step (timed), overlapped", physical.OVERLAPPED)),
    False,
    "the probe fell short here",
)


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


def newest_invocation(records: pd.DataFrame) -> pd.DataFrame:
    """Each machine, config and variant's records of its newest invocation (the one that wrote its latest record;
    an invocation is its `invocation`, else its commit: `clusters.invocations`), the others counted under
    EARLIER_INVOCATION: a table row is one invocation's, whichever bound it is read against."""
    if records.empty or any(c not in records for c in GROUP):
        return records
    named = records[col.INVOCATION].fillna("").astype(str) if col.INVOCATION in records else ""
    commit = records[col.GIT_COMMIT].fillna("").astype(str) if col.GIT_COMMIT in records else ""
    key = pd.Series(named, index=records.index).where(lambda k: k != "", "commit " + pd.Series(commit, records.index))
    if col.TIMESTAMP in records:
        order = records[col.TIMESTAMP].fillna("").astype(str)
    else:  # records without timestamps (tests): the file's order
        order = pd.Series(range(len(records)), index=records.index)
    newest = key.groupby([records[c] for c in GROUP]).transform(lambda s: s.loc[order[s.index].idxmax()])
    return leave_out(records, key == newest, EARLIER_INVOCATION)


def judged(records: pd.DataFrame, bound: Bound = ROOFLINE) -> pd.DataFrame:
    """What the table reads, whichever `bound`: each machine's newest code, each machine, config and variant's
    newest invocation, then (where the records carry the roofline's limits) each machine and config's newest
    limits. The physical bound's table and the roofline's read the same records, so they print one step time per
    loop (issue 69: 463.05 and 307.84 ms for one key)."""
    return newest_limits(newest_invocation(newest_code_only(records)))


def table(records: pd.DataFrame, bound: Bound = ROOFLINE) -> pd.DataFrame:
    """One row per machine, config, variant and part (each bounded operator, each half, the step's rows)."""
    parts = {name: (name,) for name in BOUNDED} | HALVES
    need = [col.op_column(n) for names in parts.values() for n in names]
    need += [bound.operator(n) for names in parts.values() for n in names] + [c for _, c in bound.steps]
    if records.empty or any(c not in records for c in need):
        return pd.DataFrame(columns=COLUMNS)
    rows, records = [], judged(records.dropna(subset=need), bound)
    for key, runs in records.groupby(GROUP, sort=True):
        for part, names in parts.items():
            ms = runs[[col.op_column(n) for n in names]].sum(axis=1)
            least = runs[[bound.operator(n) for n in names]].sum(axis=1)
            rows.append(row(key, part, ms, least, runs))
        for label, column in bound.steps:
            rows.append(row(key, label, runs[col.MS_MEDIAN], runs[column], runs))
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


def report(
    records: pd.DataFrame,
    bound: Bound = ROOFLINE,
    targets: Callable[[tuple, str], tuple[float, str] | None] | None = None,
) -> str:
    """The table as text, a block per machine, config and variant. `targets(key, part)` gives a part's target
    (share, its name) or None; by default the halves are judged against TARGET."""
    frame = table(records, bound)
    if frame.empty:
        return f"no records carry both a per-operator breakdown and the {bound.name}"
    targets = targets or halves_target
    emulated = emulated_bf16(records)
    lines = []
    for key, rows in frame.groupby(GROUP, sort=True):
        head = f" ({rows['n'].max()} repeats): ms per step, {bound.name}, share of {bound.name}"
        lines.append(" / ".join(map(str, key)) + head)
        for r in rows.itertuples():
            if r.beaten:
                lines.append(f"  {r.part:<28}{r.ms:9.2f}{r.bound_ms:9.2f}   {INVALID}: faster than its {bound.name} "
                             f"in {r.beaten} of {r.n} repeats: {bound.beaten}")  # fmt: skip
                continue
            share = wording.describe(r.of_bound, r.low, r.high, percent=True, digits=2)
            target = targets(key, r.part)
            judged = f"   target >= {target[0]:.0%}{target[1]}: {judge(r.low, r.high, target[0])}" if target else ""
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


def halves_target(key: tuple, part: str) -> tuple[float, str] | None:
    """The roofline table's targets: each half of the step within TARGET of its bound."""
    return (TARGET, "") if part in HALVES else None


def judge(low: float, high: float, target: float = TARGET) -> str:
    """The verdict on a share against `target` from its interval (`low` is NaN for one repeat)."""
    if low != low:
        return "one repeat: no verdict"
    return "meets" if low >= target else "misses" if high < target else "inconclusive"


def stored_report(folder: Path) -> str:
    """`report` of a results folder's bench records (`bench.csv`; notebook 02's cell)."""
    path = folder / "bench.csv"
    return report(store.load(path)) if path.is_file() else "no bench records here"
