"""The sequential design: the CPU claims' runs are judged at pre-registered looks, and measuring stops at the first
look whose word is decided and not fragile.

A rule that is read again after every few runs gets more chances to be wrong than one read once. Pocock's answer:
read every look at one smaller, equal level, chosen so that the chance of a false word at *any* look is the level the
rule declares. Here a look reads a t interval over run means (`clusters.over_runs`) at `runs` - 1 degrees of
freedom, so the per-look level is found for that statistic: under the null (the truth on the margin), the sequence
of t statistics at the looks has a distribution free of the runs' spread, so one simulation of standard normal run
means gives it (`nominal`). Each rule keeps its own confidence (`stats.family` and the like); `look_confidence`
maps it to the level a sequential rule reads at every look.

O'Brien-Fleming bounds, which spend little early, cannot stop here at all: with 3-5 runs their critical t runs into
the hundreds. Pocock's equal bounds stop early where the truth is far from the margin, which is where they pay.
"""

import functools
import math

import numpy as np

from dlrm_study.analysis import stats
from dlrm_study.plans.profiles import LOOKS  # runs at which a sequential claim is judged

N_SIMS = 400_000  # of the null, for the per-look level: its false rate then holds to about 2% of itself
SEED = 20261207


@functools.cache
def nominal(alpha: float, looks: tuple[int, ...] = LOOKS, n_sims: int = N_SIMS, seed: int = SEED) -> float:
    """The one-sided level each look reads at so that, under the null, a t statistic over the runs so far crosses
    its bound at some look with chance `alpha` (Pocock-type: one level at every look)."""
    rng = np.random.default_rng(seed)
    total = np.zeros(n_sims)
    squares = np.zeros(n_sims)
    drawn = 0
    statistics = []  # (look, the t statistic over the runs so far, per simulated study)
    for look in sorted(looks):
        block = rng.standard_normal((n_sims, look - drawn))
        total += block.sum(axis=1)
        squares += (block**2).sum(axis=1)
        drawn = look
        mean = total / look
        sd = np.sqrt(np.maximum(squares - look * mean**2, 0.0) / (look - 1))
        statistics.append((look, mean / (sd / math.sqrt(look))))

    def crossing(level: float) -> float:
        crossed = np.zeros(n_sims, bool)
        for look, t in statistics:
            crossed |= t > stats.t_quantile(1 - level, look - 1)
        return float(crossed.mean())

    low, high = alpha / (4 * len(looks)), alpha  # Bonferroni over the looks is too strict; one look too lax
    for _ in range(40):
        mid = math.sqrt(low * high)
        low, high = (mid, high) if crossing(mid) <= alpha else (low, mid)
    return low


def look_confidence(confidence: float, looks: tuple[int, ...] = LOOKS) -> float:
    """The two-sided confidence of each look's interval for a rule that, read once, reads at `confidence`: its
    one-sided level (1 - `confidence`) / 2 spread over the looks (`nominal`)."""
    return 1 - 2 * nominal(round((1 - confidence) / 2, 12), looks)
