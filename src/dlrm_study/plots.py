"""The figure style and helpers the notebooks share. Plots only read records.

Measured points are medians of repeats with their 95% intervals as error bars, speedups
paired ratios within repeats (`measure.stats`); each repeat is drawn as a small dot beside
them, hollow where its record is flagged (flagged repeats stay out of the medians).
"""

import sys
from pathlib import Path

import matplotlib

if "ipykernel" not in sys.modules:
    matplotlib.use("Agg")  # files, not windows; in a notebook the inline backend shows each figure

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from dlrm_study.measure import stats
from dlrm_study.measure.bench import OPERATORS

VARIANT_ORDER = [
    "reference",
    "torchrec",
    "optimized-fp32",
    "optimized-bf16",
    "gpu-hbm-fp32",
    "gpu-hbm",
    "gpu-cached",
    "gpu-cached-lfu",
    "gpu-uvm",
    "gpu-host",
]


def ordered(variants) -> list[str]:
    """The study's variants in VARIANT_ORDER, then any others in their own order."""
    present = list(dict.fromkeys(variants))
    return [v for v in VARIANT_ORDER if v in present] + [v for v in present if v not in VARIANT_ORDER]


def style() -> None:
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")


def caption(records: pd.DataFrame) -> str:
    """Where and when the records were measured, for the figure's caption (one line per machine)."""
    if "machine" in records and records["machine"].nunique() > 1:
        return "\n".join(caption(group) for _, group in records.groupby("machine", sort=True))
    first = records.iloc[0]
    when = str(records["timestamp"].max())[:10]
    machine = first["machine"] if "machine" in records else first["device_name"]
    repeats = f", {records['repeat'].nunique()} repeats" if "repeat" in records else ""
    return (
        f"{machine} ({first['device_name']}), torch {first['torch_version']}, {when}, "
        f"dlrm-study {str(first['git_commit'])[:7]}{repeats}; bars: 95% intervals"
    )


def add_caption(fig: plt.Figure, records: pd.DataFrame) -> None:
    """The hardware and date under the figure, clear of the axis label."""
    fig.text(0.0, -0.06, caption(records), fontsize=8, ha="left", va="top")


def error_bars(summary: pd.DataFrame) -> list[list[float]]:
    """Matplotlib's yerr from a `stats.summarize` table: distances below and above the center."""
    low = (summary["center"] - summary["low"]).fillna(0).clip(lower=0)
    high = (summary["high"] - summary["center"]).fillna(0).clip(lower=0)
    return [list(low), list(high)]


def repeats(ax: plt.Axes, x, y, flagged, color) -> None:
    """Each repeat as a small dot: filled when its record is clean, hollow when flagged."""
    x, y, flagged = list(x), list(y), list(flagged)
    clean = [i for i, f in enumerate(flagged) if not f]
    bad = [i for i, f in enumerate(flagged) if f]
    ax.scatter([x[i] for i in clean], [y[i] for i in clean], s=9, color=color, alpha=0.45, linewidths=0, zorder=3)
    ax.scatter([x[i] for i in bad], [y[i] for i in bad], s=16, facecolors="none", edgecolors=color, zorder=3)


def save(fig: plt.Figure, name: str, results_dir: Path) -> list[Path]:
    """The figure as PNG and SVG under results_dir/figures/."""
    out = Path(results_dir) / "figures"
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png", out / f"{name}.svg"]
    for path in paths:
        fig.savefig(path, bbox_inches="tight", dpi=150)
    return paths


def breakdown(records: pd.DataFrame, title: str) -> plt.Figure:
    """Stacked bars: ms per iteration of each operator (median over repeats), one bar per config.

    From the repeats whose breakdown is not flagged; a config with none is drawn from its
    flagged ones, hollow and labelled so.
    """
    ops = [f"op_{name}_ms" for name in OPERATORS if f"op_{name}_ms" in records]
    rows = stats.with_flags(records.dropna(subset=ops))
    rows["doubtful"] = stats.flagged(rows, "breakdown")
    rows["label"] = rows["config_name"] + (" / " + rows["variant"] if rows["variant"].nunique() > 1 else "")
    bars = []
    for label, group in rows.groupby("label", sort=False):
        clean = group[~group["doubtful"]]
        hollow = clean.empty
        bars.append((label + (" (flagged)" if hollow else ""), (group if hollow else clean)[ops].median(), hollow))
    fig, ax = plt.subplots(figsize=(9, 0.6 * len(bars) + 2))
    colors = sns.color_palette(n_colors=len(ops))
    for y, (_, times, hollow) in enumerate(bars):
        left = 0.0
        for op, color in zip(ops, colors, strict=True):
            style = {"facecolor": "none", "edgecolor": color, "hatch": "//"} if hollow else {"color": color}
            ax.barh(y, times[op], left=left, height=0.7, **style, label=op if y == 0 else None)
            left += times[op]
    ax.set_yticks(range(len(bars)), [label for label, _, _ in bars])
    ax.invert_yaxis()
    ax.set_xlabel("time per training iteration (ms, median of repeats)")
    handles, names = ax.get_legend_handles_labels()
    names = [n.removeprefix("op_").removesuffix("_ms").replace("_", " ") for n in names]
    ax.legend(handles, names, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    ax.set_title(title)
    add_caption(fig, records)
    return fig


def speedup(records: pd.DataFrame, baseline: str, title: str) -> plt.Figure:
    """Bars: each variant's samples/s over the baseline's, paired within repeats, per config, with intervals."""
    clean, _ = stats.usable(records)
    configs = list(dict.fromkeys(records["config_name"]))
    variants = [v for v in ordered(records["variant"]) if v != baseline]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(configs) * max(1, len(variants)) / 2), 4))
    width = 0.8 / max(1, len(variants))
    palette = sns.color_palette(n_colors=max(1, len(variants)))
    for i, variant in enumerate(variants):
        ratio = stats.paired_ratios(clean, ["config_name"], variant, baseline).set_index("config_name")
        ratio = ratio.reindex(configs)
        x = [c + (i - (len(variants) - 1) / 2) * width for c in range(len(configs))]
        ax.bar(x, ratio["center"], width, yerr=error_bars(ratio), capsize=3, color=palette[i], label=variant)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(configs)), configs)
    ax.set_ylabel(f"samples/s relative to {baseline}\n(paired within repeats)")
    ax.set_title(title)
    ax.legend(frameon=False)
    add_caption(fig, records)
    return fig


def convergence(records: pd.DataFrame, title: str) -> plt.Figure:
    """Training loss (windowed mean) against step, one line per variant; AUC in the legend."""
    losses = records[records["kind"] == "loss"]
    evals = records[records["kind"] == "eval"].set_index("variant")["eval_auc"]
    order = ordered(losses["variant"])
    labels = {v: f"{v} (AUC {evals[v]:.4f})" for v in order if v in evals}
    fig, ax = plt.subplots(figsize=(8, 4))
    for variant in order:
        rows = losses[losses["variant"] == variant]
        ax.plot(rows["step"], rows["loss"], label=labels.get(variant, variant), linewidth=1.2)
    ax.set_xlabel("training step")
    ax.set_ylabel("training loss (BCE, window mean)")
    ax.set_title(title)
    ax.legend(frameon=False)
    add_caption(fig, records[records["kind"] == "eval"])
    return fig


def sensitivity(records: pd.DataFrame, title: str) -> plt.Figure:
    """samples/s against one knob (`x`, labelled by `knob`), one line per variant, log-log.

    A line per variant and machine: the medians of unflagged repeats with their 95% intervals,
    and every repeat as a dot (hollow when flagged).
    """
    frame = stats.with_flags(records)
    frame["doubtful"] = stats.flagged(frame)
    clean = frame[~frame["doubtful"]]
    series = [
        (v, m) for v in ordered(frame["variant"]) for m in sorted(frame[frame["variant"] == v]["machine"].unique())
    ]
    several = len({m for _, m in series}) > 1
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for (variant, machine), color in zip(series, sns.color_palette(n_colors=len(series)), strict=True):
        mine = frame[(frame["variant"] == variant) & (frame["machine"] == machine)]
        summary = stats.summarize(clean[(clean["variant"] == variant) & (clean["machine"] == machine)], ["x"])
        label = f"{variant} ({machine})" if several else variant
        ax.errorbar(summary["x"], summary["center"], yerr=error_bars(summary), marker="o", capsize=3, color=color,
                    label=label)  # fmt: skip
        repeats(ax, mine["x"], mine["samples_per_s"], mine["doubtful"], color)
    ax.set(xscale="log", yscale="log", xlabel=frame["knob"].iloc[0], ylabel="training samples/s", title=title)
    ax.set_xticks(sorted(frame["x"].unique()))  # the measured values, written plainly
    plain = FuncFormatter(lambda value, _: f"{value:,.0f}")
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_locator(LogLocator(base=10, subs=(2, 5)))  # 1-2-5: a label within any decade
    ax.yaxis.set_minor_formatter(plain)
    ax.legend(frameon=False, fontsize=8)
    add_caption(fig, records)
    return fig


def heatmap(ratio: pd.DataFrame, title: str, records: pd.DataFrame) -> plt.Figure:
    """A grid of ratios (rows x columns), annotated, 1.0 at the colour scale's centre."""
    fig, ax = plt.subplots(figsize=(6, 4))
    sns.heatmap(ratio, annot=True, fmt=".1f", cmap="vlag", center=1.0, cbar_kws={"label": "speedup"}, ax=ax)
    ax.invert_yaxis()
    ax.set_title(title)
    add_caption(fig, records)
    return fig


def hit_rates(records: pd.DataFrame, title: str) -> plt.Figure:
    """Cache hit rate against id skew, one line per cache size, one panel per policy."""
    rows = records.assign(cache=records["cache_fraction"].map(lambda f: f"{f:.1%} of rows"))
    grid = sns.relplot(
        rows, x="zipf_alpha", y="cache_hit_rate", hue="cache", col="cache_policy", kind="line", marker="o",
        height=3.5, aspect=1.1,
    )  # fmt: skip
    grid.set_axis_labels("Zipf exponent of the ids (skew)", "cache hit rate (per lookup)")
    grid.set_titles("{col_name}")
    grid.figure.suptitle(title, y=1.04)
    add_caption(grid.figure, records)
    return grid.figure


def scaling_breakdown(records: pd.DataFrame, title: str) -> plt.Figure:
    """Per measured point: compute alone and the communication left exposed, ms per step (medians of repeats)."""
    clean, _ = stats.usable(records)
    keys = ["world_size", "batch_size", "data.lookups_per_table"]
    rows = clean.groupby(keys)[["compute_ms_median", "exposed_comm_ms"]].median().reset_index().sort_values(keys)
    labels = [
        f"{int(r.world_size)} rank{'s' if r.world_size > 1 else ''}, batch {int(r.batch_size):,}, "
        f"{int(r['data.lookups_per_table'])} lookups"
        for _, r in rows.iterrows()
    ]
    table = pd.DataFrame(
        {
            "compute alone": rows["compute_ms_median"].to_numpy(),
            "exposed communication": rows["exposed_comm_ms"].to_numpy(),
        },
        index=labels,
    )
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(table) + 1.8))
    table.plot.barh(stacked=True, ax=ax, width=0.7)
    ax.invert_yaxis()
    ax.set_xlabel("time per training step, slowest rank (ms)")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    add_caption(fig, records)
    return fig


def scaling_projection(projection: pd.DataFrame, title: str, records: pd.DataFrame) -> plt.Figure:
    """Modelled parallel efficiency against ranks, strong and weak scaling."""
    fig, ax = plt.subplots(figsize=(6, 4))
    sns.lineplot(projection, x="ranks", y="efficiency", hue="mode", marker="o", ax=ax)
    ax.set(xscale="log", ylim=(0, 1.05), xlabel="ranks", ylabel="parallel efficiency (model)", title=title)
    ax.set_xticks(sorted(projection["ranks"].unique()))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:.0f}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.legend(frameon=False)
    add_caption(fig, records)
    return fig
