"""Figure 01 draws S2's interval as the verdict computes it (over runs, warm-ups out), and its caption counts the
runs and the repeats within each."""

import pandas as pd
from tests.test_plots import caption_of

from dlrm_study.analysis.clusters import over_runs
from dlrm_study.analysis.cpu import embedding_share_rows
from dlrm_study.analysis.current import without_warm_up
from dlrm_study.records import columns as col
from dlrm_study.report import plots

# Embedding backward + update's share per (run, repeat): the runs disagree, so the interval over their two means
# is far wider than the interval pooled over the six repeats (the figure once drew the pooled one).
SHARES = {("r1", 0): 0.9, ("r1", 1): 0.50, ("r1", 2): 0.52, ("r2", 0): 0.1, ("r2", 1): 0.60, ("r2", 2): 0.62}


def records() -> pd.DataFrame:
    rows = []
    for (run, repeat), share in SHARES.items():
        ops = dict.fromkeys(col.OP_COLUMNS, 0.0) | {
            col.op_column("embedding_backward_update"): 100 * share,
            col.op_column("bottom_mlp"): 100 * (1 - share),
        }
        rows.append({"variant": "reference", "repeat": repeat, col.RUN_ID: run, "threads": 2, "machine": "m",
                     "config_name": "dlrm-benchmark", "batch_size": 100, "ms_median": 100.0, "ms_p10": 95.0,
                     "ms_p90": 105.0, "timestamp": "2026-12-01", "device_name": "cpu", "torch_version": "2",
                     "git_commit": "abc", "flags": "", **ops})  # fmt: skip
    return pd.DataFrame(rows)


def drawn_interval(fig) -> tuple[float, float]:
    """The ends of the S2 error bar on the share panel."""
    (bars,) = [c for c in fig.axes[1].containers if hasattr(c, "has_xerr") and c.has_xerr]
    (segment,) = bars.lines[2][0].get_segments()
    return float(segment[0][0]), float(segment[1][0])


def test_the_s2_bar_is_the_verdicts_interval_over_runs():
    frame = records()
    verdict = over_runs(embedding_share_rows(without_warm_up(frame)), "share", share=True)
    low, high = drawn_interval(plots.cpu.breakdown(frame, "t", (0.5, "S2: 50%")))
    assert abs(low - verdict.low) < 1e-9 and abs(high - verdict.high) < 1e-9
    assert high - low > 0.3  # the pooled repeats' interval would be about 0.1 wide


def test_the_caption_counts_runs_and_the_repeats_within_each():
    said = caption_of(plots.cpu.breakdown(records(), "t", (0.5, "S2: 50%")))
    assert "2 runs x 3 repeats" in said and ", 3 repeats" not in said
