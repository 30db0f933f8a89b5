"""No broken output: nothing published prints a missing number (nan, None) or an empty interval."""

from dlrm_study.report import render


def test_a_planted_nan_none_or_empty_interval_is_found():
    assert render.broken("optimized bf16: nan% of fp32's gain [nan%, nan%] over 0 seeds")
    assert render.broken("threads: None")
    assert render.broken("an interval [ , ]") and render.broken("an interval []")
    assert not render.broken("1.62x [1.49, 1.73] (5 pairs); nonetheless fine; Nanoseconds")


def test_nothing_published_is_broken():
    assert render.broken_outputs() == []
