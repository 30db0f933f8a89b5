"""Flags: diagnostics printed beside a number, never filters. Every repeat counts.

- **self-checks**, written into each record when it is measured (`records.selfcheck`): its profiled
  operators sum to more than 15% away from its timed median (`profile-vs-timed`), or its p90/p10
  over the timed steps exceeds 1.5 (`spread`);
- **outliers**, computed when records are read, within each run so that adding a run never
  re-flags another's records: a repeat of a point whose log value lies more than `OUTLIER_Z` robust
  standard deviations (1.4826 x the median absolute deviation) from the median of that point's
  repeats in its run (`outlier`); and for a ratio, a pair whose log ratio lies that far from the
  median of its run's pairs. A slowdown that hits both members of a pair cancels in the ratio,
  so a pair is judged as a pair, not by its members' own timings.

Which flags put a quantity in doubt (`DOUBTS`): throughput is doubted by `spread` and `outlier`, a
per-operator breakdown also by `profile-vs-timed`. A finding is computed with all repeats (or pairs),
and again without the doubted ones, as a sensitivity check (`analysis.wording`, `claims`).
"""

import math
import statistics
from collections.abc import Sequence

import pandas as pd

from dlrm_study.analysis.stats import RUN
from dlrm_study.records import columns as col
from dlrm_study.records.selfcheck import flags as selfcheck_flags

OUTLIER_Z = 3.0  # robust z-score beyond which a repeat or a pair is an outlier of its run
MAD_TO_SD = 1.4826  # the MAD of normal data times this is its standard deviation
OUTLIER_MIN = 3  # repeats or pairs a run needs before any of them can be an outlier
POINT_KEYS = (col.CONFIG_HASH, col.VARIANT, col.MACHINE, col.THREADS, RUN)  # one point's repeats in one run
DOUBTS = {"throughput": {"spread", "outlier"}, "breakdown": {"spread", "outlier", "profile-vs-timed"}}


def outlying(values: Sequence[float]) -> list[bool]:
    """Which positive values lie more than OUTLIER_Z robust standard deviations from their median, on the log
    scale (none where there are fewer than OUTLIER_MIN; where all but some are equal, those differ)."""
    if len(values) < OUTLIER_MIN:
        return [False] * len(values)
    logs = [math.log(v) for v in values]
    middle = statistics.median(logs)
    spread = MAD_TO_SD * statistics.median(abs(x - middle) for x in logs)
    return [abs(x - middle) > OUTLIER_Z * spread if spread > 0 else x != middle for x in logs]


def with_flags(records: pd.DataFrame, value: str = col.MS_MEDIAN) -> pd.DataFrame:
    """The records with a `flags` column: the stored self-checks (computed for records stored before they
    existed), plus `outlier` for repeats far from their point's other repeats in the same run."""
    frame = records.copy()
    if frame.empty:
        return frame.assign(**{col.FLAGS: pd.Series(dtype=str)})
    computed = frame.apply(lambda row: selfcheck_flags(row.to_dict()), axis=1)
    stored = frame[col.FLAGS] if col.FLAGS in frame else pd.Series(pd.NA, index=frame.index)
    frame[col.FLAGS] = stored.fillna(computed).fillna("").astype(str)
    far = outliers(frame, value)
    frame.loc[far, col.FLAGS] = [";".join(filter(None, [text, "outlier"])) for text in frame.loc[far, col.FLAGS]]
    return frame


def outliers(records: pd.DataFrame, value: str = col.MS_MEDIAN) -> pd.Series:
    """Whether each repeat is an outlier of its point's repeats within its run (`outlying`)."""
    keys = [k for k in POINT_KEYS if k in records]
    if records.empty or value not in records or not {col.CONFIG_HASH, col.VARIANT} <= set(keys):
        return pd.Series(False, index=records.index)
    far = pd.Series(False, index=records.index)
    for _, group in records.groupby(keys, dropna=False):
        values = group[value].astype(float)
        ok = values.notna() & (values > 0)
        far.loc[values[ok].index] = outlying(list(values[ok]))
    return far


def doubted(flags: pd.Series, quantity: str = "throughput") -> pd.Series:
    """Whether each `;`-separated flag text holds a flag that puts `quantity` in doubt."""
    return flags.fillna("").astype(str).map(lambda text: bool(set(filter(None, text.split(";"))) & DOUBTS[quantity]))


def flagged(records: pd.DataFrame, quantity: str = "throughput") -> pd.Series:
    """Whether each record's flags (stored and outlier) put the quantity (`throughput` or `breakdown`) in doubt."""
    return doubted(with_flags(records)[col.FLAGS], quantity)


def pair_flags(found: pd.DataFrame, quantity: str = "throughput") -> pd.Series:
    """Whether each pair of `stats.pairs` is in doubt: an outlier of its run's pairs (`outlying` of the log
    ratios), or a member whose own self-check doubts the quantity (its steps spread too far)."""
    if found.empty:
        return pd.Series(False, index=found.index, dtype=bool)
    checks = DOUBTS[quantity] - {"outlier"}  # a member's own outlier flag says nothing of the pair
    own = found["flags_variant"].map(lambda t: has(t, checks)) | found["flags_baseline"].map(lambda t: has(t, checks))
    far = pd.Series(False, index=found.index)
    groups = found.groupby([k for k in (col.MACHINE, col.THREADS, RUN) if k in found], dropna=False)
    for _, group in groups:
        far.loc[group.index] = outlying(list(group["ratio"]))
    return (own | far).astype(bool)


def has(text: object, names: set[str]) -> bool:
    return bool(set(filter(None, str(text or "").split(";"))) & names)


def count_note(records: pd.DataFrame, quantity: str = "throughput") -> str:
    """`3 of 20 repeats flagged`, or "" when none is."""
    n = int(flagged(records, quantity).sum()) if not records.empty else 0
    return f"{n} of {len(records)} repeats flagged" if n else ""
