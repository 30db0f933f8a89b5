"""The claim rules (docs/claims.md), applied: a verdict per claim and machine.

Outcomes are symmetric: **reproduced** / **not reproduced** when the evidence lies wholly on one side
of the claim's threshold, **inconclusive** when it spans it, **too few repeats** when the evidence has
fewer than `stats.MIN_PAIRS` pairs (or `S3_SEEDS` seeds); and **not measurable here**, **not yet
measured**, **unrecorded machine** (records that never said their ISA: not judged).

Every verdict is computed twice (`judge`): over every pair, which decides it, and over the pairs no
flag doubts, a sensitivity check: **fragile** where that second view (at least `views.MIN_CLEAN`
pairs in each comparison) reaches the opposite outcome, *robustness not assessable* where too few
pairs are unflagged. A rule that asks whether any of m comparisons holds takes each interval at
1 - 0.05 / m (`stats.family`). The records a verdict reads are one machine's, at its most threads,
and it counts every record of its studies that it did not use, by reason (`Use`).
"""

import collections
import dataclasses
import math

import pandas as pd

from dlrm_study.analysis import stats
from dlrm_study.analysis.baseline import projection
from dlrm_study.analysis.cpu import embedding_share
from dlrm_study.analysis.evidence import H1_KNOBS, Evidence
from dlrm_study.analysis.flags import flagged, pair_flags
from dlrm_study.analysis.readers import left_out
from dlrm_study.analysis.scaling import measured_efficiency
from dlrm_study.analysis.sensitivity import gpu_over_cpu_pairs
from dlrm_study.analysis.views import MIN_CLEAN, side
from dlrm_study.analysis.wording import describe
from dlrm_study.config.variants import GPU_CACHED, GPU_HBM, GPU_HOST, GPU_UVM, OPTIMIZED_BF16, OPTIMIZED_FP32, REFERENCE
from dlrm_study.records import Machine, provenance
from dlrm_study.records import columns as col
from dlrm_study.studies.baseline import OLD
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
H1_FACTOR = 1.5  # "strongly": a model-shape knob moves GPU samples/s by at least this factor, either way
H4_RECOVERY = 0.5  # "most": the cache wins back more than half of what host memory loses
S1_FACTOR = 110.0
S1_CORES = 28  # SC20's single socket (a 28-core Xeon): S1 is judged at that size or not at all
S2_SHARE = 0.5
S3_FACTOR = 1.8  # "up to 1.8x"
S3_MARGIN = 0.1  # bf16 reaches the claim when its interval lies above 1.8x less this margin (1.62x)
S3_AUC_GAP = 0.002
S3_SEEDS = 3  # held-out AUC over at least this many seeds
S3_PRESETS = ("dlrm-benchmark", "mlperf-scaled")
REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"
TOO_FEW, NOT_MEASURABLE, NOT_YET = "too few repeats", "not measurable here", "not yet measured"
NOT_ASSESSABLE = "not assessable"  # only in the flagged-removed view: fewer than MIN_CLEAN pairs left
OPPOSITE = {REPRODUCED: NOT_REPRODUCED, NOT_REPRODUCED: REPRODUCED}


@dataclasses.dataclass(frozen=True)
class Verdict:
    status: str
    evidence: str
    note: str = ""  # robustness and rules: said after the evidence
    # Records of the claim's studies this verdict did not use, by reason (the ledger lists them).
    left_out: dict[str, int] = dataclasses.field(default_factory=dict, compare=False)

    def cell(self) -> str:
        said = f"**{self.status}**: {self.evidence}" if self.evidence else f"**{self.status}**"
        return f"{said} ({self.note})" if self.note else said


class Lens:
    """How a rule reads its records: every pair (`clean` False) or the unflagged ones, and what it left out."""

    def __init__(self, clean: bool) -> None:
        self.clean = clean
        self.short = False  # some comparison had fewer than MIN_CLEAN unflagged pairs
        self.used: collections.Counter[str] = collections.Counter()
        self.dropped: collections.Counter[str] = collections.Counter()

    def keep(self, frame: pd.DataFrame, mask: pd.Series, reason: str) -> pd.DataFrame:
        """`frame[mask]`, counting the records left out under `reason`."""
        self.dropped[reason] += int((~mask).sum())
        return frame[mask]

    def ratio(self, found: pd.DataFrame, confidence: float = stats.CONFIDENCE) -> stats.Ratio:
        """The ratio over `stats.pairs`' rows: every pair, or the unflagged ones (NO_RATIO where too few)."""
        if self.clean and not found.empty:
            found = found[~pair_flags(found)]
            if len(found) < MIN_CLEAN:
                self.short = True
                return stats.NO_RATIO
        return stats.Ratio.of(list(found["ratio"]), confidence) if len(found) else stats.NO_RATIO

    def paired(self, records: pd.DataFrame, variant: object, baseline: object, between: str = col.VARIANT,
               confidence: float = stats.CONFIDENCE) -> stats.Ratio:  # fmt: skip
        return self.ratio(stats.pairs(records, variant, baseline, between=between), confidence)

    def enough(self, n: int) -> bool:
        """The all-pairs view's gate: MIN_PAIRS pairs (the unflagged view has none of its own)."""
        return self.clean or n >= stats.MIN_PAIRS


def verdicts(evidence: Evidence) -> dict[str, dict[str, Verdict]]:
    """claim -> machine -> verdict, for every machine with records."""
    return {claim: {m: judge(claim, evidence.of(m), m) for m in evidence.machines()} for claim in CLAIMS}


def judge(claim: str, evidence: Evidence, machine: str) -> Verdict:
    """One claim on one machine's evidence: decided over every pair, checked without the flagged ones."""
    if not Machine.parse(machine).recorded:
        return Verdict("unrecorded machine", "its records never said its ISA: listed, not judged")
    every = RULES[claim](evidence, machine, Lens(False))
    clean_lens = Lens(True)
    clean = RULES[claim](evidence, machine, clean_lens)
    notes = []
    if every.status in OPPOSITE:
        if clean_lens.short:
            notes.append("robustness not assessable: too few unflagged pairs")
        elif clean.status == OPPOSITE[every.status]:
            every = dataclasses.replace(every, status="fragile",
                                        evidence=f"over every pair {every.status} ({every.evidence}); without the "
                                        f"flagged pairs {clean.status} ({clean.evidence})")  # fmt: skip
    if predates(evidence, claim):
        notes.append("records measured before these rules")
    left = dict(collections.Counter(every.left_out) + collections.Counter(unused(evidence, claim, machine)))
    return dataclasses.replace(every, note="; ".join(filter(None, [every.note, *notes])), left_out=left)


CLAIM_FRAMES = {  # the evidence each claim reads (for the records it leaves out, and their rules)
    "H1": ("gpu_knobs",), "H2": ("gpu_grid",), "H3": ("gpu_grid",), "H4": ("gpu_placements", "remote"),
    "S1": ("baseline", "cpu_loops"), "S2": ("cpu_loops",), "S3": ("cpu_loops", "accuracy"), "S4": ("scaling",),
}  # fmt: skip


def claim_frames(evidence: Evidence, claim: str) -> list[pd.DataFrame]:
    frames = []
    for name in CLAIM_FRAMES[claim]:
        frames += list(evidence.gpu_knobs.values()) if name == "gpu_knobs" else [getattr(evidence, name)]
    return frames


def unused(evidence: Evidence, claim: str, machine: str) -> dict[str, int]:
    """What the readers of the claim's studies left out of this machine's records, by reason."""
    total: collections.Counter[str] = collections.Counter()
    for frame in claim_frames(evidence, claim):
        total.update(left_out(frame, machine))
    return dict(total)


def predates(evidence: Evidence, claim: str) -> bool:
    """Whether any record the claim reads was measured under other rules (or before rules were hashed)."""
    now = provenance.rules_hash()
    for frame in claim_frames(evidence, claim):
        if not frame.empty:
            hashes = frame[col.RULES_HASH].fillna("").astype(str) if col.RULES_HASH in frame else pd.Series([""])
            if (hashes != now).any():
                return True
    return False


def outcome(r: stats.Ratio, low: float, high: float | None = None) -> str:
    """reproduced above the threshold (or the band), not reproduced below it, inconclusive across it."""
    where = side(r, low, high)
    return {"above": REPRODUCED, "below": NOT_REPRODUCED}.get(where, INCONCLUSIVE)


def ratio_text(r: stats.Ratio, unit: str = "x") -> str:
    if not r.n:
        return "not paired (0 pairs)"
    return f"{describe(r.center, r.low, r.high, unit)} ({r.n} pairs)"


def with_left_out(verdict: Verdict, lens: Lens) -> Verdict:
    return dataclasses.replace(verdict, left_out=dict(lens.dropped))


def most_threads(frame: pd.DataFrame, lens: Lens) -> pd.DataFrame:
    """The records at the machine's most threads (a claim is judged at the machine's size)."""
    if frame.empty or col.THREADS not in frame:
        return frame
    most = frame[col.THREADS].astype(float).max()
    return lens.keep(frame, frame[col.THREADS].astype(float) == most, "at fewer threads than the machine's most")


# --- H1-H4: GPU claims ----------------------------------------------------------------------------


def gpu_early(evidence: Evidence, machine: str) -> Verdict | None:
    """The verdict where the machine cannot test a GPU claim or has no GPU records; None where it can."""
    if not Machine.parse(machine).has_gpu:
        return Verdict(NOT_MEASURABLE, "no GPU")
    if evidence.gpu.empty:
        return Verdict(NOT_YET, "no GPU records of this machine")
    return None


def h1(evidence: Evidence, machine: str, lens: Lens) -> Verdict:
    """Some model-shape knob moves gpu-hbm samples/s by more than H1_FACTOR between its ends (either way,
    intervals at 1 - 0.05/6); every knob within H1_FACTOR both ways refutes it."""
    if (early := gpu_early(evidence, machine)) is not None:
        return early
    family = stats.family(len(H1_KNOBS))
    effects, strict = {}, {}
    for knob in H1_KNOBS:
        frame = evidence.gpu_knobs.get(knob, pd.DataFrame())
        if not frame.empty:
            found = stats.pairs(frame, frame["x"].max(), frame["x"].min(), between="x")
            effects[knob], strict[knob] = lens.ratio(found), lens.ratio(found, family)
    judged = {k for k, r in effects.items() if r.n and lens.enough(r.n)}
    text = "; ".join(f"{KNOBS[k][2]} {ratio_text(r)}" for k, r in effects.items()) or "no knob sweeps"
    text = (f"gpu-hbm samples/s between each knob's ends, paired within runs: {text}; beyond {H1_FACTOR}x either "
            f"way at {family:.1%} each (6 knobs)")  # fmt: skip
    if not judged:
        most = max((r.n for r in effects.values()), default=0)
        return Verdict(TOO_FEW, f"{text} (no knob with {stats.MIN_PAIRS} pairs; at most {most})")
    if any(side(strict[k], 1 / H1_FACTOR, H1_FACTOR) in ("above", "below") for k in judged):
        return Verdict(REPRODUCED, text)
    if judged == set(H1_KNOBS) and all(side(effects[k], 1 / H1_FACTOR, H1_FACTOR) == "within" for k in judged):
        return Verdict(NOT_REPRODUCED, text)
    return Verdict(INCONCLUSIVE, text)


def grid_changes(evidence: Evidence, lens: Lens, along: str) -> tuple[list, str | None]:
    """GPU over the fastest CPU loop, paired per repeat within one run on this machine
    (`sensitivity.gpu_over_cpu_pairs`), and its change from the low to the high end of `along` at
    every value of the other axis, paired within runs: (other value, Ratio) pairs."""
    ratio, best = gpu_over_cpu_pairs(evidence.gpu_grid)
    if ratio.empty:
        return [], best
    other = "tables" if along == "model.dense_features" else "model.dense_features"
    lo, hi = ratio[along].min(), ratio[along].max()
    changes = []
    for value, part in ratio.groupby(other):
        ends = part[part[along].isin([lo, hi])].assign(end=lambda f: f[along].map({lo: "lo", hi: "hi"}))
        ends = ends.assign(**{col.VARIANT: ends["end"], col.SAMPLES_PER_S: ends["ratio"]})
        changes.append((value, lens.paired(ends.drop(columns="ratio"), "hi", "lo")))
    return changes, best


def grid_claim(evidence: Evidence, machine: str, lens: Lens, along: str, grows: bool) -> Verdict:
    """H2 (along dense features, grows) and H3 (along tables, shrinks): the change of GPU/CPU between the
    axis's ends, at every value of the other axis, each interval on the claimed side."""
    if (early := gpu_early(evidence, machine)) is not None:
        return early
    changes, best = grid_changes(evidence, lens, along)
    if not changes:
        return Verdict(NOT_YET, "needs the GPU host's CPU records of the grid, measured in the same run")
    name = "dense features" if along == "model.dense_features" else "tables"
    parts = "; ".join(f"at {v}: {ratio_text(r)}" for v, r in changes)
    text = f"change of GPU / {best} (same machine, paired within runs) from the fewest to the most {name}: {parts}"
    if not all(r.n and lens.enough(r.n) for _, r in changes):
        return Verdict(TOO_FEW, text)
    sides = {side(r, 1.0) for _, r in changes}
    if sides == {"above" if grows else "below"}:
        return Verdict(REPRODUCED, text)
    if sides == {"below" if grows else "above"}:
        return Verdict(NOT_REPRODUCED, text)
    return Verdict(INCONCLUSIVE, text)


def h2(evidence: Evidence, machine: str, lens: Lens) -> Verdict:
    return grid_claim(evidence, machine, lens, "model.dense_features", grows=True)


def h3(evidence: Evidence, machine: str, lens: Lens) -> Verdict:
    return grid_claim(evidence, machine, lens, "tables", grows=False)


def needed(off: float) -> float:
    """cached/hbm that wins back H4_RECOVERY of what a placement at `off` of hbm loses."""
    return off + H4_RECOVERY * (1 - off)


def h4(evidence: Evidence, machine: str, lens: Lens) -> Verdict:
    """Host-memory tables cost throughput against hbm, and the cache of hot rows wins back most of it. The
    refutation is an OR of two tests, each at 1 - 0.05/2."""
    if not Machine.parse(machine).has_gpu:
        text = "no GPU for the placements"
        if not evidence.remote.empty:
            remote = ratio_text(lens.paired(evidence.remote, "remote", "local"))
            text += f"; remote tables over local tables (a CPU parameter server): {remote}"
        return Verdict(NOT_MEASURABLE, text)
    if (early := gpu_early(evidence, machine)) is not None:
        return early
    frame = evidence.gpu_placements
    found = {name: stats.pairs(frame, variant, GPU_HBM) for name, variant in
             (("host", GPU_HOST), ("uvm", GPU_UVM), ("cached", GPU_CACHED))}  # fmt: skip
    ratios = {name: lens.ratio(f) for name, f in found.items()}
    if not (ratios["host"].n and ratios["cached"].n):
        return Verdict(NOT_YET, "no host or cached repeat pairs up with hbm")
    text = "mlperf-scaled, Zipf 1.05, 10% of rows cached, over hbm (paired): " + ", ".join(
        f"{name} {ratio_text(r)}" for name, r in ratios.items()
    )
    text += f"; cached must exceed needed(host) = host + {H4_RECOVERY} (1 - host)"
    if not all(lens.enough(ratios[name].n) for name in ("host", "cached")):
        return Verdict(TOO_FEW, text)
    host, cached = ratios["host"], ratios["cached"]
    if host.high < 1 and cached.low > needed(host.high):
        return Verdict(REPRODUCED, text)
    host2, cached2 = lens.ratio(found["host"], stats.family(2)), lens.ratio(found["cached"], stats.family(2))
    if host2.low > 1 or cached2.high < needed(host2.low):
        return Verdict(NOT_REPRODUCED, text)
    return Verdict(INCONCLUSIVE, text)


# --- S1-S4: CPU claims ----------------------------------------------------------------------------


def s1(evidence: Evidence, machine: str, lens: Lens) -> Verdict:
    """The optimized loop over the 2020 reference step at a full socket's cores (S1_CORES): below that, not
    measurable here, with what was measured (the 2020 stack to today's, optimization, threads) and any
    projection, labelled."""
    m = Machine.parse(machine)
    loop = OPTIMIZED_BF16 if m.native_bf16 else OPTIMIZED_FP32  # the one comparison the rule reads
    old = evidence.baseline
    old = lens.keep(old, old[col.CONFIG_NAME] == "dlrm-benchmark", "of other presets") if not old.empty else old
    loops = evidence.cpu_loops
    if not loops.empty:
        loops = lens.keep(loops, loops[col.CONFIG_NAME] == "dlrm-benchmark", "of other presets")
        loops = most_threads(loops, lens)
    parts = []
    if not old.empty:
        for threads, group in old.groupby(col.THREADS):
            today = lens.paired(group, REFERENCE, OLD)
            ours = lens.paired(group, loop, OLD)
            parts.append(f"at {int(threads)} thread(s): today's reference {ratio_text(today)} and {loop} "
                         f"{ratio_text(ours)} over the 2020 step")  # fmt: skip
        if p := projection(old, "dlrm-benchmark", S1_CORES):
            parts.append(f"projected (a model, not measured) to {p['cores']} cores: {p['projected']:.0f}x")
    if not loops.empty:
        parts.append(f"{loop} over today's reference at {int(loops[col.THREADS].max())} threads: "
                     f"{ratio_text(lens.paired(loops, loop, REFERENCE))}")  # fmt: skip
    if old.empty and loops.empty:
        return with_left_out(Verdict(NOT_YET, ""), lens)
    if m.cpus < S1_CORES or old.empty:
        why = f"{m.cpus} logical CPUs, the claim is of a {S1_CORES}-core socket against the 2020 step"
        return with_left_out(Verdict(NOT_MEASURABLE, f"{why}; measured: " + "; ".join(parts)), lens)
    at_most = most_threads(old, lens)
    r = lens.paired(at_most, loop, OLD)
    text = f"{loop} over the 2020 step at {int(at_most[col.THREADS].max())} threads: {ratio_text(r)}, against 110x"
    if not lens.enough(r.n):
        return with_left_out(Verdict(TOO_FEW, text), lens)
    return with_left_out(Verdict(outcome(r, S1_FACTOR), text), lens)


def s2(evidence: Evidence, machine: str, lens: Lens) -> Verdict:
    """The share of the reference's profiled dlrm-benchmark iteration in embedding backward + update, against 50%."""
    loops = evidence.cpu_loops
    if loops.empty:
        return Verdict(NOT_YET, "")
    ref = lens.keep(loops, (loops[col.VARIANT] == REFERENCE) & (loops[col.CONFIG_NAME] == "dlrm-benchmark"),
                    "of other loops or presets")  # fmt: skip
    update = col.op_column("embedding_backward_update")
    profiled = ref[update].notna() if update in ref else pd.Series(False, index=ref.index)
    ref = lens.keep(ref, profiled, "without a breakdown")
    ref = most_threads(ref, lens)
    if ref.empty:
        return with_left_out(Verdict(NOT_YET, ""), lens)
    if lens.clean:
        doubt = flagged(ref, "breakdown")
        if (~doubt).sum() < MIN_CLEAN:
            lens.short = True
            return with_left_out(Verdict(NOT_ASSESSABLE, ""), lens)
        ref = ref[~doubt]
    s = embedding_share(ref).iloc[0]
    f = embedding_share(ref, ("embedding_forward",)).iloc[0]
    text = (
        f"embedding backward + update: {describe(s.center, s.low, s.high, percent=True)} of the reference's "
        f"profiled dlrm-benchmark iteration ({int(s.n)} repeats at {int(ref[col.THREADS].max())} threads; forward "
        f"beside it: {describe(f.center, f.low, f.high, percent=True)}), threshold {S2_SHARE:.0%}"
    )
    if not lens.enough(int(s.n)):
        return with_left_out(Verdict(TOO_FEW, text), lens)
    return with_left_out(Verdict(outcome(stats.Ratio(s.center, s.low, s.high, int(s.n), s.half_width), S2_SHARE),
                                 text), lens)  # fmt: skip


def auc_gap(accuracy: pd.DataFrame) -> tuple[stats.Ratio | None, int, list[str]]:
    """bf16's held-out AUC minus fp32's, paired by seed within a run, on each timed preset; the gaps pooled
    (a t interval over them), how many seeds, and the presets they came from."""
    evals = accuracy[accuracy[col.KIND] == "eval"] if not accuracy.empty else accuracy
    if evals.empty:
        return None, 0, []
    index = [col.MACHINE, col.RUN_ID, col.CONFIG_NAME, "train.seed"]
    wide = evals.pivot_table(index=index, columns=col.VARIANT, values=col.EVAL_AUC, aggfunc="first")
    if not {OPTIMIZED_BF16, OPTIMIZED_FP32} <= set(wide):
        return None, 0, []
    gaps = (wide[OPTIMIZED_BF16] - wide[OPTIMIZED_FP32]).dropna()
    mean, low, high, n = stats.mean_interval(gaps)
    presets = sorted(set(gaps.index.get_level_values(col.CONFIG_NAME)))
    return stats.Ratio(mean, low, high, n, math.nan), n, presets


def s3(evidence: Evidence, machine: str, lens: Lens) -> Verdict:
    """Per hardware class: bf16 over fp32 reaches 1.8x less the margin on a timed preset (intervals at
    1 - 0.05/2), and the held-out AUC of the timed presets is the same within 0.002 over >= 3 seeds."""
    m = Machine.parse(machine)
    if m.native_bf16 is False:
        return Verdict(NOT_MEASURABLE, f"{m.bf16_class}: no avx512_bf16 or amx_bf16")
    loops = evidence.cpu_loops
    if loops.empty:
        return Verdict(NOT_YET, m.bf16_class)
    loops = lens.keep(loops, loops[col.CONFIG_NAME].isin(S3_PRESETS), "of other presets")
    loops = lens.keep(loops, loops[col.VARIANT].isin([OPTIMIZED_BF16, OPTIMIZED_FP32]), "of other loops")
    loops = most_threads(loops, lens)
    family, reach = stats.family(len(S3_PRESETS)), S3_FACTOR * (1 - S3_MARGIN)
    speed = {name: lens.paired(loops[loops[col.CONFIG_NAME] == name], OPTIMIZED_BF16, OPTIMIZED_FP32, confidence=family)
             for name in S3_PRESETS}  # fmt: skip
    parts = [f"{name} {ratio_text(r)}" for name, r in speed.items() if r.n]
    if not parts:
        return with_left_out(Verdict(NOT_YET, f"{m.bf16_class}: no paired bf16 and fp32 repeats"), lens)
    gap, seeds, presets = auc_gap(evidence.accuracy)
    text = f"{m.bf16_class}; bf16 / fp32 samples/s at {family:.1%} each: " + ", ".join(parts)
    text += f"; reaches the claim above {reach:.2f}x (1.8x less {S3_MARGIN:.0%})"
    if gap is not None:
        shown = f" [{gap.low:+.4f}, {gap.high:+.4f}]" if gap.low == gap.low else ""
        text += (f"; held-out AUC bf16 - fp32 on {', '.join(presets)}: {gap.center:+.4f}{shown} ({seeds} seeds, "
                 f"margin {S3_AUC_GAP})")  # fmt: skip
    judged = [r for r in speed.values() if r.n and lens.enough(r.n)]
    if not judged:
        return with_left_out(Verdict(TOO_FEW, text), lens)
    fast = any(r.low > reach for r in judged)
    short = len(judged) == len(S3_PRESETS) and all(r.high < reach for r in judged)
    same = gap is not None and seeds >= S3_SEEDS and gap.low >= -S3_AUC_GAP and gap.high <= S3_AUC_GAP
    differs = gap is not None and seeds >= S3_SEEDS and (gap.low > S3_AUC_GAP or gap.high < -S3_AUC_GAP)
    if short:
        faster = all(r.low > 1 for r in judged)
        return with_left_out(Verdict(NOT_REPRODUCED, text + (": faster but short of 1.8x" if faster else
                                                             ": not faster enough to reach 1.8x")), lens)  # fmt: skip
    if differs:
        return with_left_out(Verdict(NOT_REPRODUCED, text + ": accuracy differs"), lens)
    if gap is None or seeds < S3_SEEDS:
        return with_left_out(Verdict(TOO_FEW, text + f": accuracy on the timed presets needs {S3_SEEDS} seeds"), lens)
    return with_left_out(Verdict(REPRODUCED if fast and same else INCONCLUSIVE, text), lens)


def s4(evidence: Evidence, machine: str, lens: Lens) -> Verdict:
    records = evidence.scaling
    if records.empty:
        return Verdict(NOT_YET, "")
    eff = measured_efficiency(records)
    text = (
        f"1 to 2 ranks on one machine: strong efficiency {describe(*eff['strong_efficiency'], percent=True)}, "
        f"weak {describe(*eff['weak_efficiency'], percent=True)}; 64 sockets only as a model's projection"
    )
    return Verdict(NOT_MEASURABLE, text)


RULES = {"H1": h1, "H2": h2, "H3": h3, "H4": h4, "S1": s1, "S2": s2, "S3": s3, "S4": s4}
