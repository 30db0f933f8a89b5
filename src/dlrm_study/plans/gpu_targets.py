"""The GPU session's throughput targets as data: which points they are, their least samples/s as set, and a dry
run's stand-ins for them (`analysis.gpu_targets` judges the records against them, device by device).

A target is a preset at a batch, bf16 on tables in HBM with the step captured (`gpu-hbm`), and the
samples/s it should reach on an H200 (this study's targets for the GPU loop). Its fp32 twin (`gpu-hbm-fp32`) runs
in the same run, so bf16 pairs with fp32 within each repeat; at the presets' own batch (2,048) the eager step
(`gpu-eager`) too, graph against eager. A dry run stands small YAML configs in for the presets
(`dry_configs`), one per preset, so its plan has two bases and a batch grid as the real one does.
"""

from dataclasses import dataclass
from pathlib import Path

from dlrm_study.config import Config
from dlrm_study.config.variants import GPU_EAGER, GPU_HBM, GPU_HBM_FP32
from dlrm_study.plans.sweep import Planned


@dataclass(frozen=True)
class Target:
    preset: str
    batch: int
    least: float  # samples/s of gpu-hbm, judged on the median of all its repeats

    def name(self) -> str:
        return f"{self.preset} bf16 hbm captured, batch {self.batch:,}"


SET_FOR = "h200"  # the device the targets are set for


TARGETS = [
    Target("mlperf-scaled", 2048, 1_500_000),
    Target("mlperf-scaled", 65536, 5_000_000),
    Target("dlrm-benchmark", 16384, 2_000_000),
]
VARIANT = GPU_HBM
STUDY = "gpu-targets"  # the lending's run of the targets' points (`plans.gpu.TARGETS_RUN`)
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
Plan = list[Planned]  # a runner plan: (label, {variant: config})


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
