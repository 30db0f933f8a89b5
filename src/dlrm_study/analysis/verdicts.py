"""The claim rules (docs/claims.md), applied: one function per claim, deciding a `Judgement` on one machine.

Outcomes are symmetric: **reproduced** / **not reproduced** when the evidence lies wholly on one side
of the claim's threshold or margin, **inconclusive** when it spans it, **one run** when a deciding
comparison has fewer than `clusters.MIN_RUNS` runs (its numbers shown, no verdict word); **not
measurable here**, **not yet measured**, **unrecorded machine** (records that never said their ISA).

Ratios are summarized per run, then across runs (`analysis.clusters`). A rule reads its records
through a `Lens`: the verdict's, or the leave-one-out check's (`analysis.claims`), which judges the runs
left with one run out by the same t interval over runs. A claim of two halves is their `conjunction`.
A rule that asks whether any of m comparisons holds
takes each interval at 1 - 0.05 / m (`stats.family`). What a rule leaves out of its frames it counts in the frames
(`readers.leave_out`), so the count travels with the records, not in the Lens.
"""

import dataclasses

import pandas as pd

from dlrm_study.analysis import stats
from dlrm_study.analysis.clusters import MIN_RUNS, over_runs
from dlrm_study.analysis.convergence import (
    FAILS,
    GAIN_MARGIN,
    HOLDS,
    MIN_SEEDS,
    NO_RECORDS,
    AccuracyJudgement,
    s3_accuracy,
)
from dlrm_study.analysis.convergence import TOO_FEW as TOO_FEW_SEEDS
from dlrm_study.analysis.cpu import embedding_share_rows, largest_operator
from dlrm_study.analysis.current import code_of
from dlrm_study.analysis.evidence import H1_KNOBS, Evidence
from dlrm_study.analysis.identity import RECORDS
from dlrm_study.analysis.judgement import LACKING, Judgement, Status, conjunction, decided
from dlrm_study.analysis.readers import leave_out, left_out, left_out_records, pool
from dlrm_study.analysis.scaling import measured_efficiency
from dlrm_study.analysis.sensitivity import gpu_over_cpu_pairs
from dlrm_study.analysis.views import side
from dlrm_study.analysis.wording import Share, amount, describe, variant_words
from dlrm_study.config.variants import GPU_CACHED, GPU_HBM, GPU_HOST, GPU_UVM, OPTIMIZED_BF16, OPTIMIZED_FP32, REFERENCE
from dlrm_study.plans.baseline import OLD
from dlrm_study.plans.sensitivity import KNOBS
from dlrm_study.records import Machine
from dlrm_study.records import columns as col
from dlrm_study.rules import literal

# The declared literals (src/dlrm_study/rules/rules.toml says what each means).
H1_FACTOR = literal("H1", "factor")
GRID_MARGIN = literal("H2_H3", "margin")
H4_RECOVERY = literal("H4", "recovery")
S1_FACTOR, S1_CORES, S1_PRESET = literal("S1", "factor"), literal("S1", "cores"), literal("S1", "preset")
S2_SHARE = literal("S2", "share")
S2_PRESETS = tuple(literal("S2", "presets"))  # each timed preset of the CPU study (tests/test_rules_id.py)
S3_FACTOR, S3_MARGIN = literal("S3", "factor"), literal("S3", "margin")
S3_PRESETS = tuple(literal("S3", "presets"))
OTHER_PRESETS = "of other presets"
FEWER_THREADS = "at fewer threads than the machine's most"


@dataclasses.dataclass(frozen=True)
class Lens:
    """How a rule reads its ratios: runs as clusters (`clusters.over_runs`), a verdict word needing MIN_RUNS
    runs; the leave-one-out check (`loo`) reads the runs left by the same interval, so it needs one run fewer.
    (Pooling what is left into one pair interval judged a narrower interval than the verdict's own: it kept
    words that the verdict's interval over the remaining runs does not.)"""

    loo: bool = False

    def ratio(self, found: pd.DataFrame, confidence: float = stats.CONFIDENCE, value: str = "ratio",
              share: bool = False, linear: bool = False) -> stats.Ratio:  # fmt: skip
        if not len(found):
            return stats.NO_RATIO
        r = over_runs(found, value, confidence, share, linear)
        return Share(*r) if share else r

    def paired(self, records: pd.DataFrame, variant: object, baseline: object, between: str = col.VARIANT,
               confidence: float = stats.CONFIDENCE) -> stats.Ratio:  # fmt: skip
        return self.ratio(stats.pairs(records, variant, baseline, between=between), confidence)

    @property
    def runs_needed(self) -> int:
        """MIN_RUNS; with one run left out, the rest (a t interval over at least 2 runs)."""
        return MIN_RUNS - 1 if self.loo else MIN_RUNS

    def enough(self, r: stats.Ratio) -> bool:
        """A verdict word's gate: the runs it needs."""
        return r.n > 0 and r.runs >= self.runs_needed


def counted(judgement: Judgement, *frames: pd.DataFrame) -> Judgement:
    """The judgement with what its frames left out (readers, code, warm-up, the rule), by reason."""
    total: dict[str, int] = {}
    ids: dict[str, frozenset[str]] = {}
    for frame in frames:
        for reason, n in left_out(frame).items():
            total[reason] = total.get(reason, 0) + n
        for reason, found in left_out_records(frame).items():
            ids[reason] = ids.get(reason, frozenset()) | found
    return dataclasses.replace(judgement, left_out=total, left_records=ids)


def fewest_runs(numbers: dict[str, stats.Ratio]) -> int:
    return min((r.runs for r in numbers.values() if r.n), default=0)


def short_of(numbers: dict[str, stats.Ratio]) -> Status:
    """What comparisons short of MIN_RUNS runs say: one run, or too few repeats (none, or more runs but too few)."""
    return Status.ONE_RUN if fewest_runs(numbers) == 1 else Status.TOO_FEW


def gate(numbers: dict[str, stats.Ratio]) -> str:
    return f" (a verdict word needs {MIN_RUNS} runs; fewest {fewest_runs(numbers)})"


def too_few(numbers: dict[str, stats.Ratio], detail: str) -> Judgement:
    """Fewer than MIN_RUNS runs behind a deciding comparison: its numbers, no verdict word."""
    return decided(short_of(numbers), detail + gate(numbers), numbers)


def half(lens: Lens, r: stats.Ratio, holds: bool, fails: bool) -> Status:
    """One half of a two-half claim on one comparison: short of its runs (`short_of`), else the word its interval
    says (`holds` / `fails`: read at the confidence the rule reads each at), else inconclusive."""
    if not lens.enough(r):
        return short_of({"": r})
    return Status.REPRODUCED if holds else Status.NOT_REPRODUCED if fails else Status.INCONCLUSIVE


def most_threads(frame: pd.DataFrame) -> pd.DataFrame:
    """The records at the machine's most threads (a claim is judged at the machine's size)."""
    if frame.empty or col.THREADS not in frame:
        return frame
    most = frame[col.THREADS].astype(float).max()
    return leave_out(frame, frame[col.THREADS].astype(float) == most, FEWER_THREADS)


def outcome(r: stats.Ratio, low: float, high: float | None = None) -> Status:
    """reproduced above the threshold (or the band), not reproduced below it, inconclusive across it."""
    where = side(r, low, high)
    return {"above": Status.REPRODUCED, "below": Status.NOT_REPRODUCED}.get(where, Status.INCONCLUSIVE)


def ratio_text(r: stats.Ratio) -> str:
    return amount(r)  # the one printing of a judged quantity (`wording.amount`)


# --- H1-H4: GPU claims ----------------------------------------------------------------------------


def gpu_early(evidence: Evidence, machine: str) -> Judgement | None:
    """The judgement where the machine cannot test a GPU claim or has no GPU records; None where it can."""
    if not Machine.parse(machine).has_gpu:
        return Judgement(Status.NOT_MEASURABLE, "no GPU")
    if evidence.gpu.empty:
        return Judgement(Status.NOT_YET, "no GPU records of this machine")
    return None


def h1_pairs(evidence: Evidence) -> dict[str, pd.DataFrame]:
    """Each knob's pairs: gpu-hbm samples/s at its largest value over its smallest, within runs."""
    found = {}
    for knob in H1_KNOBS:
        frame = evidence.gpu_knobs.get(knob, pd.DataFrame())
        if not frame.empty:
            found[knob] = stats.pairs(frame, frame["x"].max(), frame["x"].min(), between="x")
    return found


def h1(evidence: Evidence, machine: str, lens: Lens) -> Judgement:
    """Some model-shape knob moves gpu-hbm samples/s by more than H1_FACTOR between its ends (either way,
    intervals at 1 - 0.05/6); every knob within H1_FACTOR both ways refutes it."""
    if (early := gpu_early(evidence, machine)) is not None:
        return early
    found = h1_pairs(evidence)
    if not found:  # GPU records, but none of a knob's sweep (a lending that ran only its headline)
        return Judgement(Status.NOT_YET, "no knob sweep on this machine's GPU")
    family = stats.family(len(H1_KNOBS))
    effects = {k: lens.ratio(f) for k, f in found.items()}
    strict = {k: lens.ratio(f, family) for k, f in found.items()}
    judged = {k for k, r in effects.items() if lens.enough(r)}
    said = [f"{KNOBS[k][2]} {ratio_text(r)}" for k, r in effects.items() if r.n]
    if unpaired := [KNOBS[k][2] for k, r in effects.items() if not r.n]:  # named once, not once per knob
        said.append(f"not paired (0 pairs): {', '.join(unpaired)}")
    text = "; ".join(said)
    text = (f"samples/s with {variant_words(GPU_HBM)} between each knob's ends, paired within runs: {text}; "
            f"beyond {H1_FACTOR}x either way at {family:.1%} each ({len(H1_KNOBS)} knobs)")  # fmt: skip
    frames = list(evidence.gpu_knobs.values())
    if not judged:
        return counted(too_few(effects, text), *frames)
    if any(side(strict[k], 1 / H1_FACTOR, H1_FACTOR) in ("above", "below") for k in judged):
        return counted(decided(Status.REPRODUCED, text, {k: strict[k] for k in judged}), *frames)
    if judged == set(H1_KNOBS) and all(side(effects[k], 1 / H1_FACTOR, H1_FACTOR) == "within" for k in judged):
        return counted(decided(Status.NOT_REPRODUCED, text, effects), *frames)
    return counted(decided(Status.INCONCLUSIVE, text, effects), *frames)


def grid_pairs(evidence: Evidence, along: str) -> tuple[list[tuple[object, pd.DataFrame]], str | None]:
    """GPU over the fastest CPU loop, paired per repeat within one run on this machine
    (`sensitivity.gpu_over_cpu_pairs`), and its change from the low to the high end of `along` at
    every value of the other axis, paired within runs: (other value, pairs) per value."""
    ratio, best = gpu_over_cpu_pairs(evidence.gpu_grid)
    if ratio.empty:
        return [], best
    other = "tables" if along == "model.dense_features" else "model.dense_features"
    lo, hi = ratio[along].min(), ratio[along].max()
    changes = []
    for value, part in ratio.groupby(other):
        ends = part[part[along].isin([lo, hi])].assign(end=lambda f: f[along].map({lo: "lo", hi: "hi"}))
        ends = ends.assign(**{col.VARIANT: ends["end"], col.SAMPLES_PER_S: ends["ratio"]}).drop(columns="ratio")
        changes.append((value, stats.pairs(ends, "hi", "lo")))
    return changes, best


def grid_changes(evidence: Evidence, lens: Lens, along: str, confidence: float = stats.CONFIDENCE) -> tuple:
    """(other value, Ratio) of each change along `along` (`grid_pairs`), and the CPU loop used."""
    found, best = grid_pairs(evidence, along)
    return [(value, lens.ratio(pairs, confidence)) for value, pairs in found], best


def grid_claim(evidence: Evidence, machine: str, lens: Lens, along: str, grows: bool) -> Judgement:
    """H2 (along dense features, grows) and H3 (along tables, shrinks): the change of GPU/CPU between the
    axis's ends at every value of the other axis. Reproduced: every change beyond GRID_MARGIN the claimed
    way; not reproduced: some change's interval (at 1 - 0.05/m) short of GRID_MARGIN that way."""
    if (early := gpu_early(evidence, machine)) is not None:
        return early
    changes, best = grid_changes(evidence, lens, along)
    if not changes:
        return Judgement(Status.NOT_YET, "needs the GPU host's CPU records of the grid, measured in the same run")
    strict, _ = grid_changes(evidence, lens, along, stats.family(len(changes)))
    name = "dense features" if along == "model.dense_features" else "tables"
    parts = "; ".join(f"at {v}: {ratio_text(r)}" for v, r in changes)
    margin = GRID_MARGIN if grows else 1 / GRID_MARGIN
    text = (f"change of GPU / {best} (same machine, paired within runs) from the fewest to the most {name}: {parts}; "
            f"margin {margin:.2f}x")  # fmt: skip
    numbers = {str(v): r for v, r in changes}
    if not all(lens.enough(r) for _, r in changes):
        return counted(too_few(numbers, text), evidence.gpu_grid)
    claimed = "above" if grows else "below"
    if all(side(r, margin) == claimed for _, r in changes):
        return counted(decided(Status.REPRODUCED, text, numbers), evidence.gpu_grid)
    if any(side(r, margin) == ("below" if grows else "above") for _, r in strict):
        return counted(decided(Status.NOT_REPRODUCED, text, numbers), evidence.gpu_grid)
    return counted(decided(Status.INCONCLUSIVE, text, numbers), evidence.gpu_grid)


def h2(evidence: Evidence, machine: str, lens: Lens) -> Judgement:
    return grid_claim(evidence, machine, lens, "model.dense_features", grows=True)


def h3(evidence: Evidence, machine: str, lens: Lens) -> Judgement:
    return grid_claim(evidence, machine, lens, "tables", grows=False)


def h4_pairs(evidence: Evidence) -> dict[str, pd.DataFrame]:
    """host, uvm and cached over hbm, paired per repeat; `recovery` per repeat (`recovery`)."""
    frame = evidence.gpu_placements
    found = {name: stats.pairs(frame, variant, GPU_HBM) for name, variant in
             (("host", GPU_HOST), ("uvm", GPU_UVM), ("cached", GPU_CACHED))}  # fmt: skip
    return found | {"recovery": recovery(found["host"], found["cached"])}


def recovery(host: pd.DataFrame, cached: pd.DataFrame) -> pd.DataFrame:
    """Per repeat, the part of what host memory loses that the cache wins back: (c - h) / (1 - h), with h and
    c host's and cached's ratios over hbm in the same cell; its records are both pairs' records."""
    keys = [k for k in stats.CELL if k in host and k in cached]
    if host.empty or cached.empty:
        return pd.DataFrame(columns=[*keys, "ratio", RECORDS])
    both = host.merge(cached, on=keys, suffixes=("_host", "_cached"))
    h, c = both["ratio_host"].astype(float), both["ratio_cached"].astype(float)
    ids = [tuple(dict.fromkeys(a + b)) for a, b in zip(both[f"{RECORDS}_host"], both[f"{RECORDS}_cached"], strict=True)]
    return both[keys].assign(ratio=(c - h) / (1 - h), **{RECORDS: ids})


def h4_halves(found: dict[str, pd.DataFrame], ratios: dict[str, stats.Ratio], lens: Lens) -> tuple[Status, Status]:
    """H4's two halves: host memory's cost (host's interval wholly below 1; refuted wholly above it) and the
    recovery (wholly above H4_RECOVERY; refuted wholly below it). A refutation is one side of an OR, read at
    1 - 0.05/2."""
    host, won = ratios["host"], ratios["recovery"]
    host2 = lens.ratio(found["host"], stats.family(2))
    won2 = lens.ratio(found["recovery"], stats.family(2), linear=True)
    return half(lens, host, host.high < 1, host2.low > 1), half(lens, won, won.low > H4_RECOVERY,
                                                                won2.high < H4_RECOVERY)  # fmt: skip


def h4(evidence: Evidence, machine: str, lens: Lens) -> Judgement:
    """Host-memory tables cost throughput against hbm, and the cache of hot rows wins back most of it: a
    `conjunction` of the two halves (`h4_halves`), so either refuted refutes it whatever the other's evidence."""
    if not Machine.parse(machine).has_gpu:
        text = "no GPU for the placements"
        if not evidence.remote.empty:
            text += (
                f"; remote tables over local tables (a CPU parameter server): "
                f"{ratio_text(lens.paired(evidence.remote, 'remote', 'local'))}"
            )
        return counted(Judgement(Status.NOT_MEASURABLE, text), evidence.remote)
    if (early := gpu_early(evidence, machine)) is not None:
        return early
    found = h4_pairs(evidence)
    ratios = {name: lens.ratio(f) for name, f in found.items() if name != "recovery"}
    if not (ratios["host"].n and ratios["cached"].n):
        return counted(Judgement(Status.NOT_YET, "no host or cached repeat pairs up with hbm"), evidence.gpu_placements)
    ratios["recovery"] = Share(*lens.ratio(found["recovery"], linear=True))  # a share of what host loses
    text = "mlperf-scaled, Zipf 1.05, 10% of rows cached, over hbm (paired): " + ", ".join(
        f"{name} {ratio_text(r)}" for name, r in ratios.items() if name != "recovery"
    )
    r = ratios["recovery"]
    text += f"; the cache wins back (cached - host) / (1 - host), per repeat: {amount(r)}, against {H4_RECOVERY:.0%}"
    deciding = {name: ratios[name] for name in ("host", "recovery")}
    status = conjunction(*h4_halves(found, ratios, lens))
    text += gate(deciding) if status in LACKING else ""
    return counted(decided(status, text, deciding), evidence.gpu_placements)


# --- S1-S4: CPU claims ----------------------------------------------------------------------------


def s1(evidence: Evidence, machine: str, lens: Lens) -> Judgement:
    """The optimized loop over the 2020 reference step at a full socket's cores (S1_CORES): below that, not
    measurable here, with what was measured (the 2020 stack to today's, optimization, threads); no projection
    (docs/claims.md: neither S1's nor S4's is printed)."""
    m = Machine.parse(machine)
    loop = OPTIMIZED_BF16 if m.native_bf16 else OPTIMIZED_FP32  # the one comparison the rule reads
    said = variant_words(loop)
    old, loops = evidence.baseline, evidence.cpu_loops
    old = leave_out(old, old[col.CONFIG_NAME] == S1_PRESET, OTHER_PRESETS) if not old.empty else old
    if not loops.empty:
        loops = most_threads(leave_out(loops, loops[col.CONFIG_NAME] == S1_PRESET, OTHER_PRESETS))
    parts = []
    if not old.empty:
        for threads, group in old.groupby(col.THREADS):
            today, ours = lens.paired(group, REFERENCE, OLD), lens.paired(group, loop, OLD)
            parts.append(f"at {int(threads)} thread(s): today's reference {ratio_text(today)} and {said} "
                         f"{ratio_text(ours)} over the 2020 step")  # fmt: skip
    if not loops.empty:
        parts.append(f"{said} over today's reference at {int(loops[col.THREADS].max())} threads: "
                     f"{ratio_text(lens.paired(loops, loop, REFERENCE))}")  # fmt: skip
    if m.cpus < S1_CORES:  # what the machine is decides first: no record could make it a socket
        why = f"{m.cpus} logical CPUs, the claim is of a {S1_CORES}-core socket against the 2020 step"
        measured = "; measured: " + "; ".join(parts) if parts else ""
        return counted(Judgement(Status.NOT_MEASURABLE, why + measured), old, loops)
    if old.empty:
        said = "; measured: " + "; ".join(parts) if parts else ""
        return counted(Judgement(Status.NOT_YET, f"no 2020 step here (make baseline-2020){said}"), old, loops)
    at_most = most_threads(old)
    r = lens.paired(at_most, loop, OLD)
    threads = int(at_most[col.THREADS].max())
    text = f"{said} over the 2020 step at {threads} threads: {ratio_text(r)}, against {S1_FACTOR:g}x"
    if not lens.enough(r):
        return counted(too_few({loop: r}, text), at_most, loops)
    return counted(decided(outcome(r, S1_FACTOR), text, {loop: r}), at_most, loops)


def s2_records(evidence: Evidence) -> pd.DataFrame:
    """The reference's profiled records at the machine's most threads (others counted)."""
    loops = evidence.cpu_loops
    if loops.empty:
        return loops
    ref = leave_out(loops, loops[col.VARIANT] == REFERENCE, "of other loops")
    ref = leave_out(ref, ref[col.CONFIG_NAME].isin(S2_PRESETS), OTHER_PRESETS)
    update = col.op_column("embedding_backward_update")
    profiled = ref[update].notna() if update in ref else pd.Series(False, index=ref.index)
    return most_threads(leave_out(ref, profiled, "without a breakdown"))


def s2(evidence: Evidence, machine: str, lens: Lens) -> Judgement:
    """The share of the reference's profiled iteration in embedding backward + update, against 50%, at each
    timed preset, each judged and named: reproduced where every preset's share lies above 50%, not
    reproduced where some preset's (at 1 - 0.05/m) lies below it."""
    ref = s2_records(evidence)
    if ref.empty:
        return counted(Judgement(Status.NOT_YET), ref)
    presets = [p for p in S2_PRESETS if p in set(ref[col.CONFIG_NAME])]
    family = stats.family(len(presets))
    shares, strict, parts = {}, {}, []
    for preset in presets:
        rows = embedding_share_rows(ref[ref[col.CONFIG_NAME] == preset])
        forward = embedding_share_rows(ref[ref[col.CONFIG_NAME] == preset], ("embedding_forward",))
        shares[preset] = lens.ratio(rows, value="share", share=True)
        strict[preset] = lens.ratio(rows, family, value="share", share=True)
        f, r = lens.ratio(forward, value="share", share=True), shares[preset]
        biggest, its = largest_operator(rows)
        parts.append(f"{preset} {amount(r)}, forward beside it {describe(*f[:3], percent=True)}"
                     + (f", largest operator {biggest} ({its:.0%}, median)" if biggest else ""))  # fmt: skip
    text = (f"embedding backward + update in the reference's profiled iteration at "
            f"{int(ref[col.THREADS].max())} threads: " + "; ".join(parts) + f"; threshold {S2_SHARE:.0%}")  # fmt: skip
    if not all(lens.enough(r) for r in shares.values()):
        return counted(too_few(shares, text), ref)
    sides = {p: side(r, S2_SHARE) for p, r in shares.items()}
    below = [p for p, r in strict.items() if side(r, S2_SHARE) == "below"]
    holds = [p for p, s in sides.items() if s == "above"]
    if holds and len(holds) == len(presets):
        return counted(decided(Status.REPRODUCED, text + f": holds at {', '.join(holds)}", shares), ref)
    if below:
        said = f": holds at {', '.join(holds)}, not at {', '.join(below)}" if holds else f": not at {', '.join(below)}"
        return counted(decided(Status.NOT_REPRODUCED, text + said, shares), ref)
    return counted(decided(Status.INCONCLUSIVE, text, shares), ref)


def accuracy_said(accuracy: AccuracyJudgement) -> str:
    """S3's accuracy half in a clause: its status and each preset's Split-SGD gain with its interval and seeds."""
    gains = ", ".join(f"{g.preset} {g.ratio:.1%} [{g.low:.1%}, {g.high:.1%}] ({g.seeds} seeds)" for g in accuracy.split)
    said = f"{accuracy.status}" + (f", {gains}" if gains else "")
    if accuracy.plain_status == HOLDS:  # the control kept the gain too: the benchmark cannot tell the two apart
        said += " (plain bf16 SGD holds too: this benchmark does not tell Split-SGD from plain bf16)"
    return said


def s3_records(evidence: Evidence) -> pd.DataFrame:
    """bf16 and fp32 on S3's presets at the machine's most threads (others counted), from every results file that
    measured those points (the CPU loops' sweep and `dlrm-study compare`), by point identity."""
    loops = pool(evidence.cpu_loops, evidence.cpu_compare)
    if loops.empty:
        return loops
    loops = leave_out(loops, loops[col.CONFIG_NAME].isin(S3_PRESETS), OTHER_PRESETS)
    loops = leave_out(loops, loops[col.VARIANT].isin([OPTIMIZED_BF16, OPTIMIZED_FP32]), "of other loops")
    return most_threads(loops)


def s3_speed(evidence: Evidence, lens: Lens, confidence: float) -> dict[str, stats.Ratio]:
    """bf16 over fp32 per timed preset: at 1 - 0.05/2 each for "some preset reaches" (an OR, Bonferroni), at
    95% each for "both fall short" (an AND)."""
    loops = s3_records(evidence)
    if loops.empty:
        return {name: stats.NO_RATIO for name in S3_PRESETS}
    return {name: lens.paired(loops[loops[col.CONFIG_NAME] == name], OPTIMIZED_BF16, OPTIMIZED_FP32,
                              confidence=confidence) for name in S3_PRESETS}  # fmt: skip


def speed_half(speed: dict[str, stats.Ratio], lens: Lens, reach: float) -> Status:
    """S3's speed half over the presets with pairs: some judged preset's interval above `reach` (an "or"), or
    every one judged and below it (an "and"); a preset short of its runs leaves it short of evidence."""
    measured = {name: r for name, r in speed.items() if r.n}
    judged = {name: r for name, r in measured.items() if lens.enough(r)}
    if not measured:
        return Status.NOT_YET
    if any(r.low > reach for r in judged.values()):
        return Status.REPRODUCED
    if len(judged) < len(measured):
        return short_of({name: r for name, r in measured.items() if name not in judged})
    return Status.NOT_REPRODUCED if all(r.high < reach for r in judged.values()) else Status.INCONCLUSIVE


def accuracy_half(accuracy: AccuracyJudgement, fails: bool) -> Status:
    """S3's accuracy half: `fails` (read at 1 - 0.05/2, one side of the "or") refutes it; `HOLDS` (at 95%)
    reproduces it; too few seeds, or none, is too few; undecided or a benchmark that did not learn, inconclusive."""
    if fails:
        return Status.NOT_REPRODUCED
    lacking = {TOO_FEW_SEEDS: Status.TOO_FEW, NO_RECORDS: Status.TOO_FEW}
    return Status.REPRODUCED if accuracy.status == HOLDS else lacking.get(accuracy.status, Status.INCONCLUSIVE)


def s3(evidence: Evidence, machine: str, lens: Lens) -> Judgement:
    """Per machine: bf16 over fp32 reaches 1.8x less the margin on a timed preset (intervals at 1 - 0.05/2),
    and the held-out AUC of the timed presets is the same within 0.002 over >= 3 seeds: a `conjunction` of the
    speed half (`speed_half`) and the accuracy half (`accuracy_half`)."""
    m = Machine.parse(machine)
    if m.native_bf16 is False:
        return Judgement(Status.NOT_MEASURABLE, f"{m.bf16_class}: no bf16 instructions (AVX512-BF16, AMX-BF16)")
    loops = s3_records(evidence)
    reach = S3_FACTOR * (1 - S3_MARGIN)
    # "Reproduced" needs some preset above (an "or" over the presets); "not reproduced" is an "or" of the speed
    # half (both presets short: an "and", no correction within it) and the accuracy half failing. Each "or" is
    # read at 1 - 0.05/2, so one set of intervals serves both.
    either = stats.family(2)
    speed = s3_speed(evidence, lens, either)
    parts = [f"{name} {ratio_text(r)}" for name, r in speed.items() if r.n]
    # the accuracy half reads the speed half's machine and code (without speed records: the machine's newest)
    code = code_of([loops], machine).fingerprint if parts else None
    accuracy = s3_accuracy(evidence.accuracy, machine, code)
    fails = s3_accuracy(evidence.accuracy, machine, code, either).status == FAILS
    halves = speed_half(speed, lens, reach), accuracy_half(accuracy, fails)
    status = conjunction(*halves)
    if not parts and status == Status.NOT_YET:
        return counted(Judgement(Status.NOT_YET, f"{m.bf16_class}: no paired bf16 and fp32 repeats"), loops)
    said = ", ".join(parts) or "none paired"
    text = f"{m.bf16_class}; bf16 / fp32 samples/s at {stats.family(len(S3_PRESETS)):.1%} each: {said}"
    text += f"; reaches the claim above {reach:.2f}x ({S3_FACTOR:g}x less {S3_MARGIN:.0%})"
    text += f"; accuracy (bf16's learned AUC gain over fp32's, >= {GAIN_MARGIN:.0%}): {accuracy_said(accuracy)}"
    measured = {name: r for name, r in speed.items() if r.n}
    judged = {name: r for name, r in measured.items() if lens.enough(r)}
    text += s3_said(halves, status, judged, measured)
    return counted(decided(status, text, measured if halves[0] in LACKING else judged), loops)


def s3_said(halves: tuple[Status, Status], status: Status, judged: dict, measured: dict) -> str:
    """Why S3 says what it says: each refuted half, or each half short of evidence."""
    speed, accuracy = halves
    said = ""
    if speed == Status.NOT_REPRODUCED:
        faster = all(r.low > 1 for r in judged.values())
        said += f": faster but short of {S3_FACTOR:g}x" if faster else f": not faster enough to reach {S3_FACTOR:g}x"
    if accuracy == Status.NOT_REPRODUCED:
        said += ": accuracy differs"
    if status in LACKING and speed in LACKING:
        said += gate({name: r for name, r in measured.items() if name not in judged})
    if status in LACKING and accuracy in LACKING:
        said += f": accuracy needs {MIN_SEEDS} seeds per preset"
    return said


def s4(evidence: Evidence, machine: str, lens: Lens) -> Judgement:
    """Not measurable on one machine; the 1 to 2 rank efficiencies shown, no 64-socket projection (as S1 has
    none: docs/claims.md)."""
    records = evidence.scaling
    if records.empty:
        return Judgement(Status.NOT_YET)
    eff = measured_efficiency(records)
    text = (
        f"1 to 2 ranks on one machine: strong efficiency {describe(*eff['strong_efficiency'], percent=True)}, "
        f"weak {describe(*eff['weak_efficiency'], percent=True)}; 64 sockets: not measured, and not projected here"
    )
    return counted(Judgement(Status.NOT_MEASURABLE, text), records)
