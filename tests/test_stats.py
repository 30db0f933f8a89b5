"""Intervals and paired ratios on synthetic timings of known spread; flags; findings without flagged records."""

import math
import random

import pandas as pd
import pytest

from dlrm_study.analysis import clusters, stats, wording
from dlrm_study.analysis import flags as flagging
from dlrm_study.analysis import sensitivity as knobs
from dlrm_study.records import selfcheck


def lognormal_repeats(rng: random.Random, median: float, sigma: float, n: int) -> list[float]:
    return [median * math.exp(rng.gauss(0.0, sigma)) for _ in range(n)]


@pytest.mark.parametrize("n", [3, 5, 10])
def test_the_interval_covers_the_true_median_95_percent_of_the_time(n):
    rng, trials, covered = random.Random(7), 4000, 0
    for _ in range(trials):
        _, low, high = stats.interval(lognormal_repeats(rng, 100.0, 0.08, n))
        covered += low <= 100.0 <= high
    assert 0.935 <= covered / trials <= 0.965


def test_the_interval_width_follows_the_spread_and_the_repeats():
    rng = random.Random(3)

    def mean_log_half_width(sigma: float, n: int) -> float:
        widths = []
        for _ in range(2000):
            _, low, high = stats.interval(lognormal_repeats(rng, 50.0, sigma, n))
            widths.append(math.log(high / low) / 2)
        return sum(widths) / len(widths)

    # On the log scale the half width is t(0.975, n-1) * s / sqrt(n), and E[s] = c4(n) * sigma.
    assert mean_log_half_width(0.02, 5) == pytest.approx(2.776 * 0.940 * 0.02 / math.sqrt(5), rel=0.05)
    assert mean_log_half_width(0.04, 5) == pytest.approx(2 * mean_log_half_width(0.02, 5), rel=0.05)
    assert mean_log_half_width(0.04, 20) < mean_log_half_width(0.04, 5) / 2
    # The reported +- is the interval's larger distance from the center (the median of repeats).
    assert stats.half_width(100.0, 95.0, 108.0) == pytest.approx(0.08)


def test_one_repeat_has_a_center_and_no_interval():
    center, low, high = stats.interval([42.0])
    assert center == pytest.approx(42.0) and math.isnan(low) and math.isnan(high)
    assert "no interval" in wording.describe(center, low, high)
    with pytest.raises(ValueError, match="positive"):
        stats.interval([1.0, -2.0])


def test_student_t_quantiles():
    table = {1: 12.706, 2: 4.303, 4: 2.776, 9: 2.262, 30: 2.042, 60: 2.000, 120: 1.980}  # the standard table
    for df, value in table.items():
        assert stats.t975(df) == pytest.approx(value, abs=5e-4)
    assert stats.t_quantile(1 - 0.05 / 4, 4) == pytest.approx(3.495, abs=5e-4)  # Bonferroni over two, df 4


def drifting_pairs(rng: random.Random, repeats: int, ratio: float, drift: float, noise: float) -> pd.DataFrame:
    """Two variants per repeat; each repeat's machine speed drifts a lot, the variants alike."""
    rows = []
    for repeat in range(repeats):
        speed = math.exp(rng.gauss(0.0, drift))
        base = 1000 * speed * math.exp(rng.gauss(0.0, noise))
        fast = ratio * 1000 * speed * math.exp(rng.gauss(0.0, noise))
        rows += [
            {"point": "p", "repeat": repeat, "variant": "reference", "samples_per_s": base},
            {"point": "p", "repeat": repeat, "variant": "optimized", "samples_per_s": fast},
        ]
    return pd.DataFrame(rows)


def test_the_paired_ratio_cancels_drift_and_covers_the_true_ratio():
    rng, trials, covered, narrower = random.Random(11), 1000, 0, 0
    for _ in range(trials):
        frame = drifting_pairs(rng, repeats=5, ratio=1.5, drift=0.15, noise=0.02)
        paired = clusters.paired_ratios(frame, ["point"], "optimized", "reference").iloc[0]
        covered += paired.low <= 1.5 <= paired.high
        each = clusters.summarize(frame, ["variant"]).set_index("variant")
        narrower += paired.half_width < min(each["half_width"])
        assert paired.n == 5
    assert 0.93 <= covered / trials <= 0.97
    assert narrower / trials > 0.95  # pairing within repeats removes the shared drift


def test_unpaired_repeats_do_not_pair():
    frame = drifting_pairs(random.Random(1), repeats=3, ratio=2.0, drift=0.0, noise=0.01)
    frame = frame[~((frame["variant"] == "reference") & (frame["repeat"] == 2))]
    assert clusters.paired_ratios(frame, ["point"], "optimized", "reference").iloc[0].n == 2


def test_flags_name_what_is_wrong():
    clean = {"ms_median": 100.0, "ms_p10": 95.0, "ms_p90": 110.0, "op_a_ms": 60.0, "op_b_ms": 45.0}
    assert selfcheck.flags(clean) == ""
    assert selfcheck.flags({**clean, "op_b_ms": 70.0}) == "profile-vs-timed"  # 130 against 100
    assert selfcheck.flags({**clean, "ms_p90": 150.0}) == "spread"  # 150 / 95 > 1.5
    assert selfcheck.flags({**clean, "op_b_ms": 0.0, "ms_p10": 60.0}) == "profile-vs-timed;spread"
    assert selfcheck.flags({"ms_median": 100.0, "ms_p10": 95.0, "ms_p90": 110.0}) == ""  # no breakdown: no check


def test_a_flagged_record_counts_and_is_said():
    rows = [
        {"variant": v, "repeat": r, "ms_median": 10.0, "ms_p10": 9.5, "ms_p90": 10.5, "samples_per_s": rate}
        for r in range(3)
        for v, rate in (("reference", 1000.0 + r), ("optimized-fp32", 2000.0 + r))
    ]
    rows.append({"variant": "reference", "repeat": 3, "ms_median": 10.0, "ms_p10": 5.0, "ms_p90": 20.0,
                 "samples_per_s": 9e9})  # fmt: skip
    frame = pd.DataFrame(rows)
    assert int(flagging.flagged(frame).sum()) == 1  # the second view leaves it out; the first counts it
    lines = knobs.base_intervals(frame)
    centre = stats.interval(frame[frame["variant"] == "reference"]["samples_per_s"])[0]
    assert lines[0].startswith("optimized fp32: 2,001") and lines[1].startswith(f"reference: {centre:,.0f}")
    assert "(4 repeats)" in lines[1]  # every repeat counts: the flagged fourth too
    assert lines[2].startswith("optimized fp32 / reference (paired): 2.00x")
    assert lines[-1].startswith("(1 of 7 repeats flagged")


def test_a_flag_rules_out_what_it_puts_in_doubt():
    frame = pd.DataFrame([
        {"flags": "", "samples_per_s": 1.0},
        {"flags": "profile-vs-timed", "samples_per_s": 1.0},  # the breakdown is in doubt, not the timed steps
        {"flags": "spread", "samples_per_s": 1.0},
        {"flags": "profile-vs-timed;spread", "samples_per_s": 1.0},
    ])  # fmt: skip
    assert int(flagging.flagged(frame).sum()) == 2 and int(flagging.flagged(frame, "breakdown").sum()) == 3
    assert list(flagging.flagged(frame, "breakdown")) == [False, True, True, True]


def test_findings_and_figures_survive_every_repeat_flagged(tmp_path):
    from dlrm_study.report import plots

    frame = pd.DataFrame([
        {"variant": v, "repeat": r, "x": x, "knob": "dense features", "ms_median": 10.0, "ms_p10": 5.0,
         "ms_p90": 20.0, "samples_per_s": 100.0, "machine": "m", "timestamp": "2026", "device_name": "cpu",
         "torch_version": "2", "git_commit": "abc", "config_name": "c"}
        for v in ("reference", "optimized-fp32") for r in range(2) for x in (4.0, 13.0)
    ])  # fmt: skip
    said = knobs.knob_findings(frame, "dense_features")
    assert said[0].startswith("dense features: no finding") and said[-1].startswith("(8 of 8 repeats flagged")
    assert knobs.base_intervals(frame[frame["x"] == 4.0])[-1].startswith("(4 of 4 repeats flagged")
    assert not knobs.rates_table(frame).empty  # every repeat counts
    plots.save(plots.sensitivity(frame, "all flagged"), "flagged", tmp_path)
    plots.save(plots.speedup(frame[frame["x"] == 4.0], "reference", "all flagged"), "flagged-speedup", tmp_path)


def test_a_repeat_far_from_its_points_median_is_an_outlier():
    def rows(ms_values, variant="a"):
        return [{"config_hash": "h", "variant": variant, "machine": "m", "repeat": r, "ms_median": ms,
                 "ms_p10": ms, "ms_p90": ms, "samples_per_s": 1e3 / ms} for r, ms in enumerate(ms_values)]  # fmt: skip

    frame = pd.DataFrame(rows([100, 102, 98, 101, 180]) + rows([50, 80], "b"))  # b: too few to judge
    flagged = flagging.with_flags(frame)
    assert list(flagged["flags"]) == ["", "", "", "", "outlier", "", ""]
    clean = frame[~flagging.flagged(frame)]
    assert len(clean) == 6 and stats.interval(clean[clean.variant == "a"]["ms_median"])[2] < 105


def test_a_record_without_a_breakdown_is_not_checked_against_one():
    # Read back from a CSV that also holds profiled records, its operator cells are empty (NaN).
    fields = {"ms_median": 100.0, "ms_p10": 95.0, "ms_p90": 110.0, "op_bottom_mlp_ms": float("nan"), "op_other_ms": ""}
    assert selfcheck.flags(fields) == ""


def test_a_finding_keeps_its_flagged_pairs() -> None:
    """One pair's member spread (flagged): the finding's centre and count are over every pair, the flagged one
    too; only the sensitivity view leaves it out."""
    frame = pd.DataFrame(
        [{"machine": "m", "threads": 2, "run_id": "r", "repeat": i, "variant": v, "samples_per_s": rate,
          "flags": "spread" if (i == 0 and v == "a") else ""}
         for i, ratio in enumerate([2.0, 2.2, 1.8, 2.1, 1.9, 3.0]) for v, rate in (("a", 100 * ratio), ("b", 100.0))]
    )  # fmt: skip
    found = wording.paired_finding(frame, "a", "b")
    every = stats.Ratio.of([2.0, 2.2, 1.8, 2.1, 1.9, 3.0])
    assert found.all.n == 6 and found.all.center == pytest.approx(every.center)
    assert found.views.flagged >= 1


def test_runs_are_clusters_their_means_the_observations() -> None:
    """Two runs of 4 pairs: the interval is t with 1 degree of freedom over the two run means, not over 8 pairs."""
    from dlrm_study.analysis.clusters import over_runs

    runs = {"r1": [2.0, 2.1, 1.9, 2.0], "r2": [1.5, 1.6, 1.4, 1.5]}
    rows = [{"machine": "m", "threads": 2, "run_id": run, "ratio": r} for run, values in runs.items() for r in values]
    r = over_runs(pd.DataFrame(rows))
    means = [math.exp(sum(math.log(x) for x in v) / 4) for v in runs.values()]
    expected = stats.log_interval(means)
    assert (r.runs, r.n) == (2, 8)
    assert (r.center, r.low, r.high) == pytest.approx(expected)
    pooled = stats.Ratio.of([x["ratio"] for x in rows])
    assert r.high - r.low > 3 * (pooled.high - pooled.low)


def test_a_figure_or_finding_of_several_runs_reads_the_verdicts_interval() -> None:
    """One quantity, one interval: `clusters.summarize` and `clusters.paired_ratio` (figures, findings, tables)
    give the interval over runs that a verdict reads (`over_runs`), and over the repeats where there is one run."""
    runs = {"r1": [2.0, 2.1, 1.9, 2.0], "r2": [1.5, 1.6, 1.4, 1.5]}
    rows = []
    for run, ratios in runs.items():
        for repeat, ratio in enumerate(ratios):
            cell = {"machine": "m", "threads": 2, "run_id": run, "repeat": repeat, "config_name": "c"}
            rows += [
                {**cell, "variant": "a", "samples_per_s": 100.0 * ratio},
                {**cell, "variant": "b", "samples_per_s": 100.0},
            ]
    frame = pd.DataFrame(rows)
    verdicts_reading = clusters.over_runs(stats.pairs(frame, "a", "b"))
    assert verdicts_reading.runs == 2
    figure = clusters.paired_ratios(frame, ["config_name"], "a", "b").iloc[0]
    finding = clusters.paired_ratio(frame, "a", "b")
    for r in (figure, finding):
        assert (r.center, r.low, r.high) == pytest.approx(verdicts_reading[:3])
    one_run = frame[frame["run_id"] == "r1"]
    pooled = stats.Ratio.of(runs["r1"])
    assert clusters.paired_ratio(one_run, "a", "b")[:3] == pytest.approx(pooled[:3])
    rates = frame[frame["variant"] == "a"]
    summary = clusters.summarize(rates, ["config_name"]).iloc[0]
    assert summary["n"] == 8
    assert (summary["center"], summary["low"], summary["high"]) == pytest.approx(
        clusters.over_runs(rates, "samples_per_s")[:3]
    )
