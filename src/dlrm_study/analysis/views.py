"""A paired comparison seen two ways: over every pair, and over the pairs no flag doubts.

The first view is the finding: its word needs `stats.MIN_PAIRS` pairs. The second is a sensitivity
check: where at least `MIN_CLEAN` unflagged pairs remain and they land on the other side of the
threshold, the finding is *fragile*; with fewer left, its robustness is not assessable. A flag
alone never makes a finding fragile, nor removes a pair from it.
"""

import dataclasses

import pandas as pd

from dlrm_study.analysis import stats
from dlrm_study.analysis.clusters import over_runs
from dlrm_study.analysis.flags import pair_flags
from dlrm_study.records import columns as col

MIN_CLEAN = 3  # unflagged pairs the sensitivity check needs


@dataclasses.dataclass(frozen=True)
class Views:
    """A ratio over every pair (`all`) and over the unflagged pairs (`clean`; None: fewer than MIN_CLEAN)."""

    all: stats.Ratio
    clean: stats.Ratio | None
    flagged: int

    @property
    def assessable(self) -> bool:
        """Whether the flagged-removed view has enough pairs to check the finding against."""
        return self.clean is not None

    @classmethod
    def of_pairs(
        cls,
        found: pd.DataFrame,
        quantity: str = "throughput",
        confidence: float = stats.CONFIDENCE,
        also: pd.Series | None = None,
    ) -> "Views":
        """The two views of `stats.pairs`' rows (flags from `flags.pair_flags`, and the pairs `also` doubts)."""
        if found.empty:
            return cls(stats.NO_RATIO, None, 0)
        doubt = pair_flags(found, quantity)
        if also is not None:
            doubt = doubt | also.astype(bool)
        every = over_runs(found, "ratio", confidence)  # runs as clusters, as every printed interval
        if not doubt.any():
            return cls(every, every, 0)
        clean = found[~doubt]
        kept = over_runs(clean, "ratio", confidence) if len(clean) >= MIN_CLEAN else None
        return cls(every, kept, int(doubt.sum()))


def paired(
    records: pd.DataFrame,
    variant: object,
    baseline: object,
    between: str = col.VARIANT,
    value: str = col.SAMPLES_PER_S,
    confidence: float = stats.CONFIDENCE,
) -> Views:
    """`variant` over `baseline`, paired within cells (`stats.pairs`), seen both ways."""
    return Views.of_pairs(stats.pairs(records, variant, baseline, value, between), confidence=confidence)


def side(r: stats.Ratio, low: float, high: float | None = None) -> str:
    """Where an interval lies against a threshold (or the band [low, high]): `above`, `below`, `within`
    (inside the band), `across` (spanning a threshold), or `none` (no interval)."""
    high = low if high is None else high
    if r.low != r.low:
        return "none"
    if r.low > high:
        return "above"
    if r.high < low:
        return "below"
    if low < high and low <= r.low and r.high <= high:
        return "within"
    return "across"
