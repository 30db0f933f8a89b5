"""Notebook 07's figure: each loop's training loss and held-out AUC less the reference's, over seeds."""

import matplotlib.pyplot as plt
import pandas as pd

from dlrm_study.analysis.convergence import accuracy_gaps, auc_gaps, loss_gaps, preset_of
from dlrm_study.analysis.verdicts import S3_AUC_GAP
from dlrm_study.records import columns as col
from dlrm_study.report.plots.common import add_caption, ordered


def convergence(records: pd.DataFrame, title: str, accuracy: pd.DataFrame | None = None) -> plt.Figure:
    """Left: each loop's windowed training loss less the reference's, step by step (mean over seeds, paired
    by seed, 95% band). Middle: its held-out AUC less the reference's. Right, where `accuracy` has
    records: S3 on the timed presets, bf16's held-out AUC less fp32's. A gap of zero is the dashed line."""
    loss, auc = loss_gaps(records), auc_gaps(records)
    timed = accuracy_gaps(accuracy) if accuracy is not None and not accuracy.empty else pd.DataFrame()
    panels = 3 if not timed.empty else 2
    fig, axes = plt.subplots(
        1, panels, figsize=(4.2 * panels, 3.8), gridspec_kw={"width_ratios": [2] + [1] * (panels - 1)}
    )
    colors = dict(zip(ordered(records[col.VARIANT]), plt.rcParams["axes.prop_cycle"].by_key()["color"], strict=False))
    seeds = int(auc["n"].max()) if not auc.empty else 0
    ax = axes[0]
    for variant in ordered(loss[col.VARIANT]):
        rows = loss[loss[col.VARIANT] == variant].sort_values(col.STEP)
        ax.plot(rows[col.STEP], rows["mean"], color=colors[variant], label=variant, linewidth=1.2)
        ax.fill_between(rows[col.STEP], rows["low"], rows["high"], color=colors[variant], alpha=0.2, linewidth=0)
    ax.axhline(0, color="black", linestyle="--", linewidth=0.8)
    ax.set_xlabel("training step")
    ax.set_ylabel("training loss less the reference's")
    ax.set_title(f"{preset_of(records)}: loss, {seeds} seeds", fontsize=10)
    ax.legend(frameon=False, fontsize=8)
    gap_points(axes[1], auc, col.VARIANT, colors, "held-out AUC less the reference's")
    axes[1].set_title("held-out AUC", fontsize=10)
    if panels == 3:
        timed_panel(axes[2], timed, accuracy, records)
    fig.suptitle(title)
    fig.tight_layout()
    evals = [frame[frame[col.KIND] == "eval"] for frame in (records, accuracy) if frame is not None and not frame.empty]
    add_caption(fig, pd.concat(evals))  # a line per machine: the timed presets may be another machine's
    return fig


def timed_panel(ax: plt.Axes, timed: pd.DataFrame, accuracy: pd.DataFrame, records: pd.DataFrame) -> None:
    """S3 on the timed presets: bf16's AUC less fp32's per preset, inside the band the rule allows
    (`S3_AUC_GAP` either side), and the machine that trained them where it is not the other panels'."""
    ax.axhspan(-S3_AUC_GAP, S3_AUC_GAP, color="grey", alpha=0.15, linewidth=0, label=f"S3's margin, ±{S3_AUC_GAP}")
    gap_points(ax, timed, col.CONFIG_NAME, {}, "bf16's held-out AUC less fp32's")
    steps = int(accuracy[col.STEP].max()) if col.STEP in accuracy else 0
    ax.set_title(f"S3: timed presets, {steps:,} steps, {int(timed['n'].max())} seeds", fontsize=10)
    ax.legend(frameon=False, fontsize=8, loc="upper right")
    trained, drawn = set(accuracy[col.MACHINE]), set(records[col.MACHINE])
    if trained != drawn:
        ax.set_xlabel("trained on " + ", ".join(sorted(key.split("/")[0] for key in trained)), fontsize=8)


def gap_points(ax: plt.Axes, gaps: pd.DataFrame, label: str, colors: dict[str, str], ylabel: str) -> None:
    """One point per row at its mean gap, with its 95% interval as an error bar; zero dashed."""
    for i, row in enumerate(gaps.itertuples()):
        name = getattr(row, label)
        low, high = row.mean - row.low, row.high - row.mean
        ax.errorbar([i], [row.mean], yerr=[[low], [high]], fmt="o", capsize=4, color=colors.get(name, "black"))
    ax.axhline(0, color="black", linestyle="--", linewidth=0.8)
    ax.set_xticks(range(len(gaps)), [str(v) for v in gaps[label]], rotation=20, ha="right", fontsize=8)
    ax.set_xlim(-0.6, len(gaps) - 0.4)
    ax.set_ylabel(ylabel)
