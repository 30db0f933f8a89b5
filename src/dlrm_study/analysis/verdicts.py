"""The frozen claim rules (docs/claims.md), applied: a verdict per claim and machine.

Outcomes are symmetric: **reproduced** / **not reproduced** when the evidence lies wholly on one
side of the claim's threshold, **inconclusive** when it spans it, **fragile** when all repeats
and the flagged-removed repeats give different outcomes (both are shown), **too few repeats**
when the evidence has fewer than `stats.MIN_PAIRS` pairs; and **not measurable here**, **not
yet measured**, **unrecorded machine** (records that never said their ISA: not judged).

Every rule reads one machine's records only, and pairs within one run of it; nothing here
depends on the machine running this code. The thresholds below are the rules' numbers; their
text, and the hash stored in every record measured under them, is docs/claims.md's.
"""

import dataclasses
import math

import pandas as pd

from dlrm_study.analysis import baseline as old_stack
from dlrm_study.analysis import cpu as cpu_analysis
from dlrm_study.analysis import scaling as scaling_analysis
from dlrm_study.analysis import stats
from dlrm_study.analysis.evidence import H1_KNOBS, Evidence
from dlrm_study.analysis.sensitivity import gpu_over_cpu_pairs
from dlrm_study.config.variants import (
    BF16_PAIR,
    GPU_CACHED,
    GPU_HBM,
    GPU_HOST,
    GPU_UVM,
    OPTIMIZED_BF16,
    OPTIMIZED_FP32,
    REFERENCE,
)
from dlrm_study.records import Machine
from dlrm_study.records import columns as col
from dlrm_study.studies import baseline
from dlrm_study.studies.sensitivity import KNOBS

CLAIMS = {
    "H1": "GPU throughput depends strongly on the model's shape",
    "H2": "the GPU's advantage grows with the dense part",
    "H3": "the GPU's advantage shrinks as the sparse part grows",
    "H4": "host / remote tables cost throughput; a hot-row cache recovers most",
    "S1": "optimizing every operator gives a large single-socket speedup (110x in 2020)",
    "S2": "in the reference, embedding backward and update dominate",
    "S3": "BF16 Split-SGD trains up to 1.8x faster than FP32, same accuracy",
    "S4": "hybrid parallelism scales efficiently to 64 sockets",
}
H1_FACTOR = 1.5  # "strongly": a model-shape knob moves GPU samples/s by at least this factor
H4_RECOVERY = 0.5  # "most": the cache wins back more than half of what the best off-GPU placement loses
S1_FACTOR = 110.0
S3_FACTOR = 1.8  # "up to 1.8x": drawn as the claim's line; the rule asks bf16 to be faster, not 1.8x
S2_SHARE = 0.5
S3_AUC_GAP = 0.002
S3_SEEDS = 3  # held-out AUC over at least this many seeds
CPU_LOOPS = BF16_PAIR


@dataclasses.dataclass(frozen=True)
class Verdict:
    status: str
    evidence: str

    def cell(self) -> str:
        return f"**{self.status}**: {self.evidence}" if self.evidence else f"**{self.status}**"


def verdicts(evidence: Evidence) -> dict[str, dict[str, Verdict]]:
    """claim -> machine -> verdict, for every machine with records."""
    return {claim: {m: judge(claim, evidence.of(m), m) for m in evidence.machines()} for claim in CLAIMS}


def judge(claim: str, evidence: Evidence, machine: str) -> Verdict:
    """One claim on one machine's evidence: with all repeats and without the flagged ones."""
    if not Machine.parse(machine).recorded:
        return Verdict("unrecorded machine", "its records never said its ISA: listed, not judged")
    every, clean = (RULES[claim](evidence, machine, drop_flagged) for drop_flagged in (False, True))
    if every.status == clean.status:
        return every
    return Verdict(
        "fragile",
        f"all repeats: {every.status} ({every.evidence}); flagged repeats removed: {clean.status} ({clean.evidence})",
    )


def view(frame: pd.DataFrame, drop_flagged: bool, quantity: str = "throughput") -> pd.DataFrame:
    """All repeats, or the flagged ones removed."""
    if frame.empty:
        return frame
    return stats.without_flagged(frame, quantity)[0] if drop_flagged else stats.with_flags(frame)


def enough(n: int) -> bool:
    return n >= stats.MIN_PAIRS


def few(n: int, what: str = "pairs") -> Verdict:
    return Verdict("too few repeats", f"{n} {what} < {stats.MIN_PAIRS}")


def side(low: float, high: float, threshold: float) -> str:
    """reproduced above the threshold, not reproduced below it, inconclusive across it."""
    if low != low:
        return "inconclusive"
    if low > threshold:
        return "reproduced"
    if high < threshold:
        return "not reproduced"
    return "inconclusive"


def ratio_text(r: stats.Ratio, unit: str = "x") -> str:
    if not r.n:
        return "not paired (0 pairs)"
    return f"{stats.describe(r.center, r.low, r.high, unit)} ({r.n} pairs)"


# --- H1-H4: GPU claims ----------------------------------------------------------------------------


def gpu_early(evidence: Evidence, machine: str) -> Verdict | None:
    """The verdict where the machine cannot test a GPU claim or has no GPU records; None where it can."""
    if not Machine.parse(machine).has_gpu:
        return Verdict("not measurable here", "no GPU")
    if evidence.gpu.empty:
        return Verdict("not yet measured", "no GPU records of this machine")
    return None


def h1(evidence: Evidence, machine: str, drop_flagged: bool) -> Verdict:
    """Some model-shape knob moves gpu-hbm samples/s by >= H1_FACTOR between its ends, paired in runs."""
    if (early := gpu_early(evidence, machine)) is not None:
        return early
    effects = {}
    for knob in H1_KNOBS:
        frame = view(evidence.gpu_knobs.get(knob, pd.DataFrame()), drop_flagged)
        if not frame.empty:
            effects[knob] = stats.paired_ratio(frame, frame["x"].max(), frame["x"].min(), between="x")
    judged = {k: r for k, r in effects.items() if enough(r.n)}
    text = "; ".join(f"{KNOBS[k][2]} {ratio_text(r)}" for k, r in effects.items()) or "no knob sweeps"
    text = f"gpu-hbm samples/s between each knob's ends, paired within runs: {text}; threshold {H1_FACTOR}x"
    if not judged:
        most = max((r.n for r in effects.values()), default=0)
        return Verdict("too few repeats", f"{text} (no knob with {stats.MIN_PAIRS} pairs; at most {most})")

    def factor(r: stats.Ratio) -> tuple[float, float]:  # the effect as a factor >= 1, either way
        return (1 / r.high, 1 / r.low) if r.center < 1 else (r.low, r.high)

    if any(factor(r)[0] > H1_FACTOR for r in judged.values()):
        return Verdict("reproduced", text)
    if len(judged) == len(H1_KNOBS) and all(factor(r)[1] < H1_FACTOR for r in judged.values()):
        return Verdict("not reproduced", text)
    return Verdict("inconclusive", text)


def grid_changes(evidence: Evidence, drop_flagged: bool, along: str) -> tuple[list, str | None]:
    """GPU over the fastest CPU loop, paired per repeat within one run on this machine
    (`sensitivity.gpu_over_cpu_pairs`), and its change from the low to the high end of `along` at
    every value of the other axis: (other, Ratio) pairs."""
    ratio, best = gpu_over_cpu_pairs(view(evidence.gpu_grid, drop_flagged))
    if ratio.empty:
        return [], best
    other = "tables" if along == "model.dense_features" else "model.dense_features"
    lo, hi = ratio[along].min(), ratio[along].max()
    changes = []
    for value, part in ratio.groupby(other):
        ends = part[part[along].isin([lo, hi])].assign(end=lambda f: f[along].map({lo: "lo", hi: "hi"}))
        changes.append((value, stats.paired_ratio(ends.assign(**{col.VARIANT: ends["end"]}), "hi", "lo", "ratio")))
    return changes, best


def grid_claim(evidence: Evidence, machine: str, drop_flagged: bool, along: str, grows: bool) -> Verdict:
    """H2 (along dense features, grows) and H3 (along tables, shrinks): the change of GPU/CPU between the
    axis's ends, at every value of the other axis, each interval on the claimed side."""
    if (early := gpu_early(evidence, machine)) is not None:
        return early
    changes, best = grid_changes(evidence, drop_flagged, along)
    if not changes:
        return Verdict("not yet measured", "needs the GPU host's CPU records of the grid, measured in the same run")
    name = "dense features" if along == "model.dense_features" else "tables"
    parts = "; ".join(f"at {v}: {ratio_text(r)}" for v, r in changes)
    text = f"change of GPU / {best} (same machine, paired within runs) from the fewest to the most {name}: {parts}"
    if not all(enough(r.n) for _, r in changes):
        return Verdict("too few repeats", text)
    outcomes = {side(r.low, r.high, 1.0) if grows else side(1 / r.high, 1 / r.low, 1.0) for _, r in changes}
    return Verdict(outcomes.pop() if len(outcomes) == 1 else "inconclusive", text)


def h2(evidence: Evidence, machine: str, drop_flagged: bool) -> Verdict:
    return grid_claim(evidence, machine, drop_flagged, "model.dense_features", grows=True)


def h3(evidence: Evidence, machine: str, drop_flagged: bool) -> Verdict:
    return grid_claim(evidence, machine, drop_flagged, "tables", grows=False)


def h4(evidence: Evidence, machine: str, drop_flagged: bool) -> Verdict:
    """Off-GPU tables (host, uvm) cost throughput, and the cache wins back most of what the better of them loses."""
    if not Machine.parse(machine).has_gpu:
        remote = view(evidence.remote, drop_flagged)
        text = "no GPU for the placements"
        if not remote.empty:
            text += f"; remote tables over local tables (a CPU parameter server): {ratio_text(stats.paired_ratio(remote, 'remote', 'local'))}"  # noqa: E501
        return Verdict("not measurable here", text)
    if (early := gpu_early(evidence, machine)) is not None:
        return early
    frame = view(evidence.gpu_placements, drop_flagged)
    off = {"host": GPU_HOST, "uvm": GPU_UVM, "cached": GPU_CACHED}
    ratios = {where: stats.paired_ratio(frame, name, GPU_HBM) for where, name in off.items()}
    if not all(r.n for r in ratios.values()):
        return Verdict("not yet measured", "no GPU placement repeat pairs up with hbm")
    text = "mlperf-scaled, Zipf 1.05, 10% of rows cached, over hbm (paired): " + ", ".join(
        f"{name} {ratio_text(r)}" for name, r in ratios.items()
    )
    if not all(enough(r.n) for r in ratios.values()):
        return Verdict("too few repeats", text)
    best = max(ratios["host"], ratios["uvm"], key=lambda r: r.center)  # the cheaper way off the GPU
    cached = ratios["cached"]

    def needed(off: float) -> float:  # cached/hbm that wins back H4_RECOVERY of what `off` loses
        return off + H4_RECOVERY * (1 - off)

    if best.high < 1 and cached.low > needed(best.high):
        return Verdict("reproduced", text)
    if best.low > 1 or cached.high < needed(best.low):
        return Verdict("not reproduced", text)
    return Verdict("inconclusive", text)


# --- S1-S4: CPU claims ----------------------------------------------------------------------------


def s1(evidence: Evidence, machine: str, drop_flagged: bool) -> Verdict:
    """The faster optimized loop over the 2020 reference step (else today's reference), against 110x."""
    old = evidence.baseline
    old = old[old[col.CONFIG_NAME] == "dlrm-benchmark"] if not old.empty else old
    if not old.empty:
        records, against = old[old[col.THREADS] == old[col.THREADS].max()], baseline.OLD
        what = "the 2020 reference step on torch 1.5.1"
    else:
        loops = evidence.cpu_loops
        records = loops[loops[col.CONFIG_NAME] == "dlrm-benchmark"] if not loops.empty else loops
        against, what = REFERENCE, "today's PyTorch reference"
    if records.empty:
        return Verdict("not yet measured", "")
    frame = view(records, drop_flagged)
    ratios = {v: stats.paired_ratio(frame, v, against) for v in CPU_LOOPS}
    paired = [v for v in CPU_LOOPS if ratios[v].n]
    if not paired:
        return Verdict("too few repeats", "no pair of repeats on dlrm-benchmark")
    best = max(paired, key=lambda v: ratios[v].center)
    r = ratios[best]
    threads = "/".join(str(t) for t in sorted(records[col.THREADS].dropna().astype(int).unique()))
    text = f"{best} over {what}, dlrm-benchmark, {threads} threads: {ratio_text(r)}, against {S1_FACTOR:.0f}x"
    p = old_stack.projection(records, "dlrm-benchmark") if against == baseline.OLD else None
    if p:
        text += f"; projected (a model, not measured) to {p['cores']} cores: {p['projected']:.0f}x"
    if not enough(r.n):
        return Verdict("too few repeats", text)
    return Verdict(side(r.low, r.high, S1_FACTOR - 1e-9), text)


def s2(evidence: Evidence, machine: str, drop_flagged: bool) -> Verdict:
    """The share of the reference's profiled dlrm-benchmark iteration in embedding backward + update, against 50%."""
    loops = evidence.cpu_loops
    ref = (
        loops[(loops[col.VARIANT] == REFERENCE) & (loops[col.CONFIG_NAME] == "dlrm-benchmark")]
        if not loops.empty
        else loops
    )
    ref = ref.dropna(subset=[col.op_column("embedding_backward_update")]) if not ref.empty else ref
    if ref.empty:
        return Verdict("not yet measured", "")
    frame = view(ref, drop_flagged, "breakdown")
    if frame.empty:
        return few(0, "repeats")
    s = cpu_analysis.embedding_share(frame).iloc[0]
    f = cpu_analysis.embedding_share(frame, ("embedding_forward",)).iloc[0]
    text = (
        f"embedding backward + update: {stats.describe(s.center, s.low, s.high, percent=True)} of the reference's "
        f"profiled dlrm-benchmark iteration ({int(s.n)} repeats; forward beside it: "
        f"{stats.describe(f.center, f.low, f.high, percent=True)}), threshold {S2_SHARE:.0%}"
    )
    if not enough(int(s.n)):
        return Verdict("too few repeats", text)
    return Verdict(side(s.low, s.high, S2_SHARE), text)


def auc_gap(convergence: pd.DataFrame) -> tuple[stats.Ratio | None, int]:
    """bf16's held-out AUC minus fp32's, per seed (an interval over seeds: mean +- t), and the seeds."""
    evals = convergence[convergence[col.KIND] == "eval"] if not convergence.empty else convergence
    if evals.empty:
        return None, 0
    seed = "train.seed" if "train.seed" in evals else col.REPEAT
    wide = evals.pivot_table(index=seed, columns=col.VARIANT, values=col.EVAL_AUC, aggfunc="first")
    if not {OPTIMIZED_BF16, OPTIMIZED_FP32} <= set(wide):
        return None, 0
    mean, low, high, n = stats.mean_interval(wide[OPTIMIZED_BF16] - wide[OPTIMIZED_FP32])
    return stats.Ratio(mean, low, high, n, math.nan), n


def s3(evidence: Evidence, machine: str, drop_flagged: bool) -> Verdict:
    """Per hardware class: bf16 over fp32 (faster on a preset) and held-out AUC within 0.002 over >= 3 seeds."""
    m = Machine.parse(machine)
    if m.native_bf16 is False:
        return Verdict("not measurable here", f"{m.bf16_class}: no avx512_bf16 or amx_bf16")
    loops = evidence.cpu_loops
    if loops.empty:
        return Verdict("not yet measured", m.bf16_class)
    frame = view(loops, drop_flagged)
    speed = {
        name: stats.paired_ratio(frame[frame[col.CONFIG_NAME] == name], OPTIMIZED_BF16, OPTIMIZED_FP32)
        for name in ("dlrm-benchmark", "mlperf-scaled")
    }
    parts = [f"{name} {ratio_text(r)}" for name, r in speed.items() if r.n]
    if not parts:
        return Verdict("not yet measured", f"{m.bf16_class}: no paired bf16 and fp32 repeats")
    gap, seeds = auc_gap(evidence.convergence)
    text = f"{m.bf16_class}; bf16 / fp32 samples/s: " + ", ".join(parts)
    if gap is not None:
        text += (
            f"; held-out AUC bf16 - fp32: {gap.center:+.4f}"
            + (f" [{gap.low:+.4f}, {gap.high:+.4f}]" if gap.low == gap.low else "")
            + f" ({seeds} seed(s), margin {S3_AUC_GAP})"
        )
    judged = [r for r in speed.values() if enough(r.n)]
    if not judged:
        return Verdict("too few repeats", text)
    if all(r.high < 1 for r in judged) and len(judged) == 2:
        return Verdict("not reproduced", text + ": slower on both")
    if gap is not None and seeds >= S3_SEEDS and (gap.low > S3_AUC_GAP or gap.high < -S3_AUC_GAP):
        return Verdict("not reproduced", text + ": accuracy differs")
    if gap is None or seeds < S3_SEEDS:
        return Verdict("too few repeats", text + f": accuracy needs {S3_SEEDS} seeds")
    faster = any(r.low > 1 for r in judged)
    same = gap.low >= -S3_AUC_GAP and gap.high <= S3_AUC_GAP
    return Verdict("reproduced" if faster and same else "inconclusive", text)


def s4(evidence: Evidence, machine: str, drop_flagged: bool) -> Verdict:
    records = view(evidence.scaling, drop_flagged)
    if records.empty:
        return Verdict("not yet measured", "")
    eff = scaling_analysis.measured_efficiency(records)
    text = (
        f"1 to 2 ranks on one machine: strong efficiency {stats.describe(*eff['strong_efficiency'], percent=True)}, "
        f"weak {stats.describe(*eff['weak_efficiency'], percent=True)}; 64 sockets only as a model's projection"
    )
    return Verdict("not measurable here", text)


RULES = {"H1": h1, "H2": h2, "H3": h3, "H4": h4, "S1": s1, "S2": s2, "S3": s3, "S4": s4}
