"""Notebooks 03 and 04's figures: throughput against one knob, and GPU over CPU on the dense x sparse grid."""

import textwrap

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FuncFormatter, NullFormatter

from dlrm_study.analysis import clusters
from dlrm_study.analysis import flags as flagging
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


def sensitivity(records: pd.DataFrame, title: str, bands: pd.DataFrame | None = None) -> plt.Figure:
    """samples/s against one knob (`x`, labelled by `knob`), one line per variant, log-log.

    A line per variant and machine: the geometric means of all repeats with their 95% intervals (flags
    are diagnostics, not a filter), and every repeat as a dot (hollow when flagged). `bands`
    (variant, x, low, high): predicted ranges, drawn shaded in the variant's colour and labelled
    as predictions.
    """
    frame = flagging.with_flags(records)
    frame["doubtful"] = flagging.flagged(frame)
    series = [
        (v, m)
        for v in ordered(frame[col.VARIANT])
        for m in sorted(frame[frame[col.VARIANT] == v][col.MACHINE].unique())
    ]
    several = len({m for _, m in series}) > 1
    predicted = [] if bands is None or bands.empty else ordered(bands[col.VARIANT])
    palette = sns.color_palette(n_colors=len(series) + len(predicted))
    colors = dict(zip(series, palette, strict=False))
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for i, variant in enumerate(predicted):
        drawn = [c for (v, _), c in colors.items() if v == variant]
        color = drawn[0] if drawn else palette[len(series) + i]
        predicted_band(ax, bands[bands[col.VARIANT] == variant], color, f"{variant}: {PREDICTED}")
    for (variant, machine), color in colors.items():
        mine = frame[(frame[col.VARIANT] == variant) & (frame[col.MACHINE] == machine)]
        summary = clusters.summarize(mine, ["x"])
        label = f"{variant} ({machine})" if several else variant
        ax.errorbar(summary["x"], summary["center"], yerr=error_bars(summary), marker="o", capsize=3, color=color,
                    label=label)  # fmt: skip
        mark_single(ax, summary["x"], summary, color)
        repeats(ax, mine["x"], mine[col.SAMPLES_PER_S], mine["doubtful"], color)
    ax.set(xscale="log", yscale="log", xlabel=frame["knob"].iloc[0], ylabel="training samples/s", title=title)
    ax.set_xticks(sorted(frame["x"].unique()))  # the measured values, written plainly (1.05 stays 1.05)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: plain(value)))
    ax.xaxis.set_minor_formatter(NullFormatter())
    spans = [frame[col.SAMPLES_PER_S]] + ([] if not predicted else [bands["low"], bands["high"]])
    log_ticks(ax.yaxis, pd.concat(spans, ignore_index=True))
    ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside: no data hidden
    add_caption(fig, records)
    return fig


def heatmap(ratio: pd.DataFrame, title: str, records: pd.DataFrame) -> plt.Figure:
    """A grid of ratios (rows x columns), annotated, 1.0 at the colour scale's centre."""
    fig, ax = plt.subplots(figsize=(6, 4))
    label = "samples/s ratio (paired within repeats)"
    sns.heatmap(ratio, annot=True, fmt=".1f", cmap="vlag", center=1.0, cbar_kws={"label": label}, ax=ax)
    ax.invert_yaxis()
    ax.set_title(title)
    add_caption(fig, records)
    return fig


def knob_panels(
    frames: dict[str, pd.DataFrame], title: str, bands: dict[str, pd.DataFrame] | None = None
) -> plt.Figure:
    """One machine's samples/s against each knob, a panel per knob (`x`, labelled by `knob`), log-log: per
    variant the geometric mean of all repeats with 95% intervals, each repeat a dot (hollow when flagged),
    and its predicted range shaded where `bands` has one. The GPU's knobs on their own axes, not a CPU's."""
    knobs = [k for k, f in frames.items() if not f.empty]
    fig, axes = plt.subplots(1, len(knobs), figsize=(3.3 * len(knobs) + 1, 3.8), sharey=True, squeeze=False)
    every = pd.concat([frames[k] for k in knobs], ignore_index=True)
    variants = ordered(every[col.VARIANT])
    palette = dict(zip(variants, sns.color_palette(n_colors=len(variants)), strict=True))
    spans = [every[col.SAMPLES_PER_S]]
    for ax, knob in zip(axes[0], knobs, strict=True):
        frame = flagging.with_flags(frames[knob])
        frame["doubtful"] = flagging.flagged(frame)
        band = (bands or {}).get(knob, pd.DataFrame())
        for variant in ordered(frame[col.VARIANT]):
            color = palette[variant]
            mine_band = band[band[col.VARIANT] == variant] if not band.empty else band
            if not mine_band.empty:
                predicted_band(ax, mine_band, color, f"{variant_words(variant)}: {PREDICTED}")
                spans += [mine_band["low"], mine_band["high"]]
            mine = frame[frame[col.VARIANT] == variant]
            summary = clusters.summarize(mine, ["x"])
            ax.errorbar(summary["x"], summary["center"], yerr=error_bars(summary), marker="o", capsize=3,
                        color=color, label=f"{variant_words(variant)}: measured")  # fmt: skip
            mark_single(ax, summary["x"], summary, color)
            repeats(ax, mine["x"], mine[col.SAMPLES_PER_S], mine["doubtful"], color)
        ax.set(xscale="log", yscale="log", xlabel=textwrap.fill(str(frame["knob"].iloc[0]), 24))
        ax.set_xticks(sorted(frame["x"].unique()))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: plain(value)))
        ax.xaxis.set_minor_formatter(NullFormatter())
    axes[0][0].set_ylabel("training samples/s")
    log_ticks(axes[0][0].yaxis, pd.concat(spans, ignore_index=True))
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, frameon=False, fontsize=8, loc="lower center", ncol=3, bbox_to_anchor=(0.5, 0.98))
    title = wrapped(title, fig.get_figwidth(), 12)
    fig.suptitle(title, y=1.1 + 0.07 * title.count("\n"))  # its last line clear of the legend
    add_caption(fig, every)
    return fig
