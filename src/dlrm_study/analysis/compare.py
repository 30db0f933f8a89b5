"""Side-by-side CPU comparison: reference, optimized fp32 / bf16 and torchrec, in one run.

The presets are the points and the loops the variants of one `measure.runner` schedule:
repeats, variants interleaved and rotated within each, one record per measurement. The
speedups are paired ratios within repeats, with their 95% intervals (`analysis.stats`).
"""

from collections.abc import Sequence

import pandas as pd

from dlrm_study import config
from dlrm_study.analysis import clusters, current, flags, physical, stats, views, wording
from dlrm_study.config.variants import (
    BF16_PAIR,
    OPTIMIZED_BF16,
    OPTIMIZED_FP32,
    REFERENCE,
    REGISTRY,
    TORCHREC,
    Variant,
)
from dlrm_study.perfmodel import physical as perfmodel_physical
from dlrm_study.records import columns as col

# (name, numerator, denominator, target): the samples/s ratios this study set itself as the optimized loop's targets.
SPEEDUPS = [
    ("optimized bf16 / reference", OPTIMIZED_BF16, REFERENCE, 4.0),
    ("optimized fp32 / reference", OPTIMIZED_FP32, REFERENCE, 2.2),
    ("optimized bf16 / torchrec", OPTIMIZED_BF16, TORCHREC, 2.5),
]
ROOFLINE_TARGET = 1.3  # time per iteration within 1.3x of the bound
# bf16 over fp32 (beside claim S3): at least 1.3x, or 85% of what the machine's measured rates allow
# (the fp32 bound over the bf16 bound), where the CPU has native bf16; emulated bf16 is not judged.
BF16_TARGET = 1.3
BF16_OF_BOUND = 0.85
# facebookresearch/dlrm's own script at dlrm-benchmark (`make compare-upstream`): ours over it.
UPSTREAM = "upstream-dlrm"
UPSTREAM_STUDIES = ("upstream", "reference-vs-upstream")  # the studies `make compare-upstream` writes
# Issue 40: optimized bf16 at least 6x on a CPU with native bf16, optimized fp32 at least 3x on any x86.
UPSTREAM_TARGETS = [(OPTIMIZED_BF16, 6.0), (OPTIMIZED_FP32, 3.0), (REFERENCE, None)]  # reference: faithful
JUMP = "outlier"  # `flags.with_flags`' flag of a run far from its point's other runs (here: its invocation's)


def variant_name(cfg: config.Config) -> str:
    """The variant label of a config (`records.Variant.of`): a registered name where one describes it."""
    return Variant.of(cfg).name


def report(records: Sequence[dict[str, object]]) -> str:
    """Medians with 95% intervals, the paired speedups and roofline fractions against their targets."""
    frame = pd.DataFrame(records)
    rate = clusters.summarize(frame, [col.CONFIG_NAME, col.VARIANT]).set_index([col.CONFIG_NAME, col.VARIANT])
    ms = clusters.summarize(frame, [col.CONFIG_NAME, col.VARIANT], col.MS_MEDIAN).set_index(
        [col.CONFIG_NAME, col.VARIANT]
    )
    lines = []
    for preset in dict.fromkeys(frame[col.CONFIG_NAME]):
        lines.append(f"{preset}:")
        for variant in REGISTRY:
            if (preset, variant) in rate.index:
                r, m = rate.loc[(preset, variant)], ms.loc[(preset, variant)]
                line = f"  {variant:<16}{wording.describe(r.center, r.low, r.high, digits=0):>32} samples/s"
                line += f"   {m.center:9.1f} ms/it"
                if col.ROOFLINE_MS in frame:
                    mine = frame[(frame[col.CONFIG_NAME] == preset) & (frame[col.VARIANT] == variant)]
                    bound = mine[col.ROOFLINE_MS].median()
                    line += f"   roofline {bound:7.1f} ms"
                lines.append(line)
        here = frame[frame[col.CONFIG_NAME] == preset]
        for name, top, bottom, target in SPEEDUPS:
            ratio = clusters.paired_ratios(here, [col.CONFIG_NAME], top, bottom)
            if not ratio.empty:
                r = ratio.iloc[0]
                lines.append(
                    f"  {name:<28}{wording.describe(r.center, r.low, r.high, 'x'):>24}   "
                    f"target >= {target}x: {verdict(r.low, r.high, target)}"
                )
        lines += bf16_lines(here)
        for variant in BF16_PAIR:
            if (preset, variant) in ms.index and col.ROOFLINE_MS in here:
                rows = here[here[col.VARIANT] == variant]
                over = stats.interval(rows[col.MS_MEDIAN] / rows[col.ROOFLINE_MS])
                lines.append(
                    f"  {variant + ' time / bound':<28}{wording.describe(*over, 'x'):>24}   "
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
    ratio = clusters.paired_ratios(records.assign(_all=""), ["_all"], OPTIMIZED_BF16, OPTIMIZED_FP32)
    if ratio.empty:
        return []
    r = ratio.iloc[0]
    name, shown = "optimized bf16 / fp32", wording.describe(r.center, r.low, r.high, "x")
    bf16 = records[records[col.VARIANT] == OPTIMIZED_BF16]
    if col.NATIVE_BF16 in bf16 and (bf16[col.NATIVE_BF16].astype(str) == "False").any():
        return [f"  {name:<28}{shown:>24}   bf16 (emulated): not judged"]
    target, how = bf16_target(records)
    return [f"  {name:<28}{shown:>24}   target >= {target:.2f}x ({how}): {verdict(r.low, r.high, target)}"]


CODE = "invocation_code"


def upstream_report(records: pd.DataFrame, bounds: pd.DataFrame | None = None) -> str:
    """Our loops over facebookresearch/dlrm's own script, per machine and per code, at dlrm-benchmark; what the
    machine allows from its physical bound where `bounds` (records of `dlrm-study bound`) has one, else from
    the roofline the records carry.

    `make compare-upstream` alternates them as separate processes under one invocation id (`invocation`, set
    for every process it starts), so runs pair by order within one invocation: the i-th run of a loop with
    the i-th upstream run of the same machine, code (its loops' `code_fingerprint`s) and invocation. Codes are reported
    apart, newest first, never pooled; records without an invocation (older) are counted, not paired.
    """
    here = records[records[col.STUDY].isin(UPSTREAM_STUDIES) & (records[col.CONFIG_NAME] == "dlrm-benchmark")].copy()
    if bounds is not None:
        here = physical.beside(here, bounds)
    older = here[col.LOOP].where(here[col.LOOP].isin(["reference", UPSTREAM]))  # records from before variants
    here[col.VARIANT] = here[col.VARIANT].fillna(older) if col.VARIANT in here else older
    here = here.sort_values(col.TIMESTAMP) if col.TIMESTAMP in here else here
    here[col.CODE_FINGERPRINT] = current.fingerprints(here)  # code declared alike read as one
    for column in (col.INVOCATION, col.TIMESTAMP):
        here[column] = here[column].fillna("").astype(str) if column in here else ""
    lines = []
    for machine, runs in here.groupby(col.MACHINE):
        if UPSTREAM not in set(runs[col.VARIANT]):
            continue
        lines.append(f"{machine}: dlrm-benchmark, ours over facebookresearch/dlrm (paired in order per invocation)")
        invoked = runs[runs[col.INVOCATION] != ""].copy()
        # an invocation's code: its loops' fingerprints together (each loop has its own, `records.code_identity`)
        invoked[CODE] = invoked.groupby(col.INVOCATION)[col.CODE_FINGERPRINT].transform(
            lambda fps: " ".join(sorted(set(fps) - {""}))
        )
        codes = invoked.groupby(CODE)[col.TIMESTAMP].max().sort_values(ascending=False).index
        for code in codes:
            lines += code_lines(invoked[invoked[CODE] == code], code)
        unpaired = len(runs) - len(invoked)
        if unpaired:
            lines.append(f"  {unpaired} records without an invocation id (measured before compare-upstream named "
                         "its invocations): not paired")  # fmt: skip
    return "\n".join(lines) or "no facebookresearch/dlrm records beside ours (run make compare-upstream)"


def code_lines(runs: pd.DataFrame, code: str) -> list[str]:
    """One code's ratios: pairs formed only within an invocation (the i-th run of each, in order)."""
    runs = runs.assign(**{stats.RUN: runs[col.INVOCATION]})
    runs[col.REPEAT] = runs.groupby([col.INVOCATION, col.VARIANT]).cumcount()
    commits = sorted(set(runs[col.GIT_COMMIT].dropna().astype(str))) if col.GIT_COMMIT in runs else []
    at = f", commit {', '.join(c[:12] for c in commits)}" if commits else ""
    newest = runs[col.TIMESTAMP].max()[:10]
    head = f"  code {code or 'unrecorded'}{at}, newest {newest}: {runs[col.INVOCATION].nunique()} invocation(s)"
    lines = [head]
    marked = flags.with_flags(runs, col.MS_MEDIAN)  # every loop's jumps, once for the code's three ratios
    for variant, target in UPSTREAM_TARGETS:
        seen = upstream_views(marked, variant)
        r = seen.all
        ours = runs[runs[col.VARIANT] == variant]
        if r.n and col.NATIVE_BF16 in ours and (ours[col.NATIVE_BF16].astype(str) == "False").any():
            lines.append(f"    {variant + ' / upstream':<28}{'bf16 (emulated): not judged':>24}")
        elif r.n:
            shown = wording.describe(r.center, r.low, r.high, "x")
            judged = f"target >= {target}x: {verdict(r.low, r.high, target)}" if target else "no target (faithful)"
            judged += f", {r.n} pairs{ceiling(runs, variant, target)}"
            lines.append(f"    {variant + ' / upstream':<28}{shown:>24}   {judged}")
            lines += flagged_lines(seen, f"{variant} / upstream", target)
            lines += newest_lines(marked, variant, target, seen.all.n)
    return lines


def newest_lines(marked: pd.DataFrame, variant: str, target: float | None, pooled: int) -> list[str]:
    """Where a code's `pooled` pairs come from several invocations, the newest alone, and without its flagged
    pairs. The issue's targets are read side by side in one invocation, whose pairs are each two processes of
    their own; the pooled interval above takes each invocation as one cluster, so two invocations give it one
    degree of freedom. A verdict word needs `stats.MIN_PAIRS` pairs. Named apart from the pooled ratio (one
    number per quantity)."""
    newest = marked.groupby(col.INVOCATION)[col.TIMESTAMP].max().idxmax()  # ISO timestamps: text order is time
    seen = upstream_views(marked[marked[col.INVOCATION] == newest], variant)
    r = seen.all
    if not r.n or r.n == pooled:
        return []  # no pair of its own, or every pair is its own: the pooled line above says it already
    said = f"      the newest invocation alone ({wording.count(r.n, 'pair')}): {variant} / upstream "
    said += wording.describe(r.center, r.low, r.high, "x")
    if target:
        said += f", {wording.too_few(r.n, 'pairs') or verdict(r.low, r.high, target)}"
    return [said, *flagged_lines(seen, f"the newest invocation's {variant} / upstream", target, indent=8)]


def upstream_views(marked: pd.DataFrame, variant: str) -> views.Views:
    """`variant` over facebookresearch/dlrm, over every pair and over the pairs no flag doubts. A pair's two
    members are separate processes minutes apart, so a slow window of a shared host rarely hits both and does not
    cancel in the ratio: beside `flags.pair_flags`' reasons, a pair is in doubt where either member's step time
    lies far from that loop's other runs in the invocation (`marked`: the runs through `flags.with_flags` by
    ms/it, whose outlier flag says so)."""
    found = stats.pairs(marked, variant, UPSTREAM)
    members = zip(found["flags_variant"], found["flags_baseline"], strict=True)
    jumped = [flags.has(a, {JUMP}) or flags.has(b, {JUMP}) for a, b in members]
    return views.Views.of_pairs(found, also=pd.Series(jumped, index=found.index, dtype=bool))


def flagged_lines(seen: views.Views, name: str, target: float | None, indent: int = 6) -> list[str]:
    """What the flagged pairs change: the ratio without them (and its word against the target), or that too few
    are left to tell; named as the line above it (`name`: one number per quantity)."""
    if not seen.flagged:
        return []
    why = "a step time or a ratio far from its invocation's others, or steps spread"
    flagged = wording.count(seen.flagged, "flagged pair")
    head = f"{' ' * indent}without its {flagged} of {seen.all.n} ({why}): {name}"
    if seen.clean is None:
        return [f"{head} not checked, fewer than {views.MIN_CLEAN} pairs left"]
    c = seen.clean
    said = f"{head} {wording.describe(c.center, c.low, c.high, 'x')}"
    return [said + (f", {verdict(c.low, c.high, target)}" if target else "")]


def ceiling(runs: pd.DataFrame, variant: str, target: float | None = None) -> str:
    """What this machine allows the variant: upstream's ms/it over the variant's bound (the medians of their
    runs), so a missed target reads against what the hardware could give; with a target, the share of the bound
    it needs beside the share the step reaches (bound over ms, per run). The physical bound in sequence where the
    machine has one (and, beside it, the overlapped one), else the roofline of library rates the records carry."""
    ours = runs[runs[col.VARIANT] == variant]
    column, name = bound_of(ours)
    if not column:
        return ""
    upstream_ms = runs[runs[col.VARIANT] == UPSTREAM][col.MS_MEDIAN].median()
    allowed = upstream_ms / ours[column].median()
    said = f"; at most {allowed:.2f}x by this machine's {name}"
    if column == OVERLAPPABLE[0]:
        said += f" ({upstream_ms / ours[OVERLAPPABLE[1]].median():.2f}x overlapped)"
    if not target:
        return said
    reached = wording.describe(*stats.interval(ours[column] / ours[col.MS_MEDIAN]), percent=True)
    if target > allowed:
        return f"{said}: the target is beyond this machine's bound; the step runs at {reached} of it"
    return f"{said}: the target needs {target / allowed:.0%} of the bound, the step runs at {reached} of it"


OVERLAPPABLE = (perfmodel_physical.SEQUENTIAL, perfmodel_physical.OVERLAPPED)


def bound_of(records: pd.DataFrame) -> tuple[str, str]:
    """The step bound a variant's records are read against, and its name ("" where they have none)."""
    for column, name in ((OVERLAPPABLE[0], "physical bound in sequence"), (col.ROOFLINE_MS, "roofline")):
        if column in records and records[column].notna().any():
            return column, name
    return "", ""


def verdict(low: float, high: float, target: float) -> str:
    """Against a target to reach or exceed: met when the whole interval is, missed when none of it is."""
    if low != low:
        return "one repeat: no verdict"
    if low >= target:
        return "meets"
    if high < target:
        return "misses"
    return "inconclusive (the interval spans the target)"
