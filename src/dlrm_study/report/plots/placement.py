"""Notebook 05's figures: the cache's hit rate against id skew and cache size; GPU placements against a
knob, a panel each; tables local or remote."""

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FuncFormatter, NullFormatter

from dlrm_study.analysis import flags as flagging
from dlrm_study.analysis import stats
from dlrm_study.records import columns as col
from dlrm_study.report.plots.common import (
    PREDICTED,
    add_caption,
    error_bars,
    log_ticks,
    mark_single,
    ordered,
    plain,
    predicted_band,
    repeats,
    wrapped,
)
from dlrm_study.report.readable import variant_words


def hit_rates(records: pd.DataFrame, title: str) -> plt.Figure:
    """Cache hit rate (top) and rows evicted per batch (bottom) against id skew, one line per cache
    size, one column per policy: counts over the measured batches, so no interval."""
    rows = records.assign(cache=records["cache_fraction"].map(lambda f: f"{f:.1%} of rows"))
    long = rows.melt(
        id_vars=["zipf_alpha", "cache", "cache_policy"], value_vars=["cache_hit_rate", "evictions_per_batch"],
        var_name="count", value_name="value",
    )  # fmt: skip
    names = {"cache_hit_rate": "hit rate (per lookup)", "evictions_per_batch": "rows evicted per batch"}
    long["count"] = long["count"].map(names)
    grid = sns.relplot(
        long, x="zipf_alpha", y="value", hue="cache", col="cache_policy", row="count", kind="line", marker="o",
        height=3.0, aspect=1.3, facet_kws={"sharey": "row"}, errorbar=None,
    )  # fmt: skip
    grid.set_titles("{col_name}, {row_name}")
    grid.set_axis_labels("Zipf exponent of the ids (skew)", "")
    for (count, _), ax in grid.axes_dict.items():
        ax.set_ylabel(count)
    grid.figure.suptitle(title, y=1.03)
    add_caption(grid.figure, records)
    return grid.figure


def remote_tables(remote: pd.DataFrame, title: str) -> plt.Figure:
    """Local against remote tables: left, each repeat's samples/s in both places (a line joins a repeat's
    pair) with each place's geometric mean and 95% interval; right, remote over local per pair, their
    geometric mean and 95% interval, and 1.0 (no cost) dashed."""
    fig, (rates_ax, ratio_ax) = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [3, 2]})
    places = list(dict.fromkeys(remote.sort_values(col.VARIANT)["tables"]))
    for _, pair in remote.groupby([k for k in stats.CELL if k in remote], dropna=False):
        pair = pair.set_index("tables").reindex(places)
        rates_ax.plot(range(len(places)), pair[col.SAMPLES_PER_S], color="#bbbbbb", linewidth=0.8, zorder=1)
    summary = stats.summarize(remote, ["tables"]).set_index("tables").reindex(places)
    rates_ax.errorbar(range(len(places)), summary["center"], yerr=error_bars(summary), fmt="o", color="black",
                      capsize=5, zorder=3, label="geometric mean, 95% interval")  # fmt: skip
    rates_ax.scatter(remote["tables"].map(places.index), remote[col.SAMPLES_PER_S], s=12, color="#888888", zorder=2,
                     label="a repeat (lines join a repeat's pair)")  # fmt: skip
    rates_ax.set_xticks(range(len(places)), places)
    rates_ax.set_xlim(-0.5, len(places) - 0.5)
    rates_ax.set_ylabel("samples/s")
    # above the panel, clear of the points whichever place is faster
    rates_ax.legend(frameon=False, fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2)
    local, far = sorted(remote[col.VARIANT].unique())[0], sorted(remote[col.VARIANT].unique())[-1]
    found = stats.pairs(remote, far, local)
    ratio = stats.Ratio.of(list(found["ratio"]))
    ratio_ax.scatter([0] * len(found), found["ratio"], s=12, color="#888888", zorder=2)
    one = pd.DataFrame([ratio._asdict()])
    ratio_ax.errorbar([0], [ratio.center], yerr=error_bars(one), fmt="o", color="black", capsize=5, zorder=3)
    ratio_ax.axhline(1.0, color="black", linestyle="--", linewidth=0.8)
    ratio_ax.set_xticks([0], [f"{summary.index[-1]} over {summary.index[0]}\n{ratio.n} pairs (grey: each pair)"])
    ratio_ax.set_xlim(-1, 1)
    ratio_ax.set_ylabel("samples/s ratio\n(paired within repeats)")
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, 0.97))  # the title and the legend above the panels stay apart
    add_caption(fig, remote)
    return fig


def placement_sweep(records: pd.DataFrame, title: str, bands: pd.DataFrame | None = None) -> plt.Figure:
    """samples/s against one knob (`x`: id skew or table size), one panel per placement on a shared log
    axis: its geometric mean of repeats with 95% intervals, each repeat a dot (hollow when flagged), and
    its own predicted range shaded behind it (a band per panel, not five on one axis)."""
    frame = flagging.with_flags(records)
    frame["doubtful"] = flagging.flagged(frame)
    variants = ordered(frame[col.VARIANT])
    fig, axes = plt.subplots(1, len(variants), figsize=(2.6 * len(variants) + 1, 3.6), sharey=True, squeeze=False)
    palette = dict(zip(variants, sns.color_palette(n_colors=len(variants)), strict=True))
    for ax, variant in zip(axes[0], variants, strict=True):
        color = palette[variant]
        band = pd.DataFrame() if bands is None or bands.empty else bands[bands[col.VARIANT] == variant]
        if not band.empty:
            predicted_band(ax, band, color, PREDICTED)
        elif bands is not None:
            ax.text(0.5, 0.04, no_band_why(variant), transform=ax.transAxes, ha="center", va="bottom", fontsize=7,
                    color="dimgray", wrap=True)  # fmt: skip
        mine = frame[frame[col.VARIANT] == variant]
        summary = stats.summarize(mine, ["x"])
        ax.errorbar(summary["x"], summary["center"], yerr=error_bars(summary), marker="o", capsize=3, color=color,
                    label="measured: geometric mean, 95% interval")  # fmt: skip
        mark_single(ax, summary["x"], summary, color)
        repeats(ax, mine["x"], mine[col.SAMPLES_PER_S], mine["doubtful"], color)
        ax.set(xscale="log", yscale="log", xlabel=frame["knob"].iloc[0])
        ax.set_title(variant_words(variant), fontsize=9)
        ax.set_xticks(sorted(frame["x"].unique()))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: compact(value)))
        ax.xaxis.set_minor_formatter(NullFormatter())
    axes[0][0].set_ylabel("training samples/s")
    spans = [frame[col.SAMPLES_PER_S]] + ([] if bands is None or bands.empty else [bands["low"], bands["high"]])
    log_ticks(axes[0][0].yaxis, pd.concat(spans, ignore_index=True))
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, frameon=False, fontsize=8, loc="lower center", ncol=2, bbox_to_anchor=(0.5, 0.98))
    title = wrapped(title, fig.get_figwidth(), 12)
    fig.suptitle(title, y=1.1 + 0.07 * title.count("\n"))
    add_caption(fig, records)
    return fig


def no_band_why(variant: str) -> str:
    """Why a panel has no predicted range: a cache's prediction needs a counted hit rate at its points."""
    if "cached" in variant:
        return "no predicted range: the model needs\na hit rate counted at these points\n(none was)"
    return "no predicted range at these points"


def compact(value: float) -> str:
    """Short tick labels that do not collide: 100k, 1M, 4M; small values as they are."""
    for size, unit in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:g}{unit}"
    return plain(value)
