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
from dlrm_study.records import columns as col
from dlrm_study.records.variants import (
    BF16_PAIR,
    CPU_LOOPS,
    FUSED_UPDATE,
    HUGE_PAGES,
    OPTIMIZED_BF16,
    OPTIMIZED_FP32,
    REFERENCE,
    TABLE_BATCHING,
    TORCHREC,
    Variant,
)
from dlrm_study.records.variants import REGISTRY as VARIANTS

CPU_VARIANTS = CPU_LOOPS

# Notebook 02's ablation (`records.variants.ABLATION`), each step named by what it adds.
ABLATION_LABELS = {
    REFERENCE: "reference",
    FUSED_UPDATE: "+ fused embedding update",
    TABLE_BATCHING: "+ table batching",
    HUGE_PAGES: "+ huge pages",
    OPTIMIZED_FP32: "+ fused interaction and MLP layers (optimized fp32)",  # records since issue 33: mlp_kernels
    OPTIMIZED_BF16: "+ bf16 Split-SGD and bf16 MLPs (optimized bf16)",
}

# (name, numerator, denominator, target): samples/s ratios the SC20 issue asks for.
SPEEDUPS = [
    ("optimized bf16 / reference", OPTIMIZED_BF16, REFERENCE, 4.0),
    ("optimized fp32 / reference", OPTIMIZED_FP32, REFERENCE, 2.2),
    ("optimized bf16 / torchrec", OPTIMIZED_BF16, TORCHREC, 2.5),
]
ROOFLINE_TARGET = 1.3  # time per iteration within 1.3x of the bound
# bf16 over fp32 (issue S3): at least 1.3x, or 85% of what the machine's measured rates allow
# (the fp32 bound over the bf16 bound), where the CPU has native bf16; emulated bf16 is not judged.
BF16_TARGET = 1.3
BF16_OF_BOUND = 0.85
# facebookresearch/dlrm's own script at dlrm-benchmark (`make compare-upstream`): ours over it.
UPSTREAM = "upstream-dlrm"
UPSTREAM_STUDIES = ("upstream", "reference-vs-upstream")  # the studies `make compare-upstream` writes
UPSTREAM_TARGETS = [(OPTIMIZED_BF16, 5.0), (OPTIMIZED_FP32, 2.5), (REFERENCE, None)]  # reference: faithful


def variant_name(cfg: config.Config) -> str:
    """The variant label of a config (`records.Variant.of`): a registered name where one describes it."""
    return Variant.of(cfg).name


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
        limits = roofline.measure_limits(**roofline.needs(*[cfg for _, cfgs in points for cfg in cfgs.values()]))

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
    rate = stats.summarize(frame, [col.CONFIG_NAME, col.VARIANT]).set_index([col.CONFIG_NAME, col.VARIANT])
    ms = stats.summarize(frame, [col.CONFIG_NAME, col.VARIANT], col.MS_MEDIAN).set_index([col.CONFIG_NAME, col.VARIANT])
    lines = []
    for preset in dict.fromkeys(frame[col.CONFIG_NAME]):
        lines.append(f"{preset}:")
        for variant in VARIANTS:
            if (preset, variant) in rate.index:
                r, m = rate.loc[(preset, variant)], ms.loc[(preset, variant)]
                line = f"  {variant:<16}{stats.describe(r.center, r.low, r.high, digits=0):>32} samples/s"
                line += f"   {m.center:9.1f} ms/it"
                if col.ROOFLINE_MS in frame:
                    mine = frame[(frame[col.CONFIG_NAME] == preset) & (frame[col.VARIANT] == variant)]
                    bound = mine[col.ROOFLINE_MS].median()
                    line += f"   roofline {bound:7.1f} ms"
                lines.append(line)
        here = frame[frame[col.CONFIG_NAME] == preset]
        for name, top, bottom, target in SPEEDUPS:
            ratio = stats.paired_ratios(here, [col.CONFIG_NAME], top, bottom)
            if not ratio.empty:
                r = ratio.iloc[0]
                lines.append(
                    f"  {name:<28}{stats.describe(r.center, r.low, r.high, 'x'):>24}   "
                    f"target >= {target}x: {verdict(r.low, r.high, target)}"
                )
        lines += bf16_lines(here)
        for variant in BF16_PAIR:
            if (preset, variant) in ms.index and col.ROOFLINE_MS in here:
                rows = here[here[col.VARIANT] == variant]
                over = stats.interval(rows[col.MS_MEDIAN] / rows[col.ROOFLINE_MS])
                lines.append(
                    f"  {variant + ' time / bound':<28}{stats.describe(*over, 'x'):>24}   "
                    f"target <= {ROOFLINE_TARGET}x: {verdict(-over[2], -over[1], -ROOFLINE_TARGET)}"
                )
    return "\n".join(lines)


def bf16_target(records: pd.DataFrame) -> tuple[float, str]:
    """The bf16/fp32 target of one preset's records and how it was set: 1.3x, or 85% of the
    roofline's fp32/bf16 bound ratio where the machine's rates allow less."""
    bound = {v: records.loc[records[col.VARIANT] == v, col.ROOFLINE_MS].median() for v in BF16_PAIR}
    allowed = bound[OPTIMIZED_FP32] / bound[OPTIMIZED_BF16] if col.ROOFLINE_MS in records else float("nan")
    if allowed == allowed and BF16_OF_BOUND * allowed < BF16_TARGET:
        return BF16_OF_BOUND * allowed, f"{BF16_OF_BOUND:.0%} of the bound ratio {allowed:.2f}x"
    return BF16_TARGET, f"{BF16_TARGET}x" + (f"; bound ratio {allowed:.2f}x" if allowed == allowed else "")


def bf16_lines(records: pd.DataFrame) -> list[str]:
    """optimized-bf16 over optimized-fp32 (paired) against its target; emulated bf16 is named, not judged."""
    ratio = stats.paired_ratios(records.assign(_all=""), ["_all"], OPTIMIZED_BF16, OPTIMIZED_FP32)
    if ratio.empty:
        return []
    r = ratio.iloc[0]
    name, shown = "optimized bf16 / fp32", stats.describe(r.center, r.low, r.high, "x")
    bf16 = records[records[col.VARIANT] == OPTIMIZED_BF16]
    if col.NATIVE_BF16 in bf16 and (bf16[col.NATIVE_BF16].astype(str) == "False").any():
        return [f"  {name:<28}{shown:>24}   bf16 (emulated): not judged"]
    target, how = bf16_target(records)
    return [f"  {name:<28}{shown:>24}   target >= {target:.2f}x ({how}): {verdict(r.low, r.high, target)}"]


def upstream_report(records: pd.DataFrame) -> str:
    """Our loops over facebookresearch/dlrm's own script, per machine, at dlrm-benchmark.

    `make compare-upstream` alternates them as separate processes, so runs pair by order: the
    i-th run of a loop with the i-th upstream run on the same machine.
    """
    here = records[records[col.STUDY].isin(UPSTREAM_STUDIES) & (records[col.CONFIG_NAME] == "dlrm-benchmark")].copy()
    older = here[col.LOOP].where(here[col.LOOP].isin(["reference", UPSTREAM]))  # records from before variants
    here[col.VARIANT] = here[col.VARIANT].fillna(older) if col.VARIANT in here else older
    here = here.sort_values(col.TIMESTAMP) if col.TIMESTAMP in here else here
    here[col.REPEAT] = here.groupby([col.MACHINE, col.VARIANT]).cumcount()
    here[stats.RUN] = "compare-upstream"  # each run is its own process (its own run id): rounds pair by order
    lines = []
    for machine, runs in here.groupby(col.MACHINE):
        if UPSTREAM not in set(runs[col.VARIANT]):
            continue
        lines.append(f"{machine}: dlrm-benchmark, ours over facebookresearch/dlrm (runs paired in order)")
        for variant, target in UPSTREAM_TARGETS:
            r = stats.paired_ratio(runs, variant, UPSTREAM)
            ours = runs[runs[col.VARIANT] == variant]
            if r.n and col.NATIVE_BF16 in ours and (ours[col.NATIVE_BF16].astype(str) == "False").any():
                lines.append(f"  {variant + ' / upstream':<28}{'bf16 (emulated): not judged':>24}")
            elif r.n:
                shown = stats.describe(r.center, r.low, r.high, "x")
                judged = f"target >= {target}x: {verdict(r.low, r.high, target)}" if target else "no target (faithful)"
                lines.append(f"  {variant + ' / upstream':<28}{shown:>24}   {judged}{ceiling(runs, variant)}")
    return "\n".join(lines) or "no facebookresearch/dlrm records beside ours (run make compare-upstream)"


def ceiling(runs: pd.DataFrame, variant: str) -> str:
    """What this machine allows the variant: upstream's ms/it over the variant's roofline bound (the
    medians of their runs), so a missed target reads against what the hardware could give."""
    ours = runs[runs[col.VARIANT] == variant]
    if col.ROOFLINE_MS not in ours or ours[col.ROOFLINE_MS].isna().all():
        return ""
    upstream_ms = runs[runs[col.VARIANT] == UPSTREAM][col.MS_MEDIAN].median()
    return f"; at most {upstream_ms / ours[col.ROOFLINE_MS].median():.2f}x by this machine's roofline"


def verdict(low: float, high: float, target: float) -> str:
    """Against a target to reach or exceed: met when the whole interval is, missed when none of it is."""
    if low != low:
        return "one repeat: no verdict"
    if low >= target:
        return "meets"
    if high < target:
        return "misses"
    return "inconclusive (the interval spans the target)"
