"""Side-by-side CPU comparison: reference, optimized fp32 / bf16 and torchrec, in one run.

Variants are interleaved round by round (each round benches every variant of every
config once), so slow drifts of a shared machine hit them all alike; ratios are taken
between medians over rounds. Every bench is one record in `results/`.
"""

import statistics
from collections.abc import Sequence
from pathlib import Path

from dlrm_study import config, results
from dlrm_study.measure import roofline
from dlrm_study.measure.bench import bench

VARIANTS = {
    "reference": ["train.loop=reference"],
    "optimized-fp32": ["train.loop=optimized", "train.precision=fp32"],
    "optimized-bf16": ["train.loop=optimized", "train.precision=bf16"],
    "torchrec": ["train.loop=torchrec"],
    # The gpu loop: the dense part in bf16 (autocast) unless -fp32; tables placed as named.
    # The device is the sweep's to set (train.device=cuda; cpu for a dry run of the GPU script).
    "gpu-hbm-fp32": ["train.loop=gpu", "train.placement=hbm", "train.precision=fp32"],
    "gpu-hbm": ["train.loop=gpu", "train.placement=hbm", "train.precision=bf16"],
    "gpu-host": ["train.loop=gpu", "train.placement=host", "train.precision=bf16"],
    "gpu-uvm": ["train.loop=gpu", "train.placement=uvm", "train.precision=bf16"],
    "gpu-cached": ["train.loop=gpu", "train.placement=cached", "train.precision=bf16"],
    "gpu-cached-lfu": ["train.loop=gpu", "train.placement=cached", "train.cache_policy=lfu", "train.precision=bf16"],
}
CPU_VARIANTS = ("reference", "optimized-fp32", "optimized-bf16", "torchrec")

# (name, numerator, denominator, target): samples/s ratios the SC20 issue asks for.
SPEEDUPS = [
    ("optimized bf16 / reference", "optimized-bf16", "reference", 4.0),
    ("optimized fp32 / reference", "optimized-fp32", "reference", 2.2),
    ("optimized bf16 / torchrec", "optimized-bf16", "torchrec", 2.5),
]
ROOFLINE_TARGET = 1.3  # time per iteration within 1.3x of the bound


def compare(
    presets: Sequence[str],
    variants: Sequence[str] = CPU_VARIANTS,
    rounds: int = 3,
    steps: int = 10,
    warmup: int = 2,
    out: Path | None = None,
    progress: bool = True,
    limits: dict[str, float] | None = None,
) -> list[dict[str, object]]:
    """Bench every variant of every preset, `rounds` times interleaved; return the records.

    The machine's limits are measured first (full mode) unless given.
    """
    configs = {(p, v): config.load(p, VARIANTS[v]) for p in presets for v in variants}
    if limits is None:
        sizes = sorted({size for cfg in configs.values() for size in roofline.row_sizes(cfg)})
        limits = roofline.measure_limits(sizes)
    records = []
    for round_number in range(rounds):
        for (_preset, variant), cfg in configs.items():
            cfg = config.Config.from_dict(cfg.to_dict())  # build() may adjust its config
            record = bench(
                cfg,
                steps,
                warmup,
                profile_steps=1 if round_number == 0 else 0,
                study="cpu-compare",
                progress=progress,
                limits=limits,
            )
            record.update(variant=variant, round=round_number)
            records.append(record)
            if out:
                results.append(out, record)
    return records


def median_by(records: Sequence[dict[str, object]], key: str) -> dict[tuple[str, str], float]:
    """Median of `key` over rounds, per (config, variant)."""
    groups: dict[tuple[str, str], list[float]] = {}
    for r in records:
        groups.setdefault((str(r["config_name"]), str(r["variant"])), []).append(float(r[key]))
    return {group: statistics.median(values) for group, values in groups.items()}


def report(records: Sequence[dict[str, object]]) -> str:
    """The speedups and roofline fractions against their targets, one block per config."""
    rate, ms, bound = (median_by(records, k) for k in ("samples_per_s", "ms_median", "roofline_ms"))
    lines = []
    for preset in dict.fromkeys(str(r["config_name"]) for r in records):
        lines.append(f"{preset}:")
        for variant in VARIANTS:
            if (preset, variant) in rate:
                lines.append(
                    f"  {variant:<16}{rate[preset, variant]:>12,.0f} samples/s {ms[preset, variant]:>9.1f} ms/it"
                    f"   roofline {bound[preset, variant]:7.1f} ms"
                )
        for name, top, bottom, target in SPEEDUPS:
            if (preset, top) in rate and (preset, bottom) in rate:
                ratio = rate[preset, top] / rate[preset, bottom]
                verdict = "meets" if ratio >= target else "misses"
                lines.append(f"  {name:<32}{ratio:6.2f}x   target >= {target}x: {verdict}")
        for variant in ("optimized-fp32", "optimized-bf16"):
            if (preset, variant) in rate:
                over = ms[preset, variant] / bound[preset, variant]
                verdict = "meets" if over <= ROOFLINE_TARGET else "misses"
                lines.append(f"  {variant + ' time / bound':<32}{over:6.2f}x   target <= {ROOFLINE_TARGET}x: {verdict}")
    return "\n".join(lines)
