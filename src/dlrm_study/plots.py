"""The figure style and helpers the notebooks share. Plots only read records."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files, not windows; notebooks still show the figure inline

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FuncFormatter, NullFormatter

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
    """Where and when the records were measured, for the figure's caption (CPU and GPU apart)."""
    if "device" in records and records["device"].nunique() > 1:
        return " | ".join(caption(group) for _, group in records.groupby("device", sort=True))
    first = records.iloc[0]
    when = str(records["timestamp"].max())[:10]
    gpu = f", GPU {first['gpu_model']}" if isinstance(first.get("gpu_model"), str) and first["gpu_model"] else ""
    return (
        f"{first['device_name']}{gpu}, {int(first['threads'])} threads, torch {first['torch_version']}, "
        f"{when}, dlrm-study {str(first['git_commit'])[:7]}"
    )


def add_caption(fig: plt.Figure, records: pd.DataFrame) -> None:
    """The hardware and date under the figure, clear of the axis label."""
    fig.text(0.0, -0.06, caption(records), fontsize=8, ha="left", va="top")


def save(fig: plt.Figure, name: str, results_dir: Path) -> list[Path]:
    """The figure as PNG and SVG under results_dir/figures/."""
    out = Path(results_dir) / "figures"
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png", out / f"{name}.svg"]
    for path in paths:
        fig.savefig(path, bbox_inches="tight", dpi=150)
    return paths


def breakdown(records: pd.DataFrame, title: str) -> plt.Figure:
    """Stacked bars: ms per iteration of each operator, one bar per config (and variant)."""
    ops = [f"op_{name}_ms" for name in OPERATORS if f"op_{name}_ms" in records]
    rows = records.dropna(subset=ops).copy()
    rows["label"] = rows["config_name"] + (" / " + rows["variant"] if rows["variant"].nunique() > 1 else "")
    table = rows.groupby("label", sort=False)[ops].median()
    table.columns = [c.removeprefix("op_").removesuffix("_ms").replace("_", " ") for c in table.columns]
    fig, ax = plt.subplots(figsize=(9, 0.6 * len(table) + 2))
    table.plot.barh(stacked=True, ax=ax, width=0.7)
    ax.invert_yaxis()
    ax.set_xlabel("time per training iteration (ms)")
    ax.set_ylabel("")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    ax.set_title(title)
    add_caption(fig, records)
    return fig


def speedup(records: pd.DataFrame, baseline: str, title: str) -> plt.Figure:
    """Bars: samples/s of each variant over the baseline variant's, per config (medians)."""
    rates = records.groupby(["config_name", "variant"])["samples_per_s"].median().unstack()
    ratios = rates.div(rates[baseline], axis=0)
    order = ordered(ratios.columns)
    tidy = ratios[order].reset_index().melt(id_vars="config_name", var_name="variant", value_name="speedup")
    fig, ax = plt.subplots(figsize=(8, 4))
    sns.barplot(tidy, x="config_name", y="speedup", hue="variant", hue_order=order, ax=ax)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("")
    ax.set_ylabel(f"samples/s relative to {baseline}")
    ax.set_title(title)
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
    """samples/s against one knob (`x`, labelled by `knob`), one line per variant, log-log."""
    order = ordered(records["variant"])
    fig, ax = plt.subplots(figsize=(6, 4))
    sns.lineplot(records, x="x", y="samples_per_s", hue="variant", hue_order=order, marker="o", ax=ax)
    ax.set(xscale="log", yscale="log", xlabel=records["knob"].iloc[0], ylabel="training samples/s", title=title)
    ax.set_xticks(sorted(records["x"].unique()))  # the measured values, written plainly
    plain = FuncFormatter(lambda value, _: f"{value:,.0f}")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(NullFormatter())
    ax.legend(frameon=False)
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
    """Per measured point: compute alone and the communication left exposed, ms per step."""
    rows = records.sort_values(["world_size", "batch_size", "data.lookups_per_table"])
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
