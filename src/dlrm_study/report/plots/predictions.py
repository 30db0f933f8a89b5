"""The pre-registered GPU predictions beside what was measured (notebooks 00 and 03)."""

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from dlrm_study.records import columns as col
from dlrm_study.report.plots.common import PREDICTED, log_ticks, repeats, wrapped


def predictions(scored: pd.DataFrame, title: str) -> plt.Figure:
    """Each scored prediction as its range and the measurement, both over the range's middle, by claim.

    A point inside its bar fell inside the predicted range; hollow points rest on flagged repeats only.
    """
    done = scored[scored["verdict"] != "not yet measured"].sort_values(["claim", "quantity", "sweep", col.GRID])
    claims = list(dict.fromkeys(done["claim"]))
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    palette = dict(zip(claims, sns.color_palette(n_colors=len(claims)), strict=True))
    x = list(range(len(done)))
    low, high, measured = (done[k] / done["mid"] for k in ("low", "high", "measured"))
    colors = [palette[c] for c in done["claim"]]
    ax.vlines(x, low, high, colors=colors, linewidth=4, alpha=0.35)
    repeats(ax, x, measured, done["flagged_only"], "black")
    ax.axhline(1.0, color="gray", linewidth=0.6)
    for claim in claims:
        ax.plot([], [], color=palette[claim], linewidth=4, alpha=0.35, label=f"{claim}: {PREDICTED}")
    ax.scatter([], [], s=9, color="black", label="measured (hollow: flagged repeats only)")
    groups = list(done["claim"])
    centers = [(groups.index(c) + len(groups) - 1 - groups[::-1].index(c)) / 2 for c in claims]
    ax.set(yscale="log", xlabel="each prediction (one per point of the GPU script), grouped by claim",
           ylabel="measured / middle of\nthe predicted range")  # fmt: skip
    ax.set_title(wrapped(title, fig.get_figwidth(), 12))
    ax.set_xticks(centers, claims)
    ax.grid(False, axis="x")
    log_ticks(ax.yaxis, pd.concat([low, high, measured]))
    ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    first = done.iloc[0]
    said = (f"bars: the predicted ranges, 1 their middle; predicted for {first['predicted_for']} at commit "
            f"{str(first[col.GIT_COMMIT])[:7]}; measured on that GPU (results/gpu_sweeps.csv)")  # fmt: skip
    fig.text(0.0, -0.06, wrapped(said, fig.get_figwidth(), 8), fontsize=8, ha="left", va="top")
    return fig
