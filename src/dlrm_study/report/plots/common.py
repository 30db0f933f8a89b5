"""The figure style and the helpers every figure shares. Plots only read records.

Measured points are medians of repeats with their 95% intervals as error bars, speedups
paired ratios within repeats (`analysis.stats`); each repeat is drawn as a small dot beside
them, hollow where its record is flagged. A point of one repeat has no interval: it is drawn
without error bar and marked with a diamond. A point of two runs (or of one run of two repeats) has an
interval on one degree of freedom (its t quantile is 12.7): a bar that spans the axis and says nothing, so it
is drawn without one and marked with a square; so is a point whose "runs" are the studies of records from before
run ids (one pseudo-run per study: an interval over studies, not runs). The caption is written from what was
drawn: it speaks of intervals only where error bars are.
"""

import math
import re
import sys
import textwrap
from pathlib import Path

import matplotlib

from dlrm_study.report import manifest

if "ipykernel" not in sys.modules:
    matplotlib.use("Agg")  # files, not windows; in a notebook the inline backend shows each figure

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.container import ErrorbarContainer
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator

from dlrm_study.analysis.wording import count
from dlrm_study.config.variants import ORDER as VARIANT_ORDER
from dlrm_study.records import columns as col


def ordered(variants) -> list[str]:
    """The study's variants in VARIANT_ORDER, then any others in their own order."""
    present = list(dict.fromkeys(variants))
    return [v for v in VARIANT_ORDER if v in present] + [v for v in present if v not in VARIANT_ORDER]


def style() -> None:
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")


def caption(records: pd.DataFrame, unit: str = "repeat") -> str:
    """Where and when the records were measured, for the figure's caption (one line per machine); `unit` names
    what a record's `repeat` counts (a trained model's is its seed)."""
    if col.MACHINE in records and records[col.MACHINE].nunique() > 1:
        return "\n".join(caption(group, unit) for _, group in records.groupby(col.MACHINE, sort=True))
    first = records.iloc[0]
    when = str(records[col.TIMESTAMP].max())[:10]
    machine = first[col.MACHINE] if col.MACHINE in records else first[col.DEVICE_NAME]
    repeats = f", {count(records[col.REPEAT].nunique(), unit)}" if col.REPEAT in records else ""
    if repeats and col.RUN_ID in records and records[col.RUN_ID].nunique() > 1:
        repeats = f", {runs_said(records)} x {count(records[col.REPEAT].nunique(), unit)}"  # counted within a run
    return (
        f"{machine} ({first[col.DEVICE_NAME]}), torch {first['torch_version']}, {when}{repeats}, "
        f"records measured at {commits(records)}"
    )


def runs_said(records: pd.DataFrame) -> str:
    """How many runs each point drawn (config and variant) had: "7 runs", or "1 to 32 runs a point" where the
    points differ (the claims' deciding points get more runs than the rest, `plans.profiles.CLAIM_RUNS`)."""
    keys = [k for k in (col.CONFIG_NAME, col.VARIANT) if k in records]
    per = records.groupby(keys, dropna=False)[col.RUN_ID].nunique() if keys else pd.Series([0])
    low, high = (int(per.min()), int(per.max())) if keys else (records[col.RUN_ID].nunique(),) * 2
    return f"{high} runs" if low == high else f"{low} to {high} runs a point"


def commits(records: pd.DataFrame) -> str:
    """The commits the records were measured at: listed up to three, else how many and the first and last."""
    found = list(dict.fromkeys(str(c)[:7] for c in records.sort_values(col.TIMESTAMP)[col.GIT_COMMIT].dropna()))
    if len(found) > 3:
        return f"{len(found)} commits, {found[0]} to {found[-1]}"
    return ", ".join(found) or "an unrecorded commit"


def wrapped(text: str, inches: float, fontsize: float) -> str:
    """`text` wrapped to fit `inches` of width at `fontsize` points (each line apart), so a long caption or
    title never widens the canvas past its axes."""
    chars = max(20, int(inches * 72 / (fontsize * 0.55)))
    return "\n".join(textwrap.fill(line, chars) for line in text.split("\n"))


def drawn_notes(fig: plt.Figure) -> str:
    """What the figure's marks mean, from the marks actually drawn: error bars, one-repeat diamonds, squares where
    no interval is drawn."""
    notes = []
    if has_error_bars(fig):
        notes.append("error bars: 95% intervals")
    if any(ONE_REPEAT in ax.get_legend_handles_labels()[1] for ax in fig.axes):
        notes.append(f"diamonds: {ONE_REPEAT}")
    if any(TWO_RUN_MARK in ax.get_legend_handles_labels()[1] for ax in fig.axes):
        notes.append(f"squares: {TWO_RUN_MARK}")
    dots = {c.get_gid() for ax in fig.axes for c in ax.collections if len(c.get_offsets())}
    if dots & {REPEAT_DOTS, FLAGGED_DOTS}:
        notes.append("small dots: single repeats" + (" (hollow: flagged)" if FLAGGED_DOTS in dots else ""))
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


def add_caption(fig: plt.Figure, records: pd.DataFrame, unit: str = "repeat", extra: str = "") -> None:
    """The hardware and date under the figure, clear of the axis label, and what its marks mean (`unit`: what
    a record's repeat counts, `caption`); `extra`: what else the caption must say (which points came from which
    commit).

    Call it last: the notes are read from the artists already drawn."""
    notes = "; ".join(filter(None, [drawn_notes(fig), extra]))
    said = caption(records, unit) + (f"; {notes}" if notes else "")
    setattr(fig, CAPTION, said)  # `save` writes it into the PNG's metadata, where a test reads it
    fig.text(0.0, caption_y(fig), wrapped(said, fig.get_figwidth(), 8), fontsize=8, ha="left", va="top")


CAPTION_NAMES = {  # what every caption names, as `caption` writes it
    "its machine": re.compile(r"\b[a-z]+(?:-[a-z0-9]+)+/[a-z0-9_+]+/\d+cpu\b"),
    "its code": re.compile(r"records measured at (?:\d+ commits, )?[0-9a-f]{7}\b"),
    "its repeats": re.compile(r"\b(?:\d+|one) (?:runs? x \d+ )?(?:repeats?|seeds?|runs?)\b|\d+ to \d+ runs a point"),
}


def caption_gaps(said: str) -> list[str]:
    """What a figure's caption fails to name of `CAPTION_NAMES` (empty: it names them all)."""
    return [what for what, pattern in CAPTION_NAMES.items() if not pattern.search(said)]


def caption_y(fig: plt.Figure) -> float:
    """Where the caption's top goes, in figure coordinates: 0.06 below the figure, or lower where an axis's
    labels (a label wrapped onto two lines) reach further down."""
    renderer = fig.canvas.get_renderer()
    lowest = min((ax.get_tightbbox(renderer).y0 for ax in fig.axes), default=0.0) / fig.bbox.height
    return min(-0.06, lowest - 0.02)


CAPTION = "Caption"  # the caption's key in a saved PNG's metadata (and its attribute on the figure)
ONE_REPEAT = "one repeat, no interval"
REPEAT_DOTS, FLAGGED_DOTS = "repeat", "repeat-flagged"  # the gids of `repeats`' dots, read by `drawn_notes`


def error_bars(summary: pd.DataFrame) -> list[list[float]]:
    """Matplotlib's yerr from a `stats.summarize` table: distances below and above the center.

    NaN where a point has no interval (one repeat) or one not drawn (`no_interval_drawn`): matplotlib draws no bar
    and no cap there."""
    undrawn = no_interval_drawn(summary)
    low = (summary["center"] - summary["low"]).clip(lower=0).mask(undrawn)
    high = (summary["high"] - summary["center"]).clip(lower=0).mask(undrawn)
    return [list(low), list(high)]


TWO = 2  # run means (or one run's repeats) an interval on one degree of freedom rests on: not drawn
TWO_RUN_MARK = "no interval drawn: 1 degree of freedom (2 runs or 2 repeats) or studies pooled"


def no_interval_drawn(summary: pd.DataFrame) -> pd.Series:
    """Which points' intervals rest on one degree of freedom (TWO run means, or one run's TWO repeats), or on
    studies pooled as runs (a table without `runs`: none)."""
    runs = summary["runs"] if "runs" in summary else pd.Series(0, index=summary.index)
    studies = summary["studies"].fillna(False).astype(bool) if "studies" in summary else False
    repeats = summary["n"] if "n" in summary else pd.Series(0, index=summary.index)
    one_df = (runs == TWO) | ((runs == 1) & (repeats == TWO))
    return (one_df | studies) & summary["low"].notna()


def mark_single(ax: plt.Axes, x, summary: pd.DataFrame, color="black", horizontal: bool = False) -> None:
    """A hollow diamond on each point that rests on one repeat (a center without an interval), a hollow square on
    each whose interval is not drawn (`no_interval_drawn`)."""
    alone = (summary["center"].notna() & summary["low"].isna()).to_numpy()
    for which, marker, said in ((alone, "D", ONE_REPEAT), (no_interval_drawn(summary).to_numpy(), "s", TWO_RUN_MARK)):
        if not which.any():
            continue
        xs, ys = np.asarray(list(x), dtype=float)[which], summary["center"].to_numpy(dtype=float)[which]
        if horizontal:
            xs, ys = ys, xs
        label = None if said in ax.get_legend_handles_labels()[1] else said
        ax.scatter(xs, ys, marker=marker, s=30, facecolors="white", edgecolors=color, zorder=4, label=label)


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
    ax.scatter([x[i] for i in clean], [y[i] for i in clean], s=9, color=color, alpha=0.45, linewidths=0, zorder=3,
               gid=REPEAT_DOTS)  # fmt: skip
    ax.scatter([x[i] for i in bad], [y[i] for i in bad], s=16, facecolors="none", edgecolors=color, zorder=3,
               gid=FLAGGED_DOTS)  # fmt: skip


def save(fig: plt.Figure, name: str, folder: Path | None) -> None:
    """The figure as PNG and SVG in `folder` (`session.figures_dir`: `<results>/figures`, or a machine's folder
    under it); None: shown inline only. Each file's metadata names the commit, records and rules it came from."""
    if folder is None:
        return
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    results = folder.parent if folder.name == "figures" else folder.parent.parent
    said = "dlrm-study; " + ", ".join(f"{k} {v}" for k, v in manifest.stamp(results).items())
    for suffix in ("png", "svg"):
        # SVG's Date would differ on every render; the stamp says what the figure is from instead. SVG takes only
        # its standard keys: the caption goes into the PNG.
        extra = {"Date": None} if suffix == "svg" else {CAPTION: getattr(fig, CAPTION, "")}
        fig.savefig(folder / f"{name}.{suffix}", bbox_inches="tight", dpi=150, metadata={"Description": said, **extra})


def log_ticks(axis, values: pd.Series) -> None:
    """Readable labels on a log axis: round numbers spread over the data, or 1-2-5 over decades."""
    values = values[values > 0].dropna()
    low, high = (float(values.min()), float(values.max())) if len(values) else (1.0, 10.0)
    if high / low < 10:  # within a decade a log axis has too few powers to label: round values, evenly spread
        axis.set_major_locator(FixedLocator(spread_ticks(low, high)))
    else:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda value, _: plain(value)))
    axis.set_minor_formatter(NullFormatter())


def spread_ticks(low: float, high: float, most: int = 6) -> list[float]:
    """Round values (1, 1.5, 2, 3, 4, 5, 6, 8 times a power of ten) from `low` to `high`, each at least
    (high / low) ** (1 / most) above the last, so that labels on a log axis never crowd its top."""
    step = max(1.2, (high / low) ** (1 / most))
    rounds = sorted(m * 10.0**e for e in range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
                    for m in (1, 1.5, 2, 3, 4, 5, 6, 8))  # fmt: skip
    inside = [v for v in rounds if low / 1.1 <= v <= high * 1.1]
    ticks = [v for v in inside if math.log10(v).is_integer()]  # powers of ten first (1: no change, on ratio axes)
    for value in inside:
        if all(max(value, t) / min(value, t) >= step for t in ticks):
            ticks.append(value)
    return sorted(ticks)


def plain(value: float) -> str:
    """12,800 or 1.25: thousands with separators, small values with three significant digits."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def drawn_band(ax: plt.Axes) -> bool:
    """Whether the axes already carry the predictions' legend entry."""
    return PREDICTED in ax.get_legend_handles_labels()[1]


PREDICTED = "predicted (model), not measured"


def predicted_band(ax: plt.Axes, band: pd.DataFrame, color, label: str) -> None:
    """A pre-registered prediction's range as a shaded band (x, low, high), behind the measurements."""
    band = band.sort_values("x")
    if band["x"].nunique() == 1:  # one point: a box around it, as wide as a marker on the log axis
        x = float(band["x"].iloc[0])
        band = pd.concat([band.iloc[:1].assign(x=x / 1.08), band.iloc[:1].assign(x=x * 1.08)])
    ax.fill_between(band["x"], band["low"], band["high"], color=color, alpha=0.15, linewidth=0, label=label)
    ax.plot(band["x"], band["low"], color=color, linewidth=0.6, linestyle=":", alpha=0.7)
    ax.plot(band["x"], band["high"], color=color, linewidth=0.6, linestyle=":", alpha=0.7)
