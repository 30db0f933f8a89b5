"""What `dlrm-study bench` prints of its records: each repeat, the summary with its interval, breakdown and bound."""

import statistics

import pandas as pd

from dlrm_study.analysis import flags as flagging
from dlrm_study.analysis import stats, wording
from dlrm_study.config import Precision
from dlrm_study.records import columns as col


def bench_summary(records: list[dict[str, object]], repeats: int, profile_steps: int) -> list[str]:
    """The lines `dlrm-study bench` prints after measuring: per repeat, then over the repeats."""
    first = records[0]
    lines = [
        f"{first[col.CONFIG_NAME]} / {first[col.VARIANT]} ({first[col.PRECISION_LABEL]}) on {first[col.MACHINE]}, "
        f"batch {first[col.BATCH_SIZE]}, {repeats} repeats of {first[col.STEPS]} steps"
    ]
    for r in records:
        flagged = f"   flagged: {r[col.FLAGS]}" if r[col.FLAGS] else ""
        lines.append(
            f"  repeat {r[col.REPEAT]}: {r[col.SAMPLES_PER_S]:>12,.0f} samples/s   {r[col.MS_MEDIAN]:.1f} ms/it median "
            f"(p10 {r[col.MS_P10]:.1f}, p90 {r[col.MS_P90]:.1f})   input {r[col.INPUT_MS_MEDIAN]:.1f} ms/batch{flagged}"
        )
    frame = flagging.with_flags(pd.DataFrame(records))
    center, low, high = stats.interval(frame[col.SAMPLES_PER_S])
    kind = " (95% interval, all repeats)" if low == low else ""
    excluded = int(flagging.flagged(frame).sum())
    note = f"; {excluded} of them flagged" if excluded else ""
    lines.append(f"  samples/s, median of repeats: {wording.describe(center, low, high, digits=0)}{kind}{note}")
    if first[col.PRECISION] == Precision.BF16 and first[col.NATIVE_BF16] is False:
        lines.append("  bf16 ran emulated: this CPU has no native bf16 (native_bf16=False in the records)")
    if profile_steps:
        lines.append(f"  per operator, ms/it ({profile_steps} profiled steps per repeat, median over repeats):")
        for name in col.OPERATORS:
            lines.append(f"    {name:<28}{statistics.median(r[col.op_column(name)] for r in records):10.2f}")
    if col.ROOFLINE_MS in first:
        bound = first[col.ROOFLINE_MS]
        achieved = stats.interval([bound / r[col.MS_MEDIAN] for r in records])
        lines.append(
            f"  roofline bound {bound:.1f} ms/it (embedding {first['roofline_embedding_ms']:.1f}, "
            f"MLP {first['roofline_mlp_ms']:.1f}): achieved {wording.describe(*achieved)} of it"
        )
    return lines
