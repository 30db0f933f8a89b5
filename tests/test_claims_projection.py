"""S1 and S4 alike (docs/claims.md): neither verdict prints a projection; the factors stand as measured."""

import pandas as pd
from tests.test_verdicts import XEON, baseline, ratios, verdict

from dlrm_study.analysis import findings


def two_thread_counts() -> pd.DataFrame:
    """The 2020 step and optimized bf16 at 1 and 2 threads: what a 1-to-2-thread power law would extrapolate."""
    return pd.concat([baseline(XEON, ratios(10.0, 9.0), threads=1), baseline(XEON, ratios(13.0, 11.0), threads=2)],
                     ignore_index=True)  # fmt: skip


def test_s1_below_a_socket_prints_no_projection() -> None:
    """(Fails before: "optimized-bf16 projected, not measured, to 28 cores (a power law ...): NNx".)"""
    v = verdict("S1", XEON, baseline=two_thread_counts())
    assert v.status == "not measurable here"
    assert "at 1 thread(s)" in v.evidence and "at 2 thread(s)" in v.evidence  # the measured factors stay
    assert "project" not in v.evidence


def test_notebook_02_prints_no_s1_projection() -> None:
    """(Fails before: a power-law projection of the faster loop, not the declared one.)"""
    frame = two_thread_counts().assign(ms_median=lambda f: 1e3 / f["samples_per_s"])
    lines = findings.baseline_2020(frame)
    assert lines and not any("project" in line.lower() for line in lines)
