"""The figure style and helpers the notebooks share. Plots only read records.

Measured points are medians of repeats with their 95% intervals as error bars, speedups
paired ratios within repeats (`measure.stats`); each repeat is drawn as a small dot beside
them, hollow where its record is flagged (flagged repeats stay out of the medians). A point
of one repeat has no interval: it is drawn without error bar and marked with a diamond. The
caption is written from what was drawn: it speaks of intervals only where error bars are.
"""

import sys
import textwrap
from pathlib import Path

import matplotlib

if "ipykernel" not in sys.modules:
    matplotlib.use("Agg")  # files, not windows; in a notebook the inline backend shows each figure

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.container import ErrorbarContainer
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, MaxNLocator, NullFormatter, NullLocator

from dlrm_study.measure import stats
from dlrm_study.records import columns as col
from dlrm_study.records.variants import ORDER as VARIANT_ORDER


def ordered(variants) -> list[str]:
    """The study's variants in VARIANT_ORDER, then any others in their own order."""
    present = list(dict.fromkeys(variants))
    return [v for v in VARIANT_ORDER if v in present] + [v for v in present if v not in VARIANT_ORDER]


def style() -> None:
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")


def caption(records: pd.DataFrame) -> str:
    """Where and when the records were measured, for the figure's caption (one line per machine)."""
    if col.MACHINE in records and records[col.MACHINE].nunique() > 1:
        return "\n".join(caption(group) for _, group in records.groupby(col.MACHINE, sort=True))
    first = records.iloc[0]
    when = str(records[col.TIMESTAMP].max())[:10]
    machine = first[col.MACHINE] if col.MACHINE in records else first[col.DEVICE_NAME]
    repeats = f", {records[col.REPEAT].nunique()} repeats" if col.REPEAT in records else ""
    return (
        f"{machine} ({first[col.DEVICE_NAME]}), torch {first['torch_version']}, {when}, "
        f"dlrm-study {str(first[col.GIT_COMMIT])[:7]}{repeats}"
    )


def drawn_notes(fig: plt.Figure) -> str:
    """What the figure's marks mean, from the marks actually drawn: error bars, one-repeat diamonds."""
    notes = []
    if has_error_bars(fig):
        notes.append("error bars: 95% intervals")
    if any(ONE_REPEAT in ax.get_legend_handles_labels()[1] for ax in fig.axes):
        notes.append(f"diamonds: {ONE_REPEAT}")
    return "; ".join(notes)


def has_error_bars(fig: plt.Figure) -> bool:
    """Whether any axes carries an error bar of non-zero length."""
    for ax in fig.axes:
        for container in ax.containers:
            if not isinstance(container, ErrorbarContainer):
                continue
            for lines in container.lines[2]:
                for segment in lines.get_segments():
                    if len(segment) and np.isfinite(segment).all() and np.ptp(segment, axis=0).max() > 0:
                        return True
    return False


def add_caption(fig: plt.Figure, records: pd.DataFrame) -> None:
    """The hardware and date under the figure, clear of the axis label, and what its marks mean.

    Call it last: the notes are read from the artists already drawn."""
    notes = drawn_notes(fig)
    fig.text(0.0, -0.06, caption(records) + (f"; {notes}" if notes else ""), fontsize=8, ha="left", va="top")


ONE_REPEAT = "one repeat, no interval"


def error_bars(summary: pd.DataFrame) -> list[list[float]]:
    """Matplotlib's yerr from a `stats.summarize` table: distances below and above the center.

    NaN where a point has no interval (one repeat): matplotlib draws no bar and no cap there."""
    low = (summary["center"] - summary["low"]).clip(lower=0)
    high = (summary["high"] - summary["center"]).clip(lower=0)
    return [list(low), list(high)]


def mark_single(ax: plt.Axes, x, summary: pd.DataFrame, color="black", horizontal: bool = False) -> None:
    """A hollow diamond on each point that rests on one repeat (a center without an interval)."""
    alone = (summary["center"].notna() & summary["low"].isna()).to_numpy()
    if not alone.any():
        return
    xs, ys = np.asarray(list(x), dtype=float)[alone], summary["center"].to_numpy(dtype=float)[alone]
    if horizontal:
        xs, ys = ys, xs
    label = None if ONE_REPEAT in ax.get_legend_handles_labels()[1] else ONE_REPEAT
    ax.scatter(xs, ys, marker="D", s=30, facecolors="white", edgecolors=color, zorder=4, label=label)


def clip_axis(ax: plt.Axes, centers: pd.Series, highs: pd.Series, floor: float = 0.0) -> None:
    """Keep one huge interval from stretching the axis: the top at 1.6x the largest centre (or the
    largest interval, whichever is lower); intervals cut there are marked with their end's value."""
    centers = pd.to_numeric(centers, errors="coerce").dropna()
    highs = pd.to_numeric(highs, errors="coerce").dropna()
    top_center = max(float(centers.max()), 1.0) if len(centers) else 1.0
    top = min(1.6 * top_center, 1.05 * float(highs.max())) if len(highs) else 1.6 * top_center
    top = max(top, 1.15 * top_center)
    ax.set_ylim(floor, top)
    for container in ax.containers:
        if not isinstance(container, ErrorbarContainer):
            continue
        for lines in container.lines[2]:
            for segment in lines.get_segments():
                if len(segment) != 2 or not np.isfinite(segment).all():
                    continue
                (x0, y0), (_, y1) = segment
                if max(y0, y1) > top:  # an arrow at the axis' top, and where the interval ends
                    ax.plot([x0], [top], marker="^", markersize=6, color="black", clip_on=False, zorder=5)
                    ax.annotate(f"to {max(y0, y1):.1f}", (x0, top), xytext=(5, -3), textcoords="offset points",
                                ha="left", va="top", fontsize=7)  # fmt: skip


def repeats(ax: plt.Axes, x, y, flagged, color) -> None:
    """Each repeat as a small dot: filled when its record is clean, hollow when flagged."""
    x, y, flagged = list(x), list(y), list(flagged)
    clean = [i for i, f in enumerate(flagged) if not f]
    bad = [i for i, f in enumerate(flagged) if f]
    ax.scatter([x[i] for i in clean], [y[i] for i in clean], s=9, color=color, alpha=0.45, linewidths=0, zorder=3)
    ax.scatter([x[i] for i in bad], [y[i] for i in bad], s=16, facecolors="none", edgecolors=color, zorder=3)


def save(fig: plt.Figure, name: str, folder: Path | None) -> None:
    """The figure as PNG and SVG in `folder` (`studies.figures_dir`); None: shown inline only."""
    if folder is None:
        return
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for suffix in ("png", "svg"):
        fig.savefig(folder / f"{name}.{suffix}", bbox_inches="tight", dpi=150)


def breakdown(records: pd.DataFrame, title: str, share_line: tuple[float, str] | None = None) -> plt.Figure:
    """Per config (and variant): time per sample of each operator, and each operator's share.

    Per sample, so a batch of 128 sits beside batches of 2,048; the medians of the repeats
    whose breakdown is not flagged (a config with none is drawn from its flagged ones, hollow
    and labelled so). The black bar on each row is the timed median per sample with its 95%
    interval: the profiled operators add up to about it where the breakdown is sound.
    """
    ops = [column for column in col.OP_COLUMNS if column in records]
    rows = stats.with_flags(records.dropna(subset=ops))
    rows["doubtful"] = stats.flagged(rows, "breakdown")
    rows["label"] = rows[col.CONFIG_NAME] + (" / " + rows[col.VARIANT] if rows[col.VARIANT].nunique() > 1 else "")
    bars = []
    for label, group in rows.groupby("label", sort=False):
        clean = group[~group["doubtful"]]
        hollow = clean.empty
        per_sample = (group if hollow else clean)[ops].div(group[col.BATCH_SIZE].iloc[0] / 1e3)  # us per sample
        timed = stats.interval(group[col.MS_MEDIAN] / group[col.BATCH_SIZE].iloc[0] * 1e3)
        bars.append((label + (" (flagged)" if hollow else ""), per_sample.median(), hollow, timed))
    fig, (ax, share_ax) = plt.subplots(1, 2, figsize=(13, 0.5 * len(bars) + 2.2), sharey=True,
                                       gridspec_kw={"width_ratios": [3, 2]})  # fmt: skip
    colors = sns.color_palette(n_colors=len(ops))
    for y, (_, times, hollow, timed) in enumerate(bars):
        left = share_left = 0.0
        for op, color in zip(ops, colors, strict=True):
            style = {"facecolor": "none", "edgecolor": color, "hatch": "//"} if hollow else {"color": color}
            ax.barh(y, times[op], left=left, height=0.7, **style, label=op if y == 0 else None)
            share = times[op] / times.sum()
            share_ax.barh(y, share, left=share_left, height=0.7, **style)
            left, share_left = left + times[op], share_left + share
        if timed[0] == timed[0]:
            summary = pd.DataFrame([timed], columns=["center", "low", "high"])
            ax.errorbar(timed[0], y, xerr=error_bars(summary), fmt="|", color="black", markersize=14, capsize=3)
            mark_single(ax, [y], summary, horizontal=True)
    ax.set_yticks(range(len(bars)), [label for label, _, _, _ in bars])
    ax.invert_yaxis()
    ax.set_xlabel("time per sample (µs), median of repeats; black: timed median, 95% interval")
    share_ax.set_xlabel("share of the profiled iteration")
    share_ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0%}"))
    share_ax.set_xlim(0, 1)
    if share_line is not None:  # a claim's share (S2: embeddings dominate), against each row's embedding share
        embedding = [op for op in ops if col.op_label(op).startswith("embedding ")]
        shares = [times[embedding].sum() / times.sum() for _, times, _, _ in bars]
        share_ax.scatter(shares, range(len(bars)), marker="|", s=500, linewidths=2.5, color="black", zorder=4,
                         label="share of embedding forward + backward/update")  # fmt: skip
        share_ax.axvline(share_line[0], color="black", linestyle="--", linewidth=1, label=share_line[1])
    handles, names = ax.get_legend_handles_labels()
    more, their_names = share_ax.get_legend_handles_labels()
    names = [col.op_label(n) for n in names]
    share_ax.legend(handles + more, names + their_names, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.suptitle(title)
    add_caption(fig, records)
    return fig


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
        gain_ax.legend(frameon=False, fontsize=8, loc="lower right")
    gain_ax.set_yticks(y, steps["label"])
    gain_ax.invert_yaxis()
    fig.suptitle(title)
    add_caption(fig, records)
    return fig


def log_ticks(axis, values: pd.Series) -> None:
    """Readable labels on a log axis: round numbers spread over the data, or 1-2-5 over decades."""
    values = values[values > 0].dropna()
    low, high = (float(values.min()), float(values.max())) if len(values) else (1.0, 10.0)
    if high / low < 10:  # within a decade a log axis has too few powers to label: plain round steps
        axis.set_major_locator(FixedLocator([t for t in MaxNLocator(nbins=6).tick_values(low, high) if t > 0]))
    else:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda value, _: plain(value)))
    axis.set_minor_formatter(NullFormatter())


def plain(value: float) -> str:
    """12,800 or 1.25: thousands with separators, small values with three significant digits."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def speedup(records: pd.DataFrame, baseline: str, title: str, bands: pd.DataFrame | None = None) -> plt.Figure:
    """Bars: each variant's samples/s over the baseline's, paired within repeats, per config, with intervals.

    `bands` (variant, config_name, low, high): predicted ranges, drawn as shaded boxes behind the bars.
    """
    clean = stats.with_flags(records)  # every repeat counts
    configs = list(dict.fromkeys(records[col.CONFIG_NAME]))
    variants = [v for v in ordered(records[col.VARIANT]) if v != baseline]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(configs) * max(1, len(variants)) / 2), 4))
    width = 0.8 / max(1, len(variants))
    palette = sns.color_palette(n_colors=max(1, len(variants)))
    drawn = []
    for i, variant in enumerate(variants):
        ratio = stats.paired_ratios(clean, [col.CONFIG_NAME], variant, baseline).set_index(col.CONFIG_NAME)
        ratio = ratio.reindex(configs)
        x = [c + (i - (len(variants) - 1) / 2) * width for c in range(len(configs))]
        ax.bar(x, ratio["center"], width, yerr=error_bars(ratio), capsize=3, color=palette[i], label=variant)
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
    ax.axhline(1.0, color="black", linewidth=0.8)
    if drawn:
        every = pd.concat(drawn)
        tops = [every["center"]] + ([] if bands is None or bands.empty else [bands["high"]])
        clip_axis(ax, pd.concat(tops), every["high"])
    ax.set_xticks(range(len(configs)), configs)
    ax.set_ylabel(f"samples/s relative to {baseline}\n(paired within repeats)")
    ax.set_title(title)
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    add_caption(fig, records)
    return fig


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
    add_caption(fig, today if not today.empty else records)
    if not today.empty and not old.empty:
        first = old.iloc[0]
        below = -0.06 - 0.045 * (caption(today).count("\n") + 1)  # under the caption's lines
        fig.text(0.0, below, f"2020 step: torch {first['torch_version']}, Python {first['python_version']}",
                 fontsize=8, ha="left", va="top")  # fmt: skip
    return fig


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
           ylabel="measured / middle of the predicted range\n(bar: the predicted range; 1: its middle)",
           title=title)  # fmt: skip
    ax.set_xticks(centers, claims)
    ax.grid(False, axis="x")
    log_ticks(ax.yaxis, pd.concat([low, high, measured]))
    ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    first = done.iloc[0]
    fig.text(0.0, -0.06, f"predicted for {first['predicted_for']} at dlrm-study {str(first[col.GIT_COMMIT])[:7]}; "
             "measured on that GPU (results/gpu_sweeps.csv)", fontsize=8, ha="left", va="top")  # fmt: skip
    return fig


def drawn_band(ax: plt.Axes) -> bool:
    """Whether the axes already carry the predictions' legend entry."""
    return PREDICTED in ax.get_legend_handles_labels()[1]


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


PREDICTED = "predicted (model), not measured"


def predicted_band(ax: plt.Axes, band: pd.DataFrame, color, label: str) -> None:
    """A pre-registered prediction's range as a shaded band (x, low, high), behind the measurements."""
    band = band.sort_values("x")
    ax.fill_between(band["x"], band["low"], band["high"], color=color, alpha=0.15, linewidth=0, label=label)
    ax.plot(band["x"], band["low"], color=color, linewidth=0.6, linestyle=":", alpha=0.7)
    ax.plot(band["x"], band["high"], color=color, linewidth=0.6, linestyle=":", alpha=0.7)


def sensitivity(records: pd.DataFrame, title: str, bands: pd.DataFrame | None = None) -> plt.Figure:
    """samples/s against one knob (`x`, labelled by `knob`), one line per variant, log-log.

    A line per variant and machine: the medians of all repeats with their 95% intervals (flags
    are diagnostics, not a filter), and every repeat as a dot (hollow when flagged). `bands`
    (variant, x, low, high): predicted ranges, drawn shaded in the variant's colour and labelled
    as predictions.
    """
    frame = stats.with_flags(records)
    frame["doubtful"] = stats.flagged(frame)
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
        summary = stats.summarize(mine, ["x"])
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
    label = "samples/s ratio (medians of repeats)"
    sns.heatmap(ratio, annot=True, fmt=".1f", cmap="vlag", center=1.0, cbar_kws={"label": label}, ax=ax)
    ax.invert_yaxis()
    ax.set_title(title)
    add_caption(fig, records)
    return fig


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


def scaling_breakdown(records: pd.DataFrame, title: str) -> plt.Figure:
    """Per measured point: compute alone and the rest of the step, ms per step (medians of all repeats).

    At 2 ranks the rest is communication the overlap did not hide; at 1 rank there is no peer,
    and the rest is the cost of the collective calls themselves (DDP's gradient buckets, a
    local all-to-all), drawn apart so it does not read as communication.
    """
    clean = stats.with_flags(records)  # every repeat counts
    keys = [col.WORLD_SIZE, col.BATCH_SIZE, "data.lookups_per_table"]
    rows = clean.groupby(keys)[[col.COMPUTE_MS_MEDIAN, "exposed_comm_ms"]].median().reset_index().sort_values(keys)
    steps = stats.summarize(clean, keys, col.MS_MEDIAN).sort_values(keys)
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
