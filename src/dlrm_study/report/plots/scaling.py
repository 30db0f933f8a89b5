"""Notebook 06's figures: the distributed step's compute and communication, and the projection to many ranks."""

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FuncFormatter, NullFormatter

from dlrm_study.analysis import clusters
from dlrm_study.analysis import flags as flagging
from dlrm_study.records import columns as col
from dlrm_study.report.plots.common import add_caption, error_bars, mark_single


def scaling_breakdown(records: pd.DataFrame, title: str) -> plt.Figure:
    """Per measured point: compute alone and the rest of the step, ms per step (medians of all repeats).

    At 2 ranks the rest is communication the overlap did not hide; at 1 rank there is no peer,
    and the rest is the cost of the collective calls themselves (DDP's gradient buckets, a
    local all-to-all), drawn apart so it does not read as communication.
    """
    clean = flagging.with_flags(records)  # every repeat counts
    keys = [col.WORLD_SIZE, col.BATCH_SIZE, "data.lookups_per_table"]
    rows = clean.groupby(keys)[[col.COMPUTE_MS_MEDIAN, "exposed_comm_ms"]].median().reset_index().sort_values(keys)
    steps = clusters.summarize(clean, keys, col.MS_MEDIAN).sort_values(keys)
    labels = [
        f"{int(r.world_size)} rank{'s' if r.world_size > 1 else ''}, batch {int(r.batch_size):,}, "
        f"{int(r['data.lookups_per_table'])} lookups"
        for _, r in rows.iterrows()
    ]
    single = (rows[col.WORLD_SIZE] == 1).to_numpy()
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(rows) + 1.8))
    y = list(range(len(rows)))
    compute, rest = rows[col.COMPUTE_MS_MEDIAN].to_numpy(), rows["exposed_comm_ms"].to_numpy()
    ax.barh(y, compute, height=0.7, label="compute alone")
    ax.barh([i for i in y if not single[i]], rest[~single], left=compute[~single], height=0.7,
            label="exposed communication")  # fmt: skip
    ax.barh([i for i in y if single[i]], rest[single], left=compute[single], height=0.7, color="lightgrey",
            hatch="..", label="collective calls, no peer (1 rank)")  # fmt: skip
    ax.errorbar(steps["center"], y, xerr=error_bars(steps), fmt="|", color="black", markersize=14, capsize=3,
                label="timed step" + (", 95% interval" if steps["low"].notna().any() else ""))  # fmt: skip
    mark_single(ax, y, steps, horizontal=True)
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlabel("time per training step, slowest rank (ms, median of repeats)")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    add_caption(fig, records)
    return fig


def scaling_projection(
    projection: pd.DataFrame, title: str, records: pd.DataFrame, measured: dict[str, tuple[float, float, float]],
    assumptions: str, here: pd.DataFrame | None = None,
) -> plt.Figure:  # fmt: skip
    """Modelled parallel efficiency against ranks, strong and weak, with the measured 2-rank points.

    `measured`: the strong and weak efficiencies at 2 ranks as (center, low, high); `here`: the
    model with this machine's own link at 1 and 2 ranks (dashed), the one the points test.
    """
    fig, ax = plt.subplots(figsize=(7, 4.2))
    colors = dict(zip(("strong", "weak"), sns.color_palette(n_colors=2), strict=True))
    for mode, rows in projection.groupby("mode"):
        ax.plot(rows["ranks"], rows["efficiency"], marker="o", markersize=4, color=colors[mode],
                label=f"{mode} scaling, model, projected link")  # fmt: skip
        if here is not None:
            mine = here[here["mode"] == mode]
            ax.plot(mine["ranks"], mine["efficiency"], linestyle="--", color=colors[mode],
                    label=f"{mode} scaling, model, this machine's link")  # fmt: skip
        center, low, high = measured[f"{mode}_efficiency"]
        if center == center:
            summary = pd.DataFrame([(center, low, high)], columns=["center", "low", "high"])
            ax.errorbar([2], [center], yerr=error_bars(summary), fmt="s", markersize=8, capsize=4, color=colors[mode],
                        markeredgecolor="black",
                        label=f"{mode} scaling, measured" + (" (95% interval)" if low == low else ""))  # fmt: skip
            mark_single(ax, [2], summary, colors[mode])
    ax.set(xscale="log", ylim=(0, 1.1), xlabel="ranks", ylabel="parallel efficiency", title=title)
    ax.set_xticks(sorted(projection["ranks"].unique()))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:.0f}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.legend(frameon=False, fontsize=8, loc="lower left")
    ax.text(1.02, 0.98, assumptions, transform=ax.transAxes, fontsize=7.5, va="top", ha="left", wrap=True)
    add_caption(fig, records)
    return fig
