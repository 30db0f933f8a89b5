"""Runs as clusters: a ratio summarized per run, then across runs.

Pairs of one run are measured minutes apart under one variant order; runs are separate invocations
with their own order and their own day. So the pairs of a run are not independent observations: each
run is summarized first (the geometric mean of its paired ratios, or the logit-mean of its shares),
and the interval is Student's t over the run summaries on the log (logit) scale, with runs - 1
degrees of freedom. A verdict word needs `MIN_RUNS` runs, so that the leave-one-out check (`claims.claim`)
can read the same t interval over the runs left (at least 2); with one run the interval shown is over its pairs
(a within-run spread, no verdict word).

Every interval printed of records goes through here (`summarize`, `paired_ratio`, `paired_ratios`), a
verdict's and a figure's alike: one quantity, one interval, wherever it is printed. Records of one run
get the interval over their repeats, as before.
"""

import math
import statistics
from collections.abc import Sequence

import pandas as pd

from dlrm_study.analysis import stats
from dlrm_study.records import columns as col
from dlrm_study.rules import literal

MIN_RUNS = literal("intervals", "min_runs")  # runs a verdict word needs (one left out, a t interval over the rest)
RUN_KEYS = (col.MACHINE, col.THREADS, col.RUN_ID)  # one run: one invocation on one machine at one thread count


def invocations(frames: Sequence[pd.DataFrame]) -> dict[str, frozenset[str]]:
    """The runs of each invocation (one `make reproduce`, one notebook run) among these frames' records, by the
    invocation they recorded; records that recorded none, by the commit that measured them (one invocation runs at
    one commit, so runs of two commits are two invocations; runs of one commit may be several, read as one)."""
    found: dict[str, set[str]] = {}
    for frame in frames:
        if frame.empty or col.RUN_ID not in frame:
            continue
        named = frame[col.INVOCATION].fillna("").astype(str) if col.INVOCATION in frame else ""
        commit = frame[col.GIT_COMMIT].fillna("").astype(str) if col.GIT_COMMIT in frame else ""
        keys = pd.Series(named, index=frame.index).where(
            lambda k: k != "", "commit " + pd.Series(commit, index=frame.index)
        )
        for key, runs in frame[col.RUN_ID].astype(str).groupby(keys):
            found.setdefault(str(key), set()).update(runs)
    return {key: frozenset(runs) for key, runs in sorted(found.items())}


def run_groups(found: pd.DataFrame) -> list[pd.DataFrame]:
    """The rows of `found` (pairs or repeats), one frame per run."""
    keys = [k for k in RUN_KEYS if k in found]
    if not keys:
        return [found] if len(found) else []
    return [group for _, group in found.groupby(keys, dropna=False, sort=True)]


def run_values(found: pd.DataFrame, value: str) -> list[pd.Series]:
    """`run_groups`'s runs, in its order, of one column: grouping one column, not every one, is what makes a
    leave-one-out check over many runs affordable."""
    keys = [k for k in RUN_KEYS if k in found]
    if not keys:
        return [found[value]] if len(found) else []
    return [group for _, group in found.groupby(keys, dropna=False, sort=True)[value]]


def logs(values: pd.Series, share: bool, linear: bool = False) -> list[float]:
    """Positive values on the log scale (shares on the logit scale; `linear`: as they are)."""
    xs = [float(v) for v in values if v == v]
    if linear:
        return xs
    if share and xs and (min(xs) <= 0 or max(xs) >= 1):
        raise ValueError("shares must lie strictly between 0 and 1")
    if xs and min(xs) <= 0:
        raise ValueError("repeat values must be positive (times, rates or ratios)")
    return [math.log(x / (1 - x)) if share else math.log(x) for x in xs]


def back(value: float, share: bool, linear: bool = False) -> float:
    if value != value or linear:
        return value
    return 1 / (1 + math.exp(-value)) if share else math.exp(value)


def over_runs(
    found: pd.DataFrame,
    value: str = "ratio",
    confidence: float = stats.CONFIDENCE,
    share: bool = False,
    linear: bool = False,
) -> stats.Ratio:
    """The centre and interval of `value` with runs as clusters: each run's mean on the log (logit; `linear`: a
    value that may be negative, as it is) scale, then a t interval over the run means; one run: the interval
    over its rows (`runs` = 1 says so)."""
    groups = [g for g in run_values(found, value) if g.notna().any()]
    if not groups:
        return stats.NO_RATIO
    pairs = int(sum(g.notna().sum() for g in groups))
    means = [statistics.fmean(logs(g, share, linear)) for g in groups]
    spread = means if len(means) > 1 else logs(groups[0], share, linear)
    center = statistics.fmean(spread)
    if len(spread) < 2:
        return stats.Ratio(back(center, share, linear), math.nan, math.nan, pairs, math.nan, len(groups))
    half = stats.t_quantile(1 - (1 - confidence) / 2, len(spread) - 1) * statistics.stdev(spread)
    half /= math.sqrt(len(spread))
    c, lo, hi = (back(x, share, linear) for x in (center, center - half, center + half))
    return stats.Ratio(c, lo, hi, pairs, stats.half_width(c, lo, hi), len(groups))


def summarize(
    records: pd.DataFrame, by: Sequence[str], value: str = col.SAMPLES_PER_S, share: bool = False
) -> pd.DataFrame:
    """Per group of `by`: `n` (repeats or pairs), `center`, `low`, `high` and `half_width` (relative, +-), with
    runs as clusters (`over_runs`), `runs`, the runs the interval is over (1: over its repeats), and `studies`, whether
    those "runs" are records from before run ids, one per study (`stats.LEGACY`): studies pooled, not runs.
    `share`: parts of a whole, on the logit scale."""
    rows = []
    for group, frame in records.groupby(list(by), sort=True, dropna=False):
        r = over_runs(frame, value, share=share)
        row = dict(zip(by, group, strict=True))
        ids = frame[col.RUN_ID].astype(str) if col.RUN_ID in frame else pd.Series(dtype=str)
        studies = r.runs > 1 and len(ids) > 0 and not any(stats.interleaved(i) for i in ids)
        row.update(n=int(frame[value].notna().sum()), center=r.center, low=r.low, high=r.high, runs=r.runs,
                   studies=studies)  # fmt: skip
        row["half_width"] = stats.half_width(r.center, r.low, r.high)
        rows.append(row)
    return pd.DataFrame(rows, columns=[*by, *stats.SUMMARY, "runs", "studies"])


def paired_ratio(
    records: pd.DataFrame,
    variant: object,
    baseline: object,
    value: str = col.SAMPLES_PER_S,
    between: str = col.VARIANT,
    confidence: float = stats.CONFIDENCE,
) -> stats.Ratio:
    """`variant` over `baseline` over every pair the records hold (`stats.pairs`), runs as clusters; n = 0 where
    nothing pairs."""
    found = stats.pairs(records, variant, baseline, value, between)
    return over_runs(found, "ratio", confidence) if len(found) else stats.NO_RATIO


def paired_ratios(
    records: pd.DataFrame,
    by: Sequence[str],
    variant: object,
    baseline: object,
    value: str = col.SAMPLES_PER_S,
    between: str = col.VARIANT,
) -> pd.DataFrame:
    """Per group of `by`: `variant` over `baseline`, paired (`stats.pairs`), as a `summarize` table; `n` counts
    pairs."""
    found = stats.pairs(records, variant, baseline, value, between, by)
    if found.empty:
        return pd.DataFrame(columns=[*by, *stats.SUMMARY])
    return summarize(found, by, "ratio")


def interval_of(records: pd.DataFrame, values: pd.Series, share: bool = False) -> tuple[float, float, float]:
    """(centre, low, high) of `values`, one per record of `records` (same index), with runs as clusters."""
    r = over_runs(records.assign(_value=values), "_value", share=share)
    return r.center, r.low, r.high
