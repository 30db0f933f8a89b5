"""Summaries of repeated measurements, made when records are read: intervals and paired ratios.

The unit of evidence is a repeat: one record, the median of its timed steps. Per point:

- **centre and 95% interval**: Student's t on the logarithms of the repeat values, back-transformed:
  the centre is their geometric mean `exp(mean(log x))` and the interval
  `exp(mean(log x) +- t(1 - a/2, n-1) * sd(log x) / sqrt(n))`, so the centre printed is the centre
  the interval is built on. Timings are positive and their noise on a shared machine is
  multiplicative (another job slows every step by a factor), so logs are the natural scale; for
  log-normal noise the interval covers the true median 95% of the time at any n >= 2 (tested on
  synthetic timings): with few repeats it is wide, as it should be. A share (a part of a whole)
  gets the same on the logit scale, so it stays inside (0, 1). With one repeat there is no
  interval (NaN).
- **paired ratio** of variant A over baseline B (a speedup), or of one knob value over another: per
  repeat, A's value over B's measured side by side in that repeat of one run (`run_id`) on one
  machine at one thread count (`pairs`); then the same centre and interval over those ratios.
  Records of two machines, two runs or two thread counts never pair; two records of one cell
  (the same point, variant, machine, threads, run and repeat) are an error, not a median. Knob
  values pair only in runs that interleaved them (every run with an id but the legacy ones).
- **records of several runs**: each run is a cluster, summarized first, then the interval is over
  the runs (`analysis.clusters`: `summarize`, `paired_ratio`). Every number printed of a point goes
  through it, so a quantity has one interval wherever it is printed.
- **a confidence below 95%** (`confidence`): for a rule that asks whether any of m comparisons
  holds, each interval is taken at 1 - 0.05 / m (Bonferroni; it is the first step of Holm's
  procedure, which is all an "any of" rule needs).

Diagnostics (flags) are `analysis.flags`'; the words said of these numbers are `analysis.wording`'s.
"""

import functools
import math
import statistics
import typing
from collections.abc import Iterable, Sequence

import pandas as pd

from dlrm_study.analysis.identity import RECORDS, record_ids
from dlrm_study.records import columns as col
from dlrm_study.rules import literal

SUMMARY = ("n", "center", "low", "high", "half_width")
CONFIDENCE = literal("intervals", "confidence")  # declared: src/dlrm_study/rules/rules.toml
MIN_PAIRS = 5  # pairs (or repeats) a verdict word needs
RUN = col.RUN_ID
LEGACY = "legacy-"  # run ids given to records written before run ids (scripts/migrate_records.py)
# What one cell of a comparison shares: a repeat of one run on one machine at one thread count.
CELL = (col.MACHINE, col.THREADS, RUN, col.REPEAT)


@functools.lru_cache(maxsize=1024)  # a pure function, asked the same few (p, df) thousands of times a render
def t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t with `df` degrees of freedom (p in (0.5, 1)), by bisection on its CDF."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    if not 0.5 <= p < 1:
        raise ValueError(f"p must lie in [0.5, 1), got {p}")
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        high *= 2
    for _ in range(100):  # 2**-100 of the bracket: exact to double precision
        mid = (low + high) / 2
        low, high = (mid, high) if t_cdf(mid, df) < p else (low, mid)
    return (low + high) / 2


def t975(df: int) -> float:
    """t(0.975, df): the two-sided 95% quantile."""
    return t_quantile(0.975, df)


def t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t: 1 - I_x(df/2, 1/2) / 2 with x = df / (df + t^2), for t >= 0."""
    tail = 0.5 * beta_regularized(df / 2, 0.5, df / (df + t * t))
    return 1 - tail if t >= 0 else tail


def beta_regularized(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (its continued fraction, Numerical Recipes 6.4)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * beta_fraction(a, b, x) / a
    return 1.0 - front * beta_fraction(b, a, 1 - x) / b


def beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b), by Lentz's method."""
    tiny = 1e-300

    def guard(value: float) -> float:
        return value if abs(value) > tiny else tiny

    c, d = 1.0, 1.0 / guard(1.0 - (a + b) * x / (a + 1))
    h = d
    for m in range(1, 300):
        even = m * (b - m) * x / ((a - 1 + 2 * m) * (a + 2 * m))
        d, c = 1.0 / guard(1.0 + even * d), guard(1.0 + even / c)
        h *= d * c
        odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 1 + 2 * m))
        d, c = 1.0 / guard(1.0 + odd * d), guard(1.0 + odd / c)
        h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def log_interval(values: Iterable[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(centre, low, high) of positive values: their geometric mean and its t interval on the log scale."""
    xs = [float(v) for v in values if v == v]
    if not xs:
        return math.nan, math.nan, math.nan
    if min(xs) <= 0:
        raise ValueError("repeat values must be positive (times, rates or ratios)")
    logs = [math.log(x) for x in xs]
    mean = statistics.fmean(logs)
    if len(xs) < 2:
        return math.exp(mean), math.nan, math.nan
    half = t_quantile(1 - (1 - confidence) / 2, len(xs) - 1) * statistics.stdev(logs) / math.sqrt(len(xs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def interval(values: Iterable[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(centre, low, high) of positive repeat values (times, rates, ratios): see the module docstring."""
    return log_interval(values, confidence)


def share_interval(values: Iterable[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(centre, low, high) of shares in (0, 1): the interval of the odds on the log scale, as shares."""
    xs = [float(v) for v in values if v == v]
    if not xs:
        return math.nan, math.nan, math.nan
    if min(xs) <= 0 or max(xs) >= 1:
        raise ValueError("shares must lie strictly between 0 and 1")
    odds = log_interval((x / (1 - x) for x in xs), confidence)  # the log-scale interval of the odds is the logit one
    return tuple(o / (1 + o) if o == o else math.nan for o in odds)  # type: ignore[return-value]


class Ratio(typing.NamedTuple):
    center: float
    low: float
    high: float
    n: int
    half_width: float
    runs: int = 0  # the runs the interval is over (`analysis.clusters`); 0: pooled pairs, runs not counted

    @classmethod
    def of(cls, values: Sequence[float], confidence: float = CONFIDENCE) -> "Ratio":
        """The centre and interval of these ratios (one per pair)."""
        center, low, high = interval(values, confidence)
        n = sum(1 for v in values if v == v)
        return cls(center, low, high, n, half_width(center, low, high))


NO_RATIO = Ratio(math.nan, math.nan, math.nan, 0, math.nan)


def pairs(
    records: pd.DataFrame,
    variant: object,
    baseline: object,
    value: str = col.SAMPLES_PER_S,
    between: str = col.VARIANT,
    by: Sequence[str] = (),
) -> pd.DataFrame:
    """One row per pair: `variant`'s value over `baseline`'s within one cell (`CELL`: a repeat of one run
    on one machine at one thread count), with the cell's keys, `by`, `ratio`, and each member's `flags`.

    `between` names the column the two are values of: two variants of a point (a speedup), or two
    values of a knob (`x`) for one variant. Two records of one cell are an error.
    """
    keys = [*by, *(k for k in CELL if k in records and k not in by)]
    columns = [*keys, "ratio", "flags_variant", "flags_baseline", RECORDS]
    pick = records[records[between].isin([variant, baseline])]
    if between != col.VARIANT:  # knob values pair only where a run interleaved them (repeat-major runs)
        pick = pick[pick[RUN].map(interleaved)] if RUN in pick else pick.iloc[0:0]
    if pick.empty:
        return pd.DataFrame(columns=columns)
    pick = pick.assign(**{k: pick[k].fillna("") for k in keys if k in (RUN, col.MACHINE)})
    doubled = pick.duplicated([*keys, between], keep=False)
    if doubled.any():
        first = pick[doubled].iloc[0]
        raise ValueError(
            f"two records of one cell ({between} {first[between]!r}, repeat {first[col.REPEAT]}"
            + (f", run {first[RUN]!r}" if RUN in pick else "")
            + "): a repeat is measured once per run"
        )
    flags = pick[col.FLAGS].fillna("").astype(str) if col.FLAGS in pick else pd.Series("", index=pick.index)
    # the records a pair was made of: their identities, or those they carry (a pair of pairs)
    ids = pick[RECORDS] if RECORDS in pick else record_ids(pick).map(lambda one: (one,))
    pick = pick.assign(_flags=flags, _ids=ids)
    mine = pick[pick[between] == variant].set_index(keys)
    theirs = pick[pick[between] == baseline].set_index(keys)
    joined = mine[[value, "_flags", "_ids"]].merge(theirs[[value, "_flags", "_ids"]], left_index=True,
                                                   right_index=True, suffixes=("_v", "_b"))  # fmt: skip
    joined = joined.assign(
        ratio=joined[f"{value}_v"].astype(float) / joined[f"{value}_b"].astype(float),
        flags_variant=joined["_flags_v"],
        flags_baseline=joined["_flags_b"],
        **{RECORDS: [tuple(a) + tuple(b) for a, b in zip(joined["_ids_v"], joined["_ids_b"], strict=True)]},
    )
    joined = joined[joined["ratio"].notna()]
    return joined.reset_index()[columns]


def interleaved(run_id: object) -> bool:
    """Whether a run measured its points repeat-major (every run with an id, but the legacy ones)."""
    return isinstance(run_id, str) and run_id != "" and not run_id.startswith(LEGACY)


def half_width(center: float, low: float, high: float) -> float:
    """The interval's larger distance from the center, relative to it (0.05 means +-5%)."""
    if not (center == center and low == low and high == high) or center == 0:
        return math.nan
    return max(center - low, high - center) / center


def mean_interval(values: Iterable[float], confidence: float = CONFIDENCE) -> tuple[float, float, float, int]:
    """(mean, low, high, n) of differences that may be negative: the mean with a t interval (NaN with one)."""
    xs = [float(v) for v in values if v == v]
    if not xs:
        return math.nan, math.nan, math.nan, 0
    mean = statistics.fmean(xs)
    if len(xs) < 2:
        return mean, math.nan, math.nan, 1
    half = t_quantile(1 - (1 - confidence) / 2, len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))
    return mean, mean - half, mean + half, len(xs)


def family(comparisons: int) -> float:
    """The confidence of each interval in a rule that asks whether any of `comparisons` holds (Bonferroni)."""
    return 1 - (1 - CONFIDENCE) / max(1, comparisons)
