"""Side-by-side CPU comparison: reference, optimized fp32 / bf16 and torchrec, in one run.

The presets are the points and the loops the variants of one `measure.runner` schedule:
repeats, variants interleaved and rotated within each, one record per measurement. The
speedups are paired ratios within repeats, with their 95% intervals (`measure.stats`).
"""

import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from dlrm_study import config, results
from dlrm_study.measure import roofline, runner, stats
from dlrm_study.measure.bench import Prepared, measure_prepared, prepare

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
    # gpu-hbm's step run eagerly, not captured as a CUDA graph: what the capture buys.
    "gpu-eager": ["train.loop=gpu", "train.placement=hbm", "train.precision=bf16", "train.cuda_graph=false"],
}
CPU_VARIANTS = ("reference", "optimized-fp32", "optimized-bf16", "torchrec")

# Notebook 02's ablation: the reference, then the optimized loop's techniques added one at a time.
# `optimized-fp32` is the step that adds the fused interaction, `optimized-bf16` the one that adds bf16.
_OFF = ["train.loop=optimized", "train.precision=fp32", "train.huge_pages=false", "train.fused_interaction=false"]
VARIANTS |= {
    "fused-update": [*_OFF, "train.table_batching=false"],
    "+table-batching": _OFF,
    "+huge-pages": [*_OFF[:2], "train.fused_interaction=false"],
}
ABLATION = ["reference", "fused-update", "+table-batching", "+huge-pages", "optimized-fp32", "optimized-bf16"]
ABLATION_LABELS = {
    "reference": "reference",
    "fused-update": "+ fused embedding update",
    "+table-batching": "+ table batching",
    "+huge-pages": "+ huge pages",
    "optimized-fp32": "+ fused interaction (optimized fp32)",
    "optimized-bf16": "+ bf16 Split-SGD and bf16 MLPs (optimized bf16)",
}

# (name, numerator, denominator, target): samples/s ratios the SC20 issue asks for.
SPEEDUPS = [
    ("optimized bf16 / reference", "optimized-bf16", "reference", 4.0),
    ("optimized fp32 / reference", "optimized-fp32", "reference", 2.2),
    ("optimized bf16 / torchrec", "optimized-bf16", "torchrec", 2.5),
]
ROOFLINE_TARGET = 1.3  # time per iteration within 1.3x of the bound


def variant_name(cfg: config.Config) -> str:
    """The variant label of a config: what runs (loop, precision, placement), as in VARIANTS."""
    t = cfg.train
    if t.loop in ("reference", "torchrec"):
        return t.loop
    if t.loop == "optimized":
        off = "".join(f"-no-{name.replace('_', '-')}" for name in config.OPTIMIZED_SWITCHES if not getattr(t, name))
        return f"optimized-{t.precision}{off}"
    name = f"gpu-{t.placement}" + ("-lfu" if t.placement == "cached" and t.cache_policy == "lfu" else "")
    name = name if t.precision == "bf16" else f"{name}-fp32"
    if not t.cuda_graph:
        return "gpu-eager" if name == "gpu-hbm" else f"{name}-eager"
    return name


def runnable(variants: Sequence[str]) -> tuple[list[str], list[str]]:
    """(kept, skipped): a CPU without native bf16 skips the CPU loops' bf16 variants.

    They would run emulated, so their timings would say nothing about bf16 training; a
    study states what it skipped (`skip_note`) instead of drawing them.
    """
    if results.native_bf16():
        return list(variants), []
    cpu_bf16 = [v for v in variants if v in VARIANTS and "train.precision=bf16" in VARIANTS[v] and is_cpu(v)]
    return [v for v in variants if v not in cpu_bf16], cpu_bf16


def is_cpu(variant: str) -> bool:
    return not any(o == "train.loop=gpu" for o in VARIANTS[variant])


def skip_note(skipped: Sequence[str]) -> str:
    return (
        f"note: this CPU has no native bf16 (no avx512_bf16 or amx_bf16): {', '.join(skipped)} not measured "
        "(emulated bf16 timings would not stand for bf16 training)"
    )


def compare(
    presets: Sequence[str],
    variants: Sequence[str] = CPU_VARIANTS,
    repeats: int = 3,
    steps: int = 10,
    warmup: int = 2,
    out: Path | None = None,
    progress: bool = True,
    limits: dict[str, float] | None = None,
) -> list[dict[str, object]]:
    """Bench every variant of every preset in `repeats` interleaved repeats; return the records.

    The machine's limits are measured first (full mode) unless given.
    """
    kept, skipped = runnable(variants)
    if skipped:
        print(skip_note(skipped), file=sys.stderr)
    points = [(p, {v: config.load(p, [*VARIANTS[v], f"train.steps={steps}"]) for v in kept}) for p in presets]
    if limits is None:
        sizes = sorted({size for _, cfgs in points for cfg in cfgs.values() for size in roofline.row_sizes(cfg)})
        limits = roofline.measure_limits(sizes)

    def measure_run(prepared: Prepared, task: runner.Task) -> dict[str, object]:
        return measure_prepared(prepared, steps, warmup, profile_steps=0, progress=False, limits=limits)

    measure, kept = runner.with_kept_runs(points, prepare, Prepared.close, measure_run)
    records: list[dict[str, object]] = []
    tasks = runner.schedule(points, repeats, runner.machine_of)
    try:
        runner.run(tasks, measure, out, "cpu-compare", resume=False, record_errors=False, progress=progress,
                   on_record=records.append)  # fmt: skip
    finally:
        kept.clear()
    return records


def report(records: Sequence[dict[str, object]]) -> str:
    """Medians with 95% intervals, the paired speedups and roofline fractions against their targets."""
    frame = pd.DataFrame(records)
    rate = stats.summarize(frame, ["config_name", "variant"]).set_index(["config_name", "variant"])
    ms = stats.summarize(frame, ["config_name", "variant"], "ms_median").set_index(["config_name", "variant"])
    lines = []
    for preset in dict.fromkeys(frame["config_name"]):
        lines.append(f"{preset}:")
        for variant in VARIANTS:
            if (preset, variant) in rate.index:
                r, m = rate.loc[(preset, variant)], ms.loc[(preset, variant)]
                line = f"  {variant:<16}{stats.describe(r.center, r.low, r.high, digits=0):>32} samples/s"
                line += f"   {m.center:9.1f} ms/it"
                if "roofline_ms" in frame:
                    bound = frame[(frame.config_name == preset) & (frame.variant == variant)]["roofline_ms"].median()
                    line += f"   roofline {bound:7.1f} ms"
                lines.append(line)
        here = frame[frame["config_name"] == preset]
        for name, top, bottom, target in SPEEDUPS:
            ratio = stats.paired_ratios(here, ["config_name"], top, bottom)
            if not ratio.empty:
                r = ratio.iloc[0]
                lines.append(
                    f"  {name:<28}{stats.describe(r.center, r.low, r.high, 'x'):>24}   "
                    f"target >= {target}x: {verdict(r.low, r.high, target)}"
                )
        for variant in ("optimized-fp32", "optimized-bf16"):
            if (preset, variant) in ms.index and "roofline_ms" in here:
                rows = here[here["variant"] == variant]
                over = stats.interval(rows["ms_median"] / rows["roofline_ms"])
                lines.append(
                    f"  {variant + ' time / bound':<28}{stats.describe(*over, 'x'):>24}   "
                    f"target <= {ROOFLINE_TARGET}x: {verdict(-over[2], -over[1], -ROOFLINE_TARGET)}"
                )
    return "\n".join(lines)


def verdict(low: float, high: float, target: float) -> str:
    """Against a target to reach or exceed: met when the whole interval is, missed when none of it is."""
    if low != low:
        return "one repeat: no verdict"
    if low >= target:
        return "meets"
    if high < target:
        return "misses"
    return "inconclusive (the interval spans the target)"
