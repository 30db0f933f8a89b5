"""Constants of docs/claims.md's rules without a boundary case in test_verdicts.py, and an "or" corrected."""

import pandas as pd
from tests.test_verdicts import XEON, aucs, baseline, breakdown, ratios, speed, verdict

from dlrm_study.analysis.convergence import MIN_SEEDS
from dlrm_study.claims.s1 import S1_CORES
from dlrm_study.claims.s2 import S2_SHARE


def tight(centre: float) -> list[float]:
    return ratios(centre, centre * 0.997)


def test_s1_is_judged_from_a_socket_s_cores_and_not_below() -> None:
    """S1_CORES (28): a machine of 28 logical CPUs is judged at 28 threads, one of 27 is not measurable."""
    at = "intel-xeon/avx512f+avx512_bf16/28cpu"
    below = "intel-xeon/avx512f+avx512_bf16/27cpu"
    assert verdict("S1", at, baseline=baseline(at, tight(112.0), threads=S1_CORES)).status == "reproduced"
    assert verdict("S1", below, baseline=baseline(below, tight(112.0), threads=27)).status == "not measurable here"


def test_s3_accuracy_needs_its_seeds() -> None:
    """MIN_SEEDS (3): three seeds judge the accuracy half, two are too few."""
    loops = pd.DataFrame(speed(XEON, tight(1.9)))
    same = [1.0003, 0.9998, 1.0001, 1.0]
    assert MIN_SEEDS == 3  # the declared literal the outcomes below are written for (not computed from it)
    assert verdict("S3", XEON, cpu_loops=loops, accuracy=aucs(XEON, same[:3])).status == "reproduced"
    assert verdict("S3", XEON, cpu_loops=loops, accuracy=aucs(XEON, same[:2])).status == "too few repeats"


def test_s2_refutation_is_an_or_read_at_97_5_percent_over_two_presets() -> None:
    """mlperf-scaled's share, 46.5% +- 2% per run: its interval at the look's level of 95% (98.9%) ends below 50%,
    at the look's level of 97.5% (99.5%) above. "Some preset below" is an OR over the two presets, each at
    1 - 0.05/2 before the looks: inconclusive (uncorrected: not reproduced)."""
    near = [0.465 + 0.02 * z for z in (-1.0, 1.0, -0.5, 0.5, 0.0)]
    both = pd.concat([breakdown([0.7] * 5), breakdown(near, preset="mlperf-scaled")], ignore_index=True)
    v = verdict("S2", XEON, cpu_loops=both)
    assert v.numbers["mlperf-scaled"].high < S2_SHARE
    assert v.status == "inconclusive", v.evidence
