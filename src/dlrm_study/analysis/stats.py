"""Summaries of repeated measurements, made when records are read: intervals, paired ratios, flags.

The unit of evidence is a repeat: one record, the median of its timed steps. Per point:

- **center**: the median of the repeat medians (one disturbed repeat cannot move it far);
- **95% interval**: Student's t on the logarithms of the repeat medians, back-transformed,
  `exp(mean(log x) +- t(0.975, n-1) * sd(log x) / sqrt(n))`. Timings are positive and their
  noise on a shared machine is multiplicative (another job slows every step by a factor),
  so logs are the natural scale; for log-normal noise the interval covers the true median
  95% of the time at any n >= 2 (tested on synthetic timings): with few repeats it is wide,
  as it should be. A share (a part of a whole) gets the same interval on the logit scale, so
  it stays inside (0, 1). With one repeat there is no interval (NaN).
- **paired ratio** of variant A over baseline B (a speedup), or of one knob value over
  another: per repeat, A's value over B's measured side by side in that repeat of one run
  (`run_id`) on one machine; then the same center and interval over those per-repeat ratios.
  Records of two machines or two runs never pair; two records of one cell (the same point,
  variant, machine, run and repeat) are an error, not a median. Knob values are paired only
  in records of runs that interleaved them (every record with a `run_id`: `runner.schedule`
  is repeat-major since run ids exist; earlier sweeps measured one point after another).
- **a verdict word** ("faster", "reproduced") needs at least MIN_PAIRS pairs; with fewer the
  finding says "too few repeats".

Every repeat counts. A record is **flagged** (`flags`, `;`-separated, empty when clean) when its
profiled operators sum to more than 15% away from its timed median (`profile-vs-timed`), its
p90/p10 over the timed steps exceeds 1.5 (`spread`), or, when read, its median is more than
1.25x from the median of its point's repeats (`outlier`, with at least three). Flags are
diagnostics printed beside a finding, never a filter: a finding is computed with all repeats,
and again with the flagged ones removed (`without_flagged`); where the two say different
things, the finding says **fragile** and shows both. Figures draw flagged repeats hollow.
"""

import math
import statistics
import typing
from collections.abc import Iterable, Sequence

import pandas as pd

from dlrm_study.measure.selfcheck import flags
from dlrm_study.records import columns as col

SUMMARY = ("n", "center", "low", "high", "half_width")
OUTLIER_FACTOR = 1.25  # a repeat's median against the median of its point's repeats
OUTLIER_MIN_REPEATS = 3
POINT_KEYS = (col.CONFIG_HASH, col.VARIANT, col.MACHINE, col.THREADS)  # what one point's repeats share
MIN_PAIRS = 5  # pairs (or repeats) a verdict word needs
RUN = col.RUN_ID
LEGACY = "legacy-"  # run ids given to records written before run ids (scripts/migrate_records.py)

# Two-sided 95% quantiles of Student's t, t(0.975, df), df = 1..30 (the standard table).
T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t975(df: int) -> float:
    """t(0.975, df): the table to 30 degrees of freedom, then the Cornish-Fisher expansion."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    if df <= len(T975):
        return T975[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def interval(values: Iterable[float]) -> tuple[float, float, float]:
    """(center, low, high) of positive repeat values: their median and the 95% interval above."""
    xs = [float(v) for v in values if v == v]
    if not xs:
        return math.nan, math.nan, math.nan
    if min(xs) <= 0:
        raise ValueError("repeat values must be positive (times, rates or ratios)")
    center = statistics.median(xs)
    if len(xs) < 2:
        return center, math.nan, math.nan
    logs = [math.log(x) for x in xs]
    mean, half = statistics.fmean(logs), t975(len(xs) - 1) * statistics.stdev(logs) / math.sqrt(len(xs))
    return center, math.exp(mean - half), math.exp(mean + half)


def share_interval(values: Iterable[float]) -> tuple[float, float, float]:
    """(center, low, high) of shares in (0, 1): their median, and the t interval on the logit scale."""
    xs = [float(v) for v in values if v == v]
    if not xs:
        return math.nan, math.nan, math.nan
    if min(xs) <= 0 or max(xs) >= 1:
        raise ValueError("shares must lie strictly between 0 and 1")
    center = statistics.median(xs)
    if len(xs) < 2:
        return center, math.nan, math.nan
    odds = interval(x / (1 - x) for x in xs)  # the log-scale interval of the odds is the logit one
    return center, odds[1] / (1 + odds[1]), odds[2] / (1 + odds[2])


def summarize(
    records: pd.DataFrame, by: Sequence[str], value: str = col.SAMPLES_PER_S, share: bool = False
) -> pd.DataFrame:
    """Per group of `by`: repeats `n`, `center`, `low`, `high` and `half_width` (relative, +-).

    `share`: the values are parts of a whole, summarized on the logit scale (`share_interval`).
    """
    rows = []
    for group, frame in records.groupby(list(by), sort=True, dropna=False):
        center, low, high = (share_interval if share else interval)(frame[value])
        row = dict(zip(by, group, strict=True))
        row.update(n=int(frame[value].notna().sum()), center=center, low=low, high=high)
        row["half_width"] = half_width(center, low, high)
        rows.append(row)
    return pd.DataFrame(rows, columns=[*by, *SUMMARY])


def paired_ratios(
    records: pd.DataFrame,
    by: Sequence[str],
    variant: object,
    baseline: object,
    value: str = col.SAMPLES_PER_S,
    between: str = col.VARIANT,
) -> pd.DataFrame:
    """Per group of `by`: `variant`'s value over `baseline`'s within each repeat, as a `summarize` table.

    `between` names the column the two are values of: two variants of a point (a speedup), or
    two values of a knob (`x`) for one variant. Only records of one machine and one run pair up
    (see the module docstring); `n` counts the pairs.
    """
    pick = records[records[between].isin([variant, baseline])]
    if between != col.VARIANT:  # knob values pair only where a run interleaved them (repeat-major runs)
        pick = pick[pick[RUN].map(interleaved)] if RUN in pick else pick.iloc[0:0]
    if pick.empty:  # nothing to pair (every record of the view flagged away, or none of either)
        return pd.DataFrame(columns=[*by, *SUMMARY])
    cell = [*by, *(k for k in (col.MACHINE, RUN) if k in pick and k not in by), col.REPEAT]
    pick = pick.assign(**{k: pick[k].fillna("") for k in cell if k in (RUN, col.MACHINE)})
    doubled = pick.duplicated([*cell, between], keep=False)
    if doubled.any():
        first = pick[doubled].iloc[0]
        raise ValueError(
            f"two records of one cell ({between} {first[between]!r}, repeat {first[col.REPEAT]}"
            + (f", run {first[RUN]!r}" if RUN in pick else "")
            + "): a repeat is measured once per run; deduplicate the records first"
        )
    wide = pick.pivot_table(index=cell, columns=between, values=value, aggfunc="first")
    if variant not in wide or baseline not in wide:
        return pd.DataFrame(columns=[*by, *SUMMARY])
    ratios = (wide[variant] / wide[baseline]).dropna().rename("ratio").reset_index()
    return summarize(ratios, by, "ratio")


def interleaved(run_id: object) -> bool:
    """Whether a run measured its points repeat-major (every run with an id, but the legacy ones)."""
    return isinstance(run_id, str) and run_id != "" and not run_id.startswith(LEGACY)


class Ratio(typing.NamedTuple):
    center: float
    low: float
    high: float
    n: int
    half_width: float


def paired_ratio(
    records: pd.DataFrame, variant: object, baseline: object, value: str = col.SAMPLES_PER_S, between: str = col.VARIANT
) -> Ratio:
    """One paired ratio over all the records (see `paired_ratios`); NaN with n = 0 where nothing pairs."""
    table = paired_ratios(records.assign(_all=""), ["_all"], variant, baseline, value, between)
    if table.empty:
        return Ratio(math.nan, math.nan, math.nan, 0, math.nan)
    row = table.iloc[0]
    return Ratio(row.center, row.low, row.high, int(row.n), row.half_width)


def half_width(center: float, low: float, high: float) -> float:
    """The interval's larger distance from the center, relative to it (0.05 means +-5%)."""
    if not (center == center and low == low and high == high) or center == 0:
        return math.nan
    return max(center - low, high - center) / center


def present(value: object) -> bool:
    """Whether a field holds a value (a record without a breakdown has empty operator cells)."""
    return value is not None and value == value and value != ""


def with_flags(records: pd.DataFrame) -> pd.DataFrame:
    """The records with a `flags` column: the stored ones (computed for records stored before
    they existed), plus `outlier` for repeats far from their point's median."""
    frame = records.copy()
    computed = frame.apply(lambda row: flags(row.to_dict()), axis=1) if len(frame) else pd.Series(dtype=str)
    if col.FLAGS in frame:
        frame[col.FLAGS] = frame[col.FLAGS].fillna(computed)
    else:
        frame[col.FLAGS] = computed
    frame[col.FLAGS] = frame[col.FLAGS].fillna("").astype(str)
    far = outliers(frame)
    frame.loc[far, col.FLAGS] = [";".join(filter(None, [text, "outlier"])) for text in frame.loc[far, col.FLAGS]]
    return frame


def outliers(records: pd.DataFrame) -> pd.Series:
    """Repeats more than OUTLIER_FACTOR away from the median of their point's repeats."""
    keys = [k for k in POINT_KEYS if k in records]
    if records.empty or col.MS_MEDIAN not in records or not set(POINT_KEYS[:3]) <= set(keys):
        return pd.Series(False, index=records.index)
    ms = records[col.MS_MEDIAN].astype(float)
    groups = records.groupby(keys, dropna=False)[col.MS_MEDIAN]
    median = groups.transform("median").astype(float)
    enough = groups.transform("count") >= OUTLIER_MIN_REPEATS
    ratio = ms / median
    return (enough & ((ratio > OUTLIER_FACTOR) | (ratio < 1 / OUTLIER_FACTOR))).fillna(False)


# The flags that put each quantity in doubt (diagnostics: `without_flagged` removes them).
DOUBTS = {"throughput": {"spread", "outlier"}, "breakdown": {"spread", "outlier", "profile-vs-timed"}}


def flagged(records: pd.DataFrame, quantity: str = "throughput") -> pd.Series:
    """Whether each record's flags put the quantity (`throughput` or `breakdown`) in doubt."""
    frame = with_flags(records)
    return frame[col.FLAGS].map(lambda text: bool(set(filter(None, text.split(";"))) & DOUBTS[quantity])).astype(bool)


def without_flagged(records: pd.DataFrame, quantity: str = "throughput") -> tuple[pd.DataFrame, int]:
    """The records with the repeats flagged for `quantity` removed, and how many were: the
    second view every finding is computed in (never the only one)."""
    frame = with_flags(records)
    doubtful = flagged(frame, quantity)
    return frame[~doubtful], int(doubtful.sum())


def views(records: pd.DataFrame, quantity: str = "throughput") -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """(all repeats, flagged ones removed, how many were flagged): the two views of a finding."""
    clean, dropped = without_flagged(records, quantity)
    return with_flags(records), clean, dropped


def direction(low: float, high: float, up: str = "higher", down: str = "lower", n: int | None = None) -> str:
    """A directional word only where the interval of a ratio excludes 1 and `n` pairs are enough."""
    if n is not None and n < MIN_PAIRS:
        return f"too few repeats for a verdict ({n} < {MIN_PAIRS})"
    if low != low:
        return "no interval"
    if low > 1:
        return up
    if high < 1:
        return down
    return "no clear effect at this size"


def fragile(all_word: str, clean_word: str) -> str:
    """The word of a finding seen both ways: itself where the two views agree, else `fragile (...)`."""
    if all_word.split(" (")[0] == clean_word.split(" (")[0]:  # "too few repeats (3 < 5)" and "(0 < 5)" agree
        return all_word
    return f"fragile (all repeats: {all_word}; flagged removed: {clean_word})"


def number(value: float) -> str:
    """Samples/s as whole numbers, ratios with two decimals."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"


def describe(center: float, low: float, high: float, unit: str = "", digits: int = 2, percent: bool = False) -> str:
    """`1.42x [1.35, 1.49]`, `27% [24%, 31%]`, or `1.42x (one repeat: no interval)`."""

    def number(value: float) -> str:
        return f"{value:.{max(0, digits - 2)}%}" if percent else f"{value:,.{digits}f}"

    if center != center:
        return "not measured (no usable repeat)"
    if low != low:
        return f"{number(center)}{unit} (one repeat: no interval)"
    return f"{number(center)}{unit} [{number(low)}, {number(high)}]"


class Finding(typing.NamedTuple):
    """A paired ratio seen both ways: with every repeat, and with the flagged ones removed."""

    all: Ratio
    clean: Ratio
    flagged: int  # repeats flagged (removed in the second view)
    word: str  # the direction both views support, or `fragile (...)`, or why there is none

    def text(self, unit: str = "x") -> str:
        """`1.42x [1.35, 1.49] (5 pairs): faster`, and the flagged-removed view where it differs."""
        r = self.all
        said = f"{describe(r.center, r.low, r.high, unit)} ({r.n} pairs): {self.word}"
        if self.flagged and self.clean != self.all:
            c = self.clean
            said += f"; without the {self.flagged} flagged repeat(s): {describe(c.center, c.low, c.high, unit)} ({c.n})"
        return said


def paired_finding(
    records: pd.DataFrame,
    variant: object,
    baseline: object,
    up: str = "higher",
    down: str = "lower",
    between: str = col.VARIANT,
    value: str = col.SAMPLES_PER_S,
) -> Finding:
    """`variant` over `baseline`, paired, with all repeats and without flagged ones, and one word for both."""
    everything, clean, dropped = views(records)
    both = [paired_ratio(frame, variant, baseline, value, between) for frame in (everything, clean)]
    words = [direction(r.low, r.high, up, down, r.n) for r in both]
    return Finding(both[0], both[1], dropped, fragile(*words))


def flag_note(records: pd.DataFrame, quantity: str = "throughput") -> list[str]:
    """`(3 of 20 repeats flagged; counted)`: what a finding says of its flagged repeats, or nothing."""
    if records.empty:
        return []
    n = int(flagged(records, quantity).sum())
    return [f"({n} of {len(records)} repeat(s) flagged: counted, and shown without them where it differs)"] if n else []


def unpaired_reason(records: pd.DataFrame, between: str) -> str:
    """Why no pair formed between two values of `between` (for a finding that has none)."""
    if between != col.VARIANT and (RUN not in records or not records[RUN].map(interleaved).any()):
        return "the two ends were measured one point after the other, before runs interleaved them: not paired"
    return "no repeat pairs up at the two ends within one run"


def mean_interval(values: Iterable[float]) -> tuple[float, float, float, int]:
    """(mean, low, high, n) of differences that may be negative: the mean with a t interval (NaN with one)."""
    xs = [float(v) for v in values if v == v]
    if not xs:
        return math.nan, math.nan, math.nan, 0
    mean = statistics.fmean(xs)
    if len(xs) < 2:
        return mean, math.nan, math.nan, 1
    half = t975(len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))
    return mean, mean - half, mean + half, len(xs)


def describe_difference(values: Iterable[float], digits: int = 4) -> str:
    """`+0.0003 [-0.0004, +0.0010]`: the mean of paired differences and its t interval (one: no interval)."""
    mean, low, high, n = mean_interval(values)
    if not n:
        return "no pair"
    if n < 2:
        return f"{mean:+.{digits}f} (one pair: no interval)"
    return f"{mean:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"
