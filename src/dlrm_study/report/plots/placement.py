"""Notebook 05's figures: the cache's hit rate against id skew and cache size; GPU placements over hbm beside
what the cache wins back (H4's two halves); GPU placements against a knob, a panel each; tables local or remote."""

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FuncFormatter, NullFormatter

from dlrm_study.analysis import clusters, stats
from dlrm_study.analysis import flags as flagging
from dlrm_study.analysis.placement import recovery
from dlrm_study.claims.h4 import H4_RECOVERY
from dlrm_study.config.variants import GPU_CACHED, GPU_HBM, GPU_HOST
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
from dlrm_study.report.plots.cpu import speedup_bars
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
    summary = clusters.summarize(remote, ["tables"]).set_index("tables").reindex(places)
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


def placements(
    records: pd.DataFrame, title: str, bands: pd.DataFrame | None = None, failed: dict[str, int] | None = None
) -> plt.Figure:
    """H4's two halves: left, each placement over tables in GPU memory (`speedup_bars`, its predicted range
    hatched, the placements whose runs all failed named); right, what the cache wins back of what host memory
    loses, per repeat, against H4's line."""
    fig, (bars, won) = plt.subplots(1, 2, figsize=(10, 4.2), gridspec_kw={"width_ratios": [3, 1.4]})
    speedup_bars(bars, records, GPU_HBM, bands, failed)
    wins_back(won, records)
    handles, names = bars.get_legend_handles_labels()
    fig.legend(handles, names, frameon=False, fontsize=8, loc="lower center", ncol=2, bbox_to_anchor=(0.5, 0.98))
    title = wrapped(title, fig.get_figwidth(), 12)
    fig.suptitle(title, y=1.1 + 0.06 * (title.count("\n") + len(names) // 2))
    fig.tight_layout()
    add_caption(fig, records)
    return fig


def wins_back(ax: plt.Axes, records: pd.DataFrame) -> None:
    """(cached - host) / (1 - host) per repeat, per config (`placement.recovery`, the rule's own arithmetic), its
    interval over runs (`clusters.over_runs`, as H4 reads it) and H4's line (`H4_RECOVERY`)."""
    configs = list(dict.fromkeys(records[col.CONFIG_NAME]))
    clean = flagging.with_flags(records)
    for i, config in enumerate(configs):
        mine = clean[clean[col.CONFIG_NAME] == config]
        rows = recovery(stats.pairs(mine, GPU_HOST, GPU_HBM), stats.pairs(mine, GPU_CACHED, GPU_HBM))
        if rows.empty:
            ax.text(i, 0.5, "no host and cached\npairs with hbm", ha="center", fontsize=7, color="dimgray")
            continue
        r = clusters.over_runs(rows, "ratio", linear=True)
        ax.scatter([i] * len(rows), rows["ratio"] * 100, s=12, color="#888888", zorder=2)
        one = pd.DataFrame([r._asdict()])[["center", "low", "high"]] * 100
        ax.errorbar([i], one["center"], yerr=error_bars(one), fmt="o", color="black", capsize=5, zorder=3)
    ax.axhline(H4_RECOVERY * 100, color="black", linestyle="--", linewidth=0.8, label=f"H4: most ({H4_RECOVERY:.0%})")
    ax.set_ylim(min(-5.0, ax.get_ylim()[0]), 105)
    ax.set_xlim(-0.7, len(configs) - 0.3)
    ax.set_xticks(range(len(configs)), configs)
    ax.set_ylabel("the cache wins back, % of what\nhost memory loses: (c - h) / (1 - h)")
    ax.legend(frameon=False, fontsize=8, loc="upper right")


def placement_sweep(records: pd.DataFrame, title: str, bands: pd.DataFrame | None = None) -> plt.Figure:
    """samples/s against one knob (`x`: id skew or table size), one panel per placement on a shared log
    axis: its geometric mean of repeats with 95% intervals, each repeat a dot (hollow when flagged), and
    its own predicted range shaded behind it (a band per panel, not five on one axis)."""
    frame = flagging.with_flags(records)
    frame["doubtful"] = flagging.flagged(frame)
    variants = ordered(frame[col.VARIANT])
    values = sorted(frame["x"].unique())
    if len(values) == 1:  # a sweep of one value is a point: its prediction at that value only, and said so
        title += f" (one value measured: {frame['knob'].iloc[0]} {compact(values[0])})"
        bands = None if bands is None or bands.empty else bands[bands["x"] == values[0]]
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
        summary = clusters.summarize(mine, ["x"])
        ax.errorbar(summary["x"], summary["center"], yerr=error_bars(summary), marker="o", capsize=3, color=color,
                    label="measured: geometric mean (bars: the caption says)")  # fmt: skip
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
    # one row: a second row of entries ran into the title
    fig.legend(
        handles, names, frameon=False, fontsize=8, loc="lower center", ncol=len(names), bbox_to_anchor=(0.5, 0.98)
    )
    title = wrapped(title, fig.get_figwidth(), 12)
    fig.suptitle(title, y=1.1 + 0.07 * title.count("\n"))
    add_caption(fig, records, extra=points_by_commit(frame))
    return fig


def points_by_commit(frame: pd.DataFrame) -> str:
    """Which knob values each commit measured, where the points drawn come from more than one."""
    by_commit = frame.groupby(frame[col.GIT_COMMIT].astype(str).str[:7])["x"].unique()
    if len(by_commit) < 2:
        return ""
    return "points measured at " + ", ".join(
        f"{commit} ({' '.join(compact(x) for x in sorted(xs))})" for commit, xs in by_commit.items()
    )


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
