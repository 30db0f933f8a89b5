"""The pre-registered GPU predictions beside what was measured (notebooks 00 and 03)."""

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from dlrm_study.records import columns as col
from dlrm_study.report.plots.common import add_caption, caption_y, log_ticks, repeats, wrapped


def predictions(scored: pd.DataFrame, title: str, records: pd.DataFrame | None = None) -> plt.Figure:
    """Each scored prediction as its range and the measurement, both over the range's middle, by claim;
    `records`: the GPU records the measurements were read from, named in the caption (machine, code, repeats).

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
        ax.plot([], [], color=palette[claim], linewidth=4, alpha=0.35, label=f"{claim}: predicted range (model)")
    ax.scatter([], [], s=9, color="black", label="measured (hollow: flagged repeats only)")
    # A group per claim and quantity, each labelled and set apart: a claim predicts several quantities, and an
    # unlabelled run of narrow bars inside a claim's group reads as a group of its own.
    groups = [f"{c}\n{quantity_words(q)}" for c, q in zip(done["claim"], done["quantity"], strict=True)]
    names = list(dict.fromkeys(groups))
    centers = [(groups.index(g) + len(groups) - 1 - groups[::-1].index(g)) / 2 for g in names]
    for g in names[1:]:
        ax.axvline(groups.index(g) - 0.5, color="lightgray", linewidth=0.8, zorder=0)
    ax.set(yscale="log", xlabel="each prediction (one per point of the GPU script), grouped by claim and quantity",
           ylabel="measured / middle of\nthe predicted range")  # fmt: skip
    ax.set_title(wrapped(title, fig.get_figwidth(), 12))
    # every other label a line lower: a group of two predictions is narrower than its label
    ax.set_xticks(centers, [("\n\n" if i % 2 else "") + name for i, name in enumerate(names)], fontsize=8)
    ax.grid(False, axis="x")
    log_ticks(ax.yaxis, pd.concat([low, high, measured]))
    ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    first = done.iloc[0]
    said = (f"bars: the predicted ranges (1 is each range's middle); predicted for {first['predicted_for']} at commit "
            f"{str(first[col.GIT_COMMIT])[:7]}; measured on that GPU (results/gpu_sweeps.csv)")  # fmt: skip
    if records is not None and not records.empty:
        add_caption(fig, records, extra=said)
    else:
        fig.text(0.0, caption_y(fig), wrapped(said, fig.get_figwidth(), 8), fontsize=8, ha="left", va="top")
    return fig


def quantity_words(quantity: str) -> str:
    """A predicted quantity as the axis names it: `gpu_over_cpu` -> `GPU / CPU`."""
    return QUANTITY_WORDS.get(quantity, quantity.replace("_", " "))


QUANTITY_WORDS = {"gpu_over_cpu": "GPU / CPU", col.SAMPLES_PER_S: "samples/s", "over_hbm": "over GPU memory"}
