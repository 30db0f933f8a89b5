"""The GPU session's throughput targets: which points they are, measured first, and said missing with why.

A target is a preset at a batch, bf16 on tables in HBM with the step captured (`gpu-hbm`), and the
samples/s it should reach on an H200 (this study's targets for the GPU loop). Its fp32 twin (`gpu-hbm-fp32`) runs in the
same run, so bf16 pairs with fp32 within each repeat; at the presets' own batch (2,048) the eager step
(`gpu-eager`) too, graph against eager. A dry run stands small YAML configs in for the presets
(`dry_configs`), one per preset, so its plan has two bases and a batch grid as the real one does.
"""

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dlrm_study.config import Config
from dlrm_study.config.variants import GPU_EAGER, GPU_HBM, GPU_HBM_FP32
from dlrm_study.records import columns as col


@dataclass(frozen=True)
class Target:
    preset: str
    batch: int
    least: float  # samples/s of gpu-hbm, judged on the median of all its repeats

    def name(self) -> str:
        return f"{self.preset} bf16 hbm captured, batch {self.batch:,}"


TARGETS = [
    Target("mlperf-scaled", 2048, 1_500_000),
    Target("mlperf-scaled", 65536, 5_000_000),
    Target("dlrm-benchmark", 16384, 2_000_000),
]
VARIANT = GPU_HBM
STUDY = "gpu-targets"  # the lending's run of the targets' points (`studies.gpu.TARGETS_RUN`)
# The studies that measure the targets' own points: the lending's, and the presets of the session of several
# calls. Others measure the same preset and batch with other settings (H4's placements: Zipf ids, a cache): a
# target's config is the one these studies measured at its point.
STUDIES = (STUDY, "gpu-presets", "gpu-presets-large")
TWINS = (GPU_HBM_FP32,)  # measured beside each target, in its run
EAGER_BATCH = 2048  # the presets' own batch: graph against eager is measured there only
# A dry run's stand-ins: its presets (tiny-sized, one hot-rowed and one-hot like mlperf-scaled, one pooled
# like dlrm-benchmark) and its batches for 2,048, 16,384 and 65,536.
DRY_BATCHES = {2048: 64, 16384: 48, 65536: 96}
DRY_CONFIGS = {
    "mlperf-scaled": "base: tiny\ndata: {pooling: fixed, lookups_per_table: 1}\nmodel: {table_rows: [3, 1000, 500]}",
    "dlrm-benchmark": "base: tiny\ndata: {pooling: fixed, lookups_per_table: 8}\nmodel: {dense_features: 32}",
}
Plan = list[tuple[str, dict[str, Config]]]  # a runner plan: (label, {variant: config})


def dry_name(preset: str) -> str:
    return f"dry-{preset}"


def dry_configs(out: Path) -> dict[str, str]:
    """The dry run's stand-in for each preset: a YAML file written under `out` (its path, by preset)."""
    folder = out / "dry-configs"
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for preset, text in DRY_CONFIGS.items():
        path = folder / f"{dry_name(preset)}.yaml"
        path.write_text(text)
        paths[preset] = str(path)
    return paths


def point_of(target: Target, dry_run: bool) -> tuple[str, int]:
    """(config name, batch) of the target's point in the plan (a dry run's: its stand-in's)."""
    if dry_run:
        return dry_name(target.preset), DRY_BATCHES[target.batch]
    return target.preset, target.batch


def is_target(variant: str, cfg: Config, dry_run: bool) -> bool:
    """Whether (variant, config) is a target point's measurement: the target, its fp32 twin, its eager step at 2,048."""
    for target in TARGETS:
        if (cfg.name, cfg.train.batch_size) != point_of(target, dry_run):
            continue
        return variant in (VARIANT, *TWINS) or (variant == GPU_EAGER and target.batch == EAGER_BATCH)
    return False


def planned(plan: Plan, dry_run: bool) -> list[str]:
    """One line per target: the point and variants the plan measures for it, or that the plan lacks it."""
    lines = []
    for target in TARGETS:
        name, batch = point_of(target, dry_run)
        found = [
            (label, sorted(cfgs))
            for label, cfgs in plan
            if any((cfg.name, cfg.train.batch_size) == (name, batch) for cfg in cfgs.values())
        ]
        if not any(VARIANT in variants for _, variants in found):
            lines.append(f"target {target.name()}: NOT IN THE PLAN (it will not be measured)")
            continue
        label, variants = next(item for item in found if VARIANT in item[1])
        least = f"{target.least:,.0f}"
        lines.append(f"target {target.name()} (>= {least} samples/s): point {label!r}, {', '.join(variants)}")
    return lines


def verdicts(frame: pd.DataFrame | None, dry_run: bool, plan: Plan | None = None) -> list[str]:
    """One line per target: its samples/s against its least, or that it is missing and why (its error, or
    not measured: past the budget, or not in the plan)."""
    lines = []
    frame = frame if frame is not None else pd.DataFrame()
    for target in TARGETS:
        name, batch = point_of(target, dry_run)
        mine = measured(frame, target, dry_run)
        ok = mine[mine[col.ERROR].isna()] if col.ERROR in mine else mine
        if not ok.empty:
            got = rate(ok)
            verdict = "met" if got >= target.least else "missed"
            lines.append(f"{target.name()}: {got:,.0f} samples/s (target {target.least:,.0f}: {verdict})")
        elif not mine.empty:
            lines.append(f"{target.name()}: MISSING: failed: {mine[col.ERROR].dropna().iloc[0]}")
        elif plan is not None and not any(
            (cfg.name, cfg.train.batch_size) == (name, batch) for _, cfgs in plan for cfg in cfgs.values()
        ):
            lines.append(f"{target.name()}: MISSING: not in the plan")
        else:
            lines.append(f"{target.name()}: MISSING: not measured yet (past the time budget: the next session resumes)")
    return lines


def measured(frame: pd.DataFrame, target: Target, dry_run: bool = False) -> pd.DataFrame:
    """The target's records (errors included): `VARIANT` at the configs (`config_hash`) one of `STUDIES` measured
    at its point, whatever study measured them (the runner measures a point once per repeat: a lending's
    same-host run may hold a target's repeats). Where there is no study or config column: its point."""
    if frame.empty:
        return frame
    name, batch = point_of(target, dry_run)
    mine = frame[(frame[col.CONFIG_NAME] == name) & (batches(frame) == batch) & (frame[col.VARIANT] == VARIANT)]
    if col.STUDY not in mine:
        return mine
    own = mine[mine[col.STUDY].isin(STUDIES)]
    if col.CONFIG_HASH not in mine:
        return own
    return mine[mine[col.CONFIG_HASH].isin(set(own[col.CONFIG_HASH]))]


def rate(ok: pd.DataFrame) -> float:
    """A target's samples/s: the median over its measured repeats (`measured`, without error records)."""
    return float(ok[col.SAMPLES_PER_S].median())


def batches(frame: pd.DataFrame) -> pd.Series:
    """Each record's batch: what ran, or (an error record: nothing ran) its config's."""
    ran = frame[col.BATCH_SIZE] if col.BATCH_SIZE in frame else pd.Series(float("nan"), index=frame.index)
    if BATCH_FIELD in frame:
        ran = ran.fillna(frame[BATCH_FIELD])
    return ran.astype(float)


BATCH_FIELD = "train.batch_size"  # the config's field, in every record (make_record writes the config flat)
