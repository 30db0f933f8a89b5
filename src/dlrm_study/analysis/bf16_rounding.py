"""S3's accuracy benchmark against bf16's resolution (`studies.bf16_rounding`): per preset and weight group, the
share of fp32's updates that plain bf16 SGD would round away, early and late in training, and the share of fp32's
movement that plain bf16's weights keep along the same updates."""

from pathlib import Path

import pandas as pd

from dlrm_study.analysis.convergence import FAILS, HOLDS, AccuracyJudgement
from dlrm_study.analysis.readers import config_key, labelled
from dlrm_study.config.variants import OPTIMIZED_FP32
from dlrm_study.plans.bf16_rounding import (
    GROUP,
    KEPT_STEPS,
    MEDIAN_OVER_HALF,
    MOVEMENT_KEPT,
    RECORDS,
    ROUNDED_AWAY,
    fp32_configs,
    study,
)
from dlrm_study.records import columns as col
from dlrm_study.records import store
from dlrm_study.records.machine import select

WORDS = {"embeddings": "embedding tables'", "mlp": "MLPs'"}


def rounding_records(profile: str, out: Path, machine: str | None = "this") -> pd.DataFrame:
    """The profile's rounding records on one machine (None: every machine's), of the accuracy benchmark's current
    fp32 configs (a benchmark since changed is left out) and each preset's newest run; empty where none were
    measured."""
    path = out / RECORDS
    frame = store.load(path) if path.exists() else pd.DataFrame()
    if frame.empty:
        return frame
    labels = {(config_key(cfg), OPTIMIZED_FP32): cfg.name for cfg in fp32_configs(profile)}
    frame = select(labelled(frame[frame[col.STUDY] == study(profile)], labels), machine)
    if frame.empty:
        return frame
    newest = frame.groupby([col.MACHINE, col.POINT])[col.RUN_ID].transform("max")
    return frame[frame[col.RUN_ID] == newest]


def rounding_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per preset and weight group: the share of updated weights plain bf16 would leave unchanged at the first and
    the last window's step and over all windows, the median update over half a bf16 spacing at the last, and the
    share of fp32's movement over each window's last KEPT_STEPS steps that plain bf16 keeps (the least of any
    window, and at the last). Records from before `movement_kept` was measured have none (NaN)."""
    if frame.empty:
        return pd.DataFrame()
    rows = []
    for (preset, group), part in frame.groupby([col.CONFIG_NAME, GROUP], sort=True):
        part = part.sort_values(col.STEP)
        first, last = part.iloc[0], part.iloc[-1]
        rows.append({
            "preset": preset,
            "weights": group,
            "first step": int(first[col.STEP]),
            "lost, first": first[ROUNDED_AWAY],
            "last step": int(last[col.STEP]),  # each preset's own: the regimes train for different steps
            "lost, last": last[ROUNDED_AWAY],
            "lost, mean over windows": part[ROUNDED_AWAY].astype(float).mean(),
            "median update / half spacing, last": last[MEDIAN_OVER_HALF],
            "movement kept, least": kept_column(part).min(),
            "movement kept, last": kept_column(part).iloc[-1],
        })  # fmt: skip
    return pd.DataFrame(rows).set_index(["preset", "weights"])


def kept_column(part: pd.DataFrame) -> pd.Series:
    """`movement_kept` as floats (NaN where the records predate it)."""
    return pd.to_numeric(part.get(MOVEMENT_KEPT, pd.Series(float("nan"), index=part.index)), errors="coerce")


def rounding_words(table: pd.DataFrame) -> list[str]:
    """A sentence per preset: the share of each weight group's updates plain bf16 would lose late in training, and
    the least share of fp32's movement its weights keep in any window."""
    if table.empty:
        return ["not measured on this machine (`-p measure True` measures it: one fp32 run per preset)"]
    lines = []
    for preset, part in table.groupby(level="preset", sort=True):
        shares = " and ".join(
            f"{part.loc[(preset, g), 'lost, last']:.1%} of the {WORDS.get(g, g)} updates" for _, g in part.index
        )
        line = f"{preset}: at step {int(part['last step'].max())}, plain bf16 would round away {shares}"
        kept = part["movement kept, least"]
        if kept.notna().all():
            moved = " and ".join(f"{share:.1%} of the {WORDS.get(g, g)}" for (_, g), share in kept.items())
            line += f"; yet along fp32's updates its weights keep at least {moved} movement over {KEPT_STEPS} steps"
        lines.append(line)
    return lines


def control_words(judgement: AccuracyJudgement) -> str:
    """What the control's outcome at small steps means for Split-SGD's (docs/claims.md): only a benchmark on which
    plain bf16 SGD fails the rule can tell Split-SGD from it."""
    kept = "plain bf16 SGD kept fp32's gain" if judgement.plain_status == HOLDS else ""
    at_rate = (f" At the benchmark's own learning rate {kept} (where SGD's noise scatters a weight's updates over "
               "more than a bf16 spacing, rounding to nearest drops some and keeps others whole, and on average "
               "loses no movement).") if kept else ""  # fmt: skip
    if judgement.control_status == FAILS:
        return ("The control failed the rule at small steps, as it should: this benchmark tells Split-SGD from plain "
                f"bf16.{at_rate}")  # fmt: skip
    if judgement.control_status == HOLDS:
        return ("The control did not fail: plain bf16 SGD kept fp32's gain at small steps too, so this benchmark "
                f"cannot tell Split-SGD from plain bf16.{at_rate}")  # fmt: skip
    status = judgement.control_status
    return f"The control at small steps: {status}; nothing yet on whether this benchmark tells the two apart.{at_rate}"
