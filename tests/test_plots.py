import numpy as np
import pandas as pd
import pytest

from dlrm_study import config
from dlrm_study.records.record import make_record
from dlrm_study.report import plots
from dlrm_study.report.plots import common


def test_convergence_draws_each_loss_curve_in_step_order():
    """Records arrive in timestamp order, which ties scramble: a curve must still run left to right."""
    steps = [300, 100, 200, 50]
    losses = pd.DataFrame({"kind": "loss", "variant": "reference", "step": steps, "loss": [0.5, 0.6, 0.55, 0.7]})
    fields = {"kind": "eval", "step": 300, "eval_auc": 0.8}
    evals = pd.DataFrame([make_record("convergence", fields, config.preset("tiny"), variant="reference")])
    fig = plots.convergence(pd.concat([losses, evals], ignore_index=True), "t")
    (line,) = fig.axes[0].get_lines()
    assert list(line.get_xdata()) == sorted(steps)
    assert np.all(np.diff(line.get_ydata()) < 0)  # the losses went down with the steps


def timings(repeats: dict[str, int]) -> pd.DataFrame:
    """Clean records of two variants per config, `repeats[config]` repeats each, a spread between repeats."""
    rows = []
    for config_name, n in repeats.items():
        for variant, rate, jitter in (("reference", 100.0, 0.03), ("optimized-fp32", 250.0, -0.02)):
            for r in range(n):
                ms = 10.0 * (1 + 0.03 * r) * (100.0 / rate)
                rows.append({"variant": variant, "repeat": r, "config_name": config_name, "config_hash": config_name,
                             "x": 4.0, "knob": "dense features", "ms_median": ms, "ms_p10": ms * 0.95,
                             "ms_p90": ms * 1.05, "samples_per_s": rate * (1 + jitter * r), "machine": "m",
                             "timestamp": "2026-12-01", "device_name": "cpu", "torch_version": "2",
                             "git_commit": "abc", "flags": ""})  # fmt: skip
    return pd.DataFrame(rows)


def caption_of(fig) -> str:
    return fig.texts[-1].get_text()


def test_the_caption_names_intervals_only_where_error_bars_are_drawn():
    several = plots.speedup(timings({"a": 4}), "reference", "t")
    assert common.has_error_bars(several) and "error bars: 95% intervals" in caption_of(several)
    assert "diamonds" not in caption_of(several)
    one = plots.speedup(timings({"a": 1}), "reference", "t")  # one repeat: no interval to draw
    assert not common.has_error_bars(one) and "interval" not in caption_of(one).replace(common.ONE_REPEAT, "")
    assert "diamonds: one repeat, no interval" in caption_of(one)
    assert common.ONE_REPEAT in one.axes[0].get_legend_handles_labels()[1]
    mixed = plots.speedup(timings({"a": 4, "b": 1}), "reference", "t")
    assert "error bars" in caption_of(mixed) and "diamonds" in caption_of(mixed)


def test_heatmap_and_convergence_captions_claim_no_intervals():
    records = timings({"a": 3})
    ratio = pd.DataFrame([[2.0, 3.0], [4.0, 5.0]], index=[2, 8], columns=[16, 512])
    assert "interval" not in caption_of(plots.heatmap(ratio, "t", records))
    losses = pd.DataFrame({"kind": "loss", "variant": "reference", "step": [1, 2], "loss": [0.6, 0.5]})
    fields = {"kind": "eval", "step": 2, "eval_auc": 0.8}
    evals = pd.DataFrame([make_record("convergence", fields, config.preset("tiny"), variant="reference")])
    assert "interval" not in caption_of(plots.convergence(pd.concat([losses, evals], ignore_index=True), "t"))


def test_one_huge_interval_does_not_stretch_the_axis():
    records = timings({"a": 4, "b": 3})
    wild = (records["config_name"] == "b") & (records["variant"] == "optimized-fp32")
    records.loc[wild, "samples_per_s"] = [250.0, 2500.0, 25.0]  # an interval from near 0 to far above
    fig = plots.speedup(records, "reference", "t")
    ax = fig.axes[0]
    assert ax.get_ylim()[1] < 10  # not stretched to the interval's end
    assert any(text.get_text().startswith("to ") for text in ax.texts)  # the cut interval is marked


def test_a_sensitivity_point_is_the_centre_of_all_its_repeats_flagged_or_not():
    """Flags are diagnostics: a point whose repeats are all flagged is still drawn, at their centre (the
    geometric mean its interval is built on)."""
    records = timings({"a": 3})
    records = records[records["variant"] == "reference"].assign(x=[4.0, 4.0, 4.0])
    far = records.assign(x=16.0, samples_per_s=[80.0, 90.0, 85.0], flags="spread")  # every repeat flagged
    fig = plots.sensitivity(pd.concat([records, far], ignore_index=True), "t")
    (line,) = [line for line in fig.axes[0].get_lines() if line.get_marker() == "o"]  # the medians' line
    assert list(line.get_xdata()) == [4.0, 16.0] and line.get_ydata()[1] == pytest.approx((80 * 90 * 85) ** (1 / 3))
