"""Notebook 07's figures: each loop's training loss and held-out AUC less the reference's, over seeds; and S3's
accuracy benchmark (`accuracy`): curves per seed and precision, the attainable AUC, the gains against the margin."""

import matplotlib.pyplot as plt
import pandas as pd

from dlrm_study.analysis.convergence import (
    ATTAINABLE,
    GAIN_MARGIN,
    AccuracyJudgement,
    accuracy_gaps,
    auc_gaps,
    loss_gaps,
    preset_of,
)  # fmt: skip
from dlrm_study.analysis.wording import variant_words
from dlrm_study.config.variants import ACCURACY_PRECISIONS, PLAIN_BF16
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
        ax.plot(rows[col.STEP], rows["mean"], color=colors[variant], label=variant_words(variant), linewidth=1.2)
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
    add_caption(fig, pd.concat(evals), "seed")  # a line per machine: the timed presets may be another machine's
    return fig


def timed_panel(ax: plt.Axes, timed: pd.DataFrame, accuracy: pd.DataFrame, records: pd.DataFrame) -> None:
    """S3's accuracy benchmark: each bf16 precision's AUC less fp32's per preset, and the machine that trained them
    where it is not the other panels'."""
    gap_points(ax, timed, col.CONFIG_NAME, {}, "bf16's held-out AUC less fp32's")
    steps = int(accuracy[col.STEP].max()) if col.STEP in accuracy else 0
    ax.set_title(f"S3: accuracy benchmark, {steps:,} steps, {int(timed['n'].max())} seeds", fontsize=10)
    trained, drawn = set(accuracy[col.MACHINE]), set(records[col.MACHINE])
    if trained != drawn:
        ax.set_xlabel("trained on " + ", ".join(sorted(key.split("/")[0] for key in trained)), fontsize=8)


def accuracy(frame: pd.DataFrame, judgement: AccuracyJudgement, title: str | None = None) -> plt.Figure:
    """Per preset: windowed training loss and held-out AUC of every seed (a line each) in each precision, the
    teacher's attainable AUC dashed. Last panel, where bf16 was trained: each bf16 precision's gain relative to
    fp32's with its 95% interval over seeds, against the margin S3's rule asks (dotted). The title names the
    precisions drawn unless one is given."""
    presets = sorted(set(frame[col.CONFIG_NAME].astype(str)))
    gains = bool(judgement.split or judgement.plain)
    # a row per preset (each regime its own), the gains beside them all: one row of eight panels was unreadable
    fig = plt.figure(figsize=(4.0 * (2 + gains), 2.8 * len(presets) + 0.8))
    grid = fig.add_gridspec(len(presets), 2 + gains)
    colors = dict(zip(ACCURACY_PRECISIONS, plt.rcParams["axes.prop_cycle"].by_key()["color"], strict=False))
    for i, preset in enumerate(presets):
        mine = frame[frame[col.CONFIG_NAME].astype(str) == preset]
        loss_ax, auc_ax = fig.add_subplot(grid[i, 0]), fig.add_subplot(grid[i, 1])
        for kind, value, ax in (("loss", col.LOSS, loss_ax), ("auc", col.EVAL_AUC, auc_ax)):
            curves(ax, mine[mine[col.KIND] == kind], value, colors)
            ax.set_title(f"{preset}: {'training loss' if kind == 'loss' else 'held-out AUC'}", fontsize=10)
            ax.set_xlabel("training step")
        if ATTAINABLE in mine and mine[ATTAINABLE].notna().any():
            auc_ax.axhline(mine[ATTAINABLE].mean(), color="black", linestyle="--", linewidth=0.8,
                           label="attainable (the teacher's AUC)")  # fmt: skip
        auc_ax.legend(frameon=False, fontsize=7)
    if gains:
        gains_panel(fig.add_subplot(grid[:, 2]), judgement, colors)
    fig.suptitle(title or accuracy_title(frame))
    fig.tight_layout()
    add_caption(fig, frame[frame[col.KIND] == "eval"], "seed")
    return fig


def accuracy_title(frame: pd.DataFrame) -> str:
    """The accuracy figure's title: the precisions its records trained, in words."""
    trained = [variant_words(v) for v in ACCURACY_PRECISIONS if v in set(frame[col.VARIANT])]
    alone = " alone (no bf16 trained on this machine)" if len(trained) == 1 else " from the same seeds"
    return f"S3's accuracy benchmark: {'; '.join(trained)}{alone}"  # names with commas, apart by semicolons


def curves(ax: plt.Axes, rows: pd.DataFrame, value: str, colors: dict[str, str]) -> None:
    """One line per (precision, run, seed), coloured by precision, labelled once (a seed trained again in another
    run is a line of its own, not a zig-zag through both runs' points)."""
    for variant in [v for v in ACCURACY_PRECISIONS if v in set(rows[col.VARIANT])]:
        mine = rows[rows[col.VARIANT] == variant]
        keys = [k for k in (col.RUN_ID, "train.seed") if k in mine]
        for n, (_, seed) in enumerate(mine.groupby(keys)):
            seed = seed.sort_values(col.STEP)
            ax.plot(seed[col.STEP], seed[value], color=colors[variant], linewidth=1, alpha=0.8,
                    label=variant_words(variant) if n == 0 else None)  # fmt: skip


def gains_panel(ax: plt.Axes, judgement: AccuracyJudgement, colors: dict[str, str]) -> None:
    """Each bf16 precision's learned gain relative to fp32's, per preset, with its interval over seeds."""
    gains = [*judgement.split, *judgement.plain]
    for i, gain in enumerate(gains):
        low, high = gain.ratio - gain.low, gain.high - gain.ratio
        ax.errorbar([i], [gain.ratio], yerr=[[low], [high]], fmt="o", capsize=4, color=colors.get(gain.variant))
    ax.axhline(1, color="black", linestyle="--", linewidth=0.8)
    ax.axhline(GAIN_MARGIN, color="black", linestyle=":", linewidth=0.8)
    # the line's label on the line itself, at its right end (a legend box landed among the error bars)
    ax.annotate(f"S3's margin: {GAIN_MARGIN:.0%}", (1, GAIN_MARGIN), xycoords=("axes fraction", "data"),
                xytext=(-2, 2), textcoords="offset points", ha="right", va="bottom", fontsize=7)  # fmt: skip
    # The colour says the variant (the legends beside); the label says the preset and the update in short.
    names = [f"{g.preset}\n{'plain SGD' if g.variant == PLAIN_BF16 else 'Split-SGD'}" for g in gains]
    ax.set_xticks(range(len(gains)), names, rotation=35, ha="right", rotation_mode="anchor", fontsize=7)
    ax.set_xlim(-0.6, max(len(gains), 1) - 0.4)
    ax.set_ylabel("learned gain (AUC - 0.5) over fp32's")
    ax.set_title("gain relative to fp32, 95% over seeds", fontsize=10)


def gap_points(ax: plt.Axes, gaps: pd.DataFrame, label: str, colors: dict[str, str], ylabel: str) -> None:
    """One point per row at its mean gap, with its 95% interval as an error bar; zero dashed."""
    for i, row in enumerate(gaps.itertuples()):
        name = getattr(row, label)
        low, high = row.mean - row.low, row.high - row.mean
        ax.errorbar([i], [row.mean], yerr=[[low], [high]], fmt="o", capsize=4, color=colors.get(name, "black"))
    ax.axhline(0, color="black", linestyle="--", linewidth=0.8)
    names = [variant_words(str(v)) if label == col.VARIANT else str(v) for v in gaps[label]]
    ax.set_xticks(range(len(gaps)), names, rotation=20, ha="right", fontsize=8)
    ax.set_xlim(-0.6, len(gaps) - 0.4)
    ax.set_ylabel(ylabel)
