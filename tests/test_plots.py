import numpy as np
import pandas as pd
import pytest

from dlrm_study import config
from dlrm_study.records.record import make_record
from dlrm_study.report import plots
from dlrm_study.report.plots import common


def test_convergence_draws_each_loops_gap_from_the_reference_in_step_order():
    """Records arrive in timestamp order, which ties scramble: a gap curve must still run left to right, at
    the mean over seeds of the loop's loss less the reference's (paired by seed)."""
    steps = [300, 100, 200, 50]
    rows = []
    for seed in (0, 1, 2):
        for step, loss in zip(steps, [0.5, 0.6, 0.55, 0.7], strict=True):
            gap = 0.001 * step / 100 + 0.0001 * seed  # grows with the step
            rows.append({"kind": "loss", "variant": "reference", "step": step, "loss": loss, "train.seed": seed})
            rows.append({"kind": "loss", "variant": "optimized-fp32", "step": step, "loss": loss + gap,
                         "train.seed": seed})  # fmt: skip
        for variant, auc in (("reference", 0.8), ("optimized-fp32", 0.801)):
            fields = {"kind": "eval", "step": 300, "eval_auc": auc}
            rows.append(make_record("convergence", fields, config.preset("tiny"), variant=variant, repeat=seed)
                        | {"train.seed": seed})  # fmt: skip
    frame = pd.DataFrame(rows).assign(machine="m", run_id="r")  # one machine and run, as a study writes them
    fig = plots.convergence(frame, "t")
    (line,) = fig.axes[0].get_lines()[:1]
    assert list(line.get_xdata()) == sorted(steps)
    assert np.allclose(line.get_ydata(), [0.001 * s / 100 + 0.0001 for s in sorted(steps)])
    assert "tiny (4 x 1,000 rows" in fig.axes[0].get_title()
    # a reader sees the loops' names in words, never their ids
    assert fig.axes[0].get_legend_handles_labels()[1] == ["optimized fp32"]
    assert [t.get_text() for t in fig.axes[1].get_xticklabels()] == ["optimized fp32"]


def test_the_caption_counts_one_repeat_in_the_singular():
    one = pd.DataFrame([make_record("s", {}, config.preset("tiny"), variant="reference", repeat=0)])
    assert ", 1 repeat, " in common.caption(one)
    assert ", 2 repeats, " in common.caption(pd.concat([one, one.assign(repeat=1)]))


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
    """The caption as one line (it is wrapped to the figure's width)."""
    return fig.texts[-1].get_text().replace("\n", " ")


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
    rows = [{"kind": "loss", "variant": v, "step": s, "loss": 0.5} for v in ("reference", "torchrec") for s in (1, 2)]
    for variant in ("reference", "torchrec"):  # one seed: one pair, no interval to claim
        fields = {"kind": "eval", "step": 2, "eval_auc": 0.8}
        rows.append(make_record("convergence", fields, config.preset("tiny"), variant=variant))
    one_seed = pd.DataFrame(rows).assign(machine="m", run_id="r", **{"train.seed": 0})
    assert "interval" not in caption_of(plots.convergence(one_seed, "t"))


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


def test_a_point_of_two_runs_is_drawn_without_its_interval_and_said_so():
    """Over two run means an interval has one degree of freedom (t = 12.7): its bar would span the axis and say
    nothing (issue 69: 04_gpu_knobs' bars from 20k to 2M samples/s). Two runs: a square, no bar; three: a bar."""
    base = timings({"a": 3})
    base = base[base["variant"] == "reference"].assign(x=4.0, repeat=0)
    two = base.iloc[:2].assign(run_id=["r1", "r2"], samples_per_s=[100.0, 300.0])
    fig = plots.sensitivity(two, "t")
    assert not common.has_error_bars(fig) and "squares: " + common.TWO_RUN_MARK in caption_of(fig)
    assert "error bars" not in caption_of(fig)
    three = base.assign(run_id=["r1", "r2", "r3"], samples_per_s=[100.0, 300.0, 200.0])
    fig = plots.sensitivity(three, "t")
    assert common.has_error_bars(fig) and "squares" not in caption_of(fig)
    one_run = base.iloc[:2].assign(run_id="r1", repeat=[0, 1], samples_per_s=[100.0, 300.0])  # two repeats
    assert not common.has_error_bars(plots.sensitivity(one_run, "t"))
    studies = three.assign(run_id=["legacy-a-1", "legacy-a-2", "legacy-a-3"])  # before run ids: one per study
    fig = plots.sensitivity(studies, "t")
    assert not common.has_error_bars(fig) and "squares: " + common.TWO_RUN_MARK in caption_of(fig)


def test_the_caption_says_what_the_repeat_dots_are_and_that_hollow_ones_are_flagged():
    fig, ax = common.plt.subplots()
    common.repeats(ax, [1, 2], [3.0, 4.0], [False, False], "black")
    common.add_caption(fig, timings({"a": 2}))
    assert "small dots: single repeats" in caption_of(fig) and "hollow" not in caption_of(fig)
    fig, ax = common.plt.subplots()
    common.repeats(ax, [1, 2], [3.0, 4.0], [False, True], "black")
    common.add_caption(fig, timings({"a": 2}))
    assert "small dots: single repeats (hollow: flagged)" in caption_of(fig)


def test_the_timed_presets_panel_names_the_machine_that_trained_it():
    """The timed presets' accuracy panel may draw another machine's records than the tiny runs': its panel and
    caption say whose (S3's rule itself, 99% of fp32's gain, is drawn in 07_accuracy)."""
    rows = []
    for seed in (0, 1, 2):
        for variant, auc in (("reference", 0.8), ("optimized-fp32", 0.801)):
            fields = {"kind": "eval", "step": 300, "eval_auc": auc}
            rows.append(make_record("convergence", fields, config.preset("tiny"), variant=variant, repeat=seed)
                        | {"train.seed": seed})  # fmt: skip
    tiny = pd.DataFrame(rows).assign(machine="m1/x/2cpu", run_id="r")
    timed = []
    for seed in (0, 1, 2):
        for variant, auc in (("optimized-fp32", 0.55), ("optimized-bf16", 0.5495)):
            fields = {"kind": "eval", "step": 300, "eval_auc": auc}
            timed.append(make_record("accuracy", fields, config.preset("dlrm-benchmark"), variant=variant,
                                     repeat=seed) | {"train.seed": seed})  # fmt: skip
    accuracy = pd.DataFrame(timed).assign(machine="m2/x/2cpu", run_id="r2")
    fig = plots.convergence(tiny, "t", accuracy)
    panel = fig.axes[2]
    assert "300 steps, 3 seeds" in panel.get_title() and panel.get_xlabel() == "trained on m2"
    assert "m1/x/2cpu" in caption_of(fig) and "m2/x/2cpu" in caption_of(fig)


def test_the_caption_stays_clear_of_a_wrapped_axis_label():
    fig, ax = common.plt.subplots()
    ax.set_xlabel("a knob\nwrapped\nonto\nfour lines")
    common.add_caption(fig, timings({"a": 2}))
    renderer = fig.canvas.get_renderer()
    label_bottom = ax.get_tightbbox(renderer).y0 / fig.bbox.height
    assert fig.texts[-1].get_position()[1] < label_bottom  # the caption's top below the label's bottom


def test_placement_size_ticks_are_short_and_a_panel_without_prediction_says_why():
    frame = timings({"a": 3}).assign(variant="gpu-cached", knob="rows per table")
    frame = pd.concat([frame.assign(x=x) for x in (100_000.0, 1_000_000.0, 4_000_000.0)], ignore_index=True)
    frame["repeat"] = range(len(frame))
    bands = pd.DataFrame({"variant": ["gpu-hbm"], "x": [1e5], "low": [1.0], "high": [2.0]})
    fig = plots.placement_sweep(frame, "t", bands)
    ax = fig.axes[0]
    fig.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["100k", "1M", "4M"]
    assert "no predicted range" in " ".join(t.get_text() for t in ax.texts)
    assert ax.get_title() == "hot rows cached (LRU)"


def test_a_long_caption_is_wrapped_to_the_figure_not_widening_it():
    frame = timings({"a": 3}).assign(machine="intel-xeon/" + "avx512f+" * 20 + "/16cpu")
    fig = plots.speedup(frame, "reference", "a title " * 30)
    width = fig.get_figwidth() * 72 / (8 * 0.55)
    assert all(len(line) <= width for line in fig.texts[-1].get_text().splitlines())
    assert "records measured at abc" in caption_of(fig)
    assert all(len(line) <= width for line in fig.axes[0].get_title().splitlines())


def test_the_s2_share_segment_starts_each_share_bar_so_its_marker_sits_at_its_end():
    from dlrm_study.records import columns as col

    ops = dict.fromkeys(col.OP_COLUMNS, 0.0) | {col.op_column("bottom_mlp"): 1.0,
                                                col.op_column("embedding_forward"): 3.0,
                                                col.op_column("embedding_backward_update"): 6.0}  # fmt: skip
    frame = timings({"dlrm-benchmark": 3})
    frame = frame[frame["variant"] == "reference"].assign(batch_size=100, **ops)
    fig = plots.cpu.breakdown(frame, "t", (0.5, "S2: 50%"))
    share_ax = fig.axes[1]
    first = min((p for p in share_ax.patches if p.get_y() < 0.5), key=lambda p: p.get_x())
    assert abs(first.get_width() - 0.6) < 1e-9  # embedding backward + update's share, from 0


def test_the_accuracy_figure_draws_and_names_only_the_precisions_trained():
    """fp32 alone (a CPU without native bf16): no empty gains panel, a title that does not name bf16 runs, and a
    caption counting seeds; with bf16 trained, the gains panel and the title's three precisions."""
    from dlrm_study.analysis.convergence import s3_accuracy
    from dlrm_study.config.variants import ACCURACY_PRECISIONS
    from dlrm_study.report.plots.convergence import accuracy

    rows = []
    for seed in (0, 1, 2):
        for variant in ACCURACY_PRECISIONS:
            base = {"machine": "m", "run_id": "r", "train.seed": seed, "repeat": seed, "variant": variant,
                    "config_name": "p", "timestamp": "2026-12-03", "device_name": "cpu", "torch_version": "2",
                    "git_commit": "abc", "eval_attainable_auc": 0.82}  # fmt: skip
            rows += [{**base, "kind": "loss", "step": s, "loss": 0.6 - s / 1000} for s in (50, 100)]
            rows += [{**base, "kind": "auc", "step": s, "eval_auc": 0.7 + s / 1000} for s in (50, 100)]
            rows.append({**base, "kind": "eval", "step": 100, "eval_auc": 0.8 + 0.001 * seed})
    every = pd.DataFrame(rows)
    fp32 = every[every["variant"] == "optimized-fp32"]
    alone = accuracy(fp32, s3_accuracy(fp32, "m"))
    assert len(alone.axes) == 2 and "alone" in alone._suptitle.get_text()
    assert "bf16" not in alone._suptitle.get_text().split("alone")[0]
    assert ", 3 seeds, " in caption_of(alone)
    full = accuracy(every, s3_accuracy(every, "m"))
    assert len(full.axes) == 3 and "plain SGD" in full._suptitle.get_text()


def test_a_caption_says_how_many_runs_each_point_had():
    """Where the claims' points have more runs than the rest, the caption gives the range, not the largest."""
    row = {"machine": "m/avx2/2cpu", "device_name": "cpu", "torch_version": "2", "timestamp": "2026-12-05",
           "git_commit": "abc1234", "config_name": "p"}  # fmt: skip
    claim = [{**row, "variant": "a", "run_id": f"r{r}", "repeat": k} for r in range(7) for k in range(3)]
    other = [{**row, "variant": "b", "run_id": "r0", "repeat": k} for k in range(3)]
    assert ", 7 runs x 3 repeats, " in common.caption(pd.DataFrame(claim))
    assert ", 1 to 7 runs a point x 3 repeats, " in common.caption(pd.DataFrame(claim + other))


def test_a_speedup_bar_says_which_kernels_ran():
    """A placement that ran the PyTorch twins says so in its legend, as one that ran Triton does."""
    rows = [{"machine": "m/avx2/2cpu/nvidia-h200", "device_name": "H200", "torch_version": "2", "git_commit": "abc1234",
             "timestamp": "2026-12-05", "config_name": "p", "run_id": "r", "repeat": k, "variant": v,
             "kernel_path": path, "samples_per_s": rate * (1 + 0.01 * k), "flags": ""}
            for k in range(3) for v, path, rate in (("gpu-hbm", "triton", 100.0), ("gpu-host", "cpp", 10.0),
                                                    ("gpu-cached", "torch", 50.0))]  # fmt: skip
    fig = plots.speedup(pd.DataFrame(rows), "gpu-hbm", "t")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("(PyTorch twin kernels)" in label for label in labels), labels
    assert any("(fused C++ kernels)" in label for label in labels), labels
