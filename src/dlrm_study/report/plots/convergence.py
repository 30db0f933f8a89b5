"""Notebook 07's figure: each loop's loss over training and its held-out AUC."""

import matplotlib.pyplot as plt
import pandas as pd

from dlrm_study.records import columns as col
from dlrm_study.report.plots.common import add_caption, ordered


def convergence(records: pd.DataFrame, title: str) -> plt.Figure:
    """Training loss (windowed mean, averaged over seeds) against step, one line per variant; the median
    held-out AUC over seeds in the legend."""
    losses = records[records[col.KIND] == "loss"]
    evals = records[records[col.KIND] == "eval"].groupby(col.VARIANT)[col.EVAL_AUC].agg(["median", "count"])
    order = ordered(losses[col.VARIANT])
    labels = {
        v: f"{v} (AUC {evals.loc[v, 'median']:.4f}, {evals.loc[v, 'count']} seed(s))" for v in order if v in evals.index
    }
    fig, ax = plt.subplots(figsize=(8, 4))
    for variant in order:
        rows = losses[losses[col.VARIANT] == variant].groupby(col.STEP)[col.LOSS].mean()  # in step order
        ax.plot(rows.index, rows.values, label=labels.get(variant, variant), linewidth=1.2)
    ax.set_xlabel("training step")
    ax.set_ylabel("training loss (BCE, window mean)")
    ax.set_title(title)
    ax.legend(frameon=False)
    add_caption(fig, records[records[col.KIND] == "eval"])
    return fig
