"""Notebooks 01 and 02's figures: the per-operator breakdown, the ablation, speedups, the S1 decomposition."""

import textwrap

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter

from dlrm_study.analysis import clusters
from dlrm_study.analysis import flags as flagging
from dlrm_study.analysis.clusters import over_runs
from dlrm_study.analysis.cpu import embedding_share_rows
from dlrm_study.analysis.current import without_warm_up
from dlrm_study.analysis.wording import count
from dlrm_study.records import columns as col
from dlrm_study.report.plots.common import (
    PREDICTED,
    add_caption,
    clip_axis,
    drawn_band,
    error_bars,
    log_ticks,
    mark_single,
    ordered,
    wrapped,
)
from dlrm_study.report.readable import kernel_words, variant_words

VERDICT_SHARE = "S2's quantity: embedding backward + update,\n95% interval over runs (the verdict's)"


def breakdown(records: pd.DataFrame, title: str, share_line: tuple[float, str] | None = None) -> plt.Figure:
    """Per config (and variant): time per sample of each operator, and each operator's share.

    Per sample, so a batch of 128 sits beside batches of 2,048; the medians of the repeats
    whose breakdown is not flagged (a config with none is drawn from its flagged ones, hollow
    and labelled so). The black bar on each row is the timed step per sample (geometric mean of
    the repeats) with its 95% interval: the profiled operators add up to about it where the
    breakdown is sound. `share_line` (share, text): a claim's threshold (S2), drawn with the claim's
    own quantity on each row, embedding backward + update's share with the verdict's 95% interval, over runs
    (`clusters.over_runs` of `analysis.cpu.embedding_share_rows`, warm-ups out, as the S2 rule computes it).
    """
    ops = [column for column in col.OP_COLUMNS if column in records]
    rows = flagging.with_flags(records.dropna(subset=ops))
    rows["doubtful"] = flagging.flagged(rows, "breakdown")
    rows["label"] = rows[col.CONFIG_NAME] + (" / " + rows[col.VARIANT] if rows[col.VARIANT].nunique() > 1 else "")
    bars = []
    for label, group in rows.groupby("label", sort=False):
        clean = group[~group["doubtful"]]
        hollow = clean.empty
        per_sample = (group if hollow else clean)[ops].div(group[col.BATCH_SIZE].iloc[0] / 1e3)  # us per sample
        timed = clusters.interval_of(group, group[col.MS_MEDIAN] / group[col.BATCH_SIZE].iloc[0] * 1e3)
        bars.append((label + (" (flagged)" if hollow else ""), per_sample.median(), hollow, timed, group))
    fig, (ax, share_ax) = plt.subplots(1, 2, figsize=(13, 0.5 * len(bars) + 2.2), sharey=True,
                                       gridspec_kw={"width_ratios": [3, 2]})  # fmt: skip
    colors = sns.color_palette(n_colors=len(ops))
    # With a claim's share drawn, its operator's segment starts each share bar, so the claim's marker sits at
    # that segment's right end rather than over whichever operator happens to lie at that share.
    first = [op for op in ops if share_line is not None and op == col.op_column("embedding_backward_update")]
    share_order = first + [op for op in ops if op not in first]
    color_of = dict(zip(ops, colors, strict=True))
    for y, (_, times, hollow, timed, _) in enumerate(bars):
        left = share_left = 0.0
        for op in ops:
            style = bar_style(color_of[op], hollow)
            ax.barh(y, times[op], left=left, height=0.7, **style, label=op if y == 0 else None)
            left += times[op]
        for op in share_order:
            share = times[op] / times.sum()
            share_ax.barh(y, share, left=share_left, height=0.7, **bar_style(color_of[op], hollow))
            share_left += share
        if timed[0] == timed[0]:
            summary = pd.DataFrame([timed], columns=["center", "low", "high"])
            ax.errorbar(timed[0], y, xerr=error_bars(summary), fmt="|", color="black", markersize=14, capsize=3)
            mark_single(ax, [y], summary, horizontal=True)
    ax.set_yticks(range(len(bars)), [bar[0] for bar in bars])
    ax.invert_yaxis()
    ax.set_xlabel("time per sample (µs), operators' median; black: the timed step, 95% interval")
    share_ax.set_xlabel("share of the profiled iteration")
    share_ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0%}"))
    share_ax.set_xlim(0, 1)
    if share_line is not None:  # a claim's threshold (S2: embeddings dominate), against the claim's quantity
        # The verdict's interval: runs as clusters (`clusters.over_runs`), as the S2 rule reads it, not pooled repeats.
        judged = [over_runs(embedding_share_rows(without_warm_up(g)), "share", share=True) for *_, g in bars]
        shares = pd.DataFrame([r[:3] for r in judged], columns=["center", "low", "high"])
        share_ax.errorbar(shares["center"], range(len(bars)), xerr=error_bars(shares), fmt="|", color="black",
                          markersize=16, markeredgewidth=2.5, capsize=4, zorder=4,
                          label=VERDICT_SHARE)  # fmt: skip
        share_ax.axvline(share_line[0], color="black", linestyle="--", linewidth=1, label=share_line[1])
    handles, names = ax.get_legend_handles_labels()
    more, their_names = share_ax.get_legend_handles_labels()
    names = [col.op_label(n) for n in names]
    share_ax.legend(handles + more, names + their_names, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.suptitle(title)
    add_caption(fig, records)
    return fig


def bar_style(color, hollow: bool) -> dict:
    """A bar filled with its operator's colour, or hatched and unfilled where drawn from flagged repeats only."""
    return {"facecolor": "none", "edgecolor": color, "hatch": "//"} if hollow else {"color": color}


BAR_COLORS = "green: faster (the interval above 1x), grey: no clear effect (across 1x), red: slower (below 1x)"


def ablation(
    steps: pd.DataFrame, title: str, records: pd.DataFrame, claim: tuple[str, float, str] | None = None
) -> plt.Figure:
    """The ablation (`studies.ablation_steps`): each step's gain over the one before, and over the reference.

    `claim` (step, factor, text): a claim's factor for one step's gain (S3: bf16 over fp32), drawn on its row.
    """
    fig, (gain_ax, total_ax) = plt.subplots(1, 2, figsize=(12, 0.55 * len(steps) + 2), sharey=True)
    y = list(range(len(steps)))
    for ax, prefix, xlabel in (
        (gain_ax, "", "samples/s over the step before (paired)"),
        (total_ax, "total_", "samples/s over the reference (paired)"),
    ):
        summary = pd.DataFrame({k: steps[f"{prefix}{k}"] for k in ("center", "low", "high")})
        colors = ["#888888" if low != low or low <= 1 <= high else ("#2a7" if low > 1 else "#c44")
                  for low, high in zip(summary["low"], summary["high"], strict=True)]  # fmt: skip
        ax.barh(y, summary["center"] - 1, left=1, height=0.6, color=colors, xerr=error_bars(summary), capsize=3)
        mark_single(ax, y, summary, horizontal=True)
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:.2f}x"))
        ax.set_xlabel(xlabel)
    if claim is not None and claim[0] in list(steps["step"]):
        row = list(steps["step"]).index(claim[0])
        gain_ax.vlines(claim[1], row - 0.4, row + 0.4, color="black", linestyle="--", linewidth=1.2, label=claim[2])
        gain_ax.legend(frameon=False, fontsize=8, loc="upper right")  # clear of the claim's line on its row
    gain_ax.set_yticks(y, steps["label"])
    gain_ax.invert_yaxis()
    fig.suptitle(title)
    add_caption(fig, records, extra=BAR_COLORS)
    return fig


def speedup(
    records: pd.DataFrame,
    baseline: str,
    title: str,
    bands: pd.DataFrame | None = None,
    failed: dict[str, int] | None = None,
) -> plt.Figure:
    """Bars: each variant's samples/s over the baseline's, paired within repeats, per config, with intervals
    (`speedup_bars`)."""
    configs = records[col.CONFIG_NAME].nunique()
    variants = max(1, records[col.VARIANT].nunique() - 1)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * configs * variants / 2), 4))
    speedup_bars(ax, records, baseline, bands, failed)
    ax.set_title(wrapped(title, fig.get_figwidth() * 0.75, 12))
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    add_caption(fig, records)
    return fig


def speedup_bars(
    ax: plt.Axes,
    records: pd.DataFrame,
    baseline: str,
    bands: pd.DataFrame | None = None,
    failed: dict[str, int] | None = None,
) -> None:
    """Each variant's samples/s over the baseline's on `ax`, paired within repeats, per config, with intervals.

    `bands` (variant, config_name, low, high): predicted ranges, drawn as hatched boxes over the bars.
    `failed` (variant: error records): variants with no bar because every run of them failed, said in the legend.
    """
    clean = flagging.with_flags(records)  # every repeat counts
    configs = list(dict.fromkeys(records[col.CONFIG_NAME]))
    variants = [v for v in ordered(records[col.VARIANT]) if v != baseline]
    width = 0.8 / max(1, len(variants))
    palette = sns.color_palette(n_colors=max(1, len(variants)))
    drawn = []
    for i, variant in enumerate(variants):
        ratio = clusters.paired_ratios(clean, [col.CONFIG_NAME], variant, baseline).set_index(col.CONFIG_NAME)
        ratio = ratio.reindex(configs)
        x = [c + (i - (len(variants) - 1) / 2) * width for c in range(len(configs))]
        kernels = kernel_words(records[records[col.VARIANT] == variant])  # what ran: a twin is not the kernel
        ax.bar(x, ratio["center"], width, yerr=error_bars(ratio), capsize=3, color=palette[i],
               label=variant_words(variant) + (f" ({kernels})" if kernels else ""))  # fmt: skip
        mark_single(ax, x, ratio)
        drawn.append(ratio)
        mine = pd.DataFrame() if bands is None or bands.empty else bands[bands[col.VARIANT] == variant]
        for xi, config in zip(x, configs, strict=True) if not mine.empty else ():
            box = mine[mine[col.CONFIG_NAME] == config]
            if not box.empty:
                low, high = float(box["low"].iloc[0]), float(box["high"].iloc[0])
                # Over the bar, unfilled: a range below the bar's top stays visible.
                ax.bar(xi, high - low, width * 0.9, bottom=low, color="none", edgecolor="black", hatch="///",
                       linewidth=0.8, zorder=3, label=PREDICTED if not drawn_band(ax) else None)  # fmt: skip
    for variant, errors in (failed or {}).items():  # no bar to draw: an empty box in the legend says why
        ax.add_patch(Rectangle((0, 0), 0, 0, facecolor="none", edgecolor="gray", linestyle="--",
                               label=f"{variant_words(variant)}: no bar ({count(errors, 'error record')}, "
                                     "nothing measured)"))  # fmt: skip
    ax.axhline(1.0, color="black", linewidth=0.8)
    if drawn:
        every = pd.concat(drawn)
        tops = [every["center"]] + ([] if bands is None or bands.empty else [bands["high"]])
        clip_axis(ax, pd.concat(tops), every["high"])
    ax.set_xticks(range(len(configs)), configs)
    ax.set_ylabel(f"samples/s relative to\n{variant_words(baseline)} (paired within repeats)")


def decomposition(
    factors: pd.DataFrame, title: str, records: pd.DataFrame, claim: tuple[float, str] | None = None
) -> plt.Figure:
    """S1 step by step: each step's samples/s over the 2020 step on torch 1.5.1 (paired, 95% intervals),
    one panel per config, a bar per thread count, log scale; `claim` (factor, text): S1's factor as a line."""
    configs = list(dict.fromkeys(factors[col.CONFIG_NAME]))
    steps = list(dict.fromkeys(factors["step"]))
    counts = sorted(factors[col.THREADS].unique())
    fig, axes = plt.subplots(1, len(configs), figsize=(5.5 * len(configs), 4.2), sharey=True, squeeze=False)
    palette = sns.color_palette(n_colors=len(counts))
    width = 0.8 / len(counts)
    for ax, config in zip(axes[0], configs, strict=True):
        for i, threads in enumerate(counts):
            mine = factors[(factors[col.CONFIG_NAME] == config) & (factors[col.THREADS] == threads)].set_index("step")
            mine = mine.reindex(steps)
            x = [s + (i - (len(counts) - 1) / 2) * width for s in range(len(steps))]
            ax.bar(x, mine["center"], width, yerr=error_bars(mine), capsize=3, color=palette[i],
                   label=f"{threads} thread{'s' if threads > 1 else ''}")  # fmt: skip
            mark_single(ax, x, mine)
        ax.axhline(1.0, color="black", linewidth=0.8)
        if claim is not None:
            ax.axhline(claim[0], color="black", linestyle="--", linewidth=1, label=claim[1])
        ax.set_yscale("log")
        ax.set_xticks(range(len(steps)), [textwrap.fill(step, 11) for step in steps], fontsize=8)
        ax.set_title(config)
    axes[0][0].set_ylabel("samples/s over the 2020 reference step\non torch 1.5.1 (paired within repeats)")
    spans = [factors["low"], factors["high"], factors["center"]] + ([pd.Series([claim[0]])] if claim else [])
    log_ticks(axes[0][0].yaxis, pd.concat(spans).dropna())
    axes[0][-1].legend(frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(title, y=1.02)
    fig.subplots_adjust(bottom=0.25)  # the wrapped step names stay above the caption
    old = records[records[col.VARIANT] == "reference-2020"]  # the 2020 stack's own provenance
    today = records[records[col.VARIANT] != "reference-2020"]
    # the 2020 stack's provenance is one more clause of the one wrapped caption (a second text under it, placed by
    # counting the caption's lines, landed on the caption's last line once the caption wrapped)
    first = old.iloc[0] if not old.empty and not today.empty else None
    stack = f"2020 step: torch {first['torch_version']}, Python {first['python_version']}" if first is not None else ""
    add_caption(fig, today if not today.empty else records, extra=stack)
    return fig
