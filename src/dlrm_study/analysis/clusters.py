"""Runs as clusters: a ratio summarized per run, then across runs.

Pairs of one run are measured minutes apart under one variant order; runs are separate invocations
with their own order and their own day. So the pairs of a run are not independent observations: each
run is summarized first (the geometric mean of its paired ratios, or the logit-mean of its shares),
and the interval is Student's t over the run summaries on the log (logit) scale, with runs - 1
degrees of freedom. A verdict word needs `MIN_RUNS` runs, so that the leave-one-out check (`analysis.claims`)
can read the same t interval over the runs left (at least 2); with one run the interval shown is over its pairs
(a within-run spread, no verdict word).
"""

import math
import statistics

import pandas as pd

from dlrm_study.analysis import stats
from dlrm_study.records import columns as col
from dlrm_study.rules import literal

MIN_RUNS = literal("intervals", "min_runs")  # runs a verdict word needs (one left out, a t interval over the rest)
RUN_KEYS = (col.MACHINE, col.THREADS, col.RUN_ID)  # one run: one invocation on one machine at one thread count


def run_groups(found: pd.DataFrame) -> list[pd.DataFrame]:
    """The rows of `found` (pairs or repeats), one frame per run."""
    keys = [k for k in RUN_KEYS if k in found]
    if not keys:
        return [found] if len(found) else []
    return [group for _, group in found.groupby(keys, dropna=False, sort=True)]


def logs(values: pd.Series, share: bool, linear: bool = False) -> list[float]:
    """Positive values on the log scale (shares on the logit scale; `linear`: as they are)."""
    xs = [float(v) for v in values if v == v]
    if linear:
        return xs
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
    groups = [g for g in run_groups(found) if g[value].notna().any()]
    if not groups:
        return stats.NO_RATIO
    pairs = int(sum(g[value].notna().sum() for g in groups))
    means = [statistics.fmean(logs(g[value], share, linear)) for g in groups]
    spread = means if len(means) > 1 else logs(groups[0][value], share, linear)
    center = statistics.fmean(spread)
    if len(spread) < 2:
        return stats.Ratio(back(center, share, linear), math.nan, math.nan, pairs, math.nan, len(groups))
    half = stats.t_quantile(1 - (1 - confidence) / 2, len(spread) - 1) * statistics.stdev(spread)
    half /= math.sqrt(len(spread))
    c, lo, hi = (back(x, share, linear) for x in (center, center - half, center + half))
    return stats.Ratio(c, lo, hi, pairs, stats.half_width(c, lo, hi), len(groups))
