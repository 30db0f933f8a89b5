"""The claims: one `Claim` per claim (its id, words, the frames it reads, its rule and its notebook) in
one `CLAIMS` list that the ledger, the gallery, the notebooks and the GPU session read.

`Claim.judge` decides a claim on one machine's current evidence (`Evidence.of`): its rule over every
run, then a leave-one-out check over runs: a verdict word whose rule, with any one run left out,
is inconclusive or the opposite word is **fragile** (flags never enter a verdict; they stay
diagnostics of the findings). Adding a claim touches its Claim here, its rule in `verdicts`,
docs/claims.md and its tests.
"""

import dataclasses
from collections.abc import Callable

import pandas as pd

from dlrm_study.analysis import verdicts as rules
from dlrm_study.analysis.current import code_of
from dlrm_study.analysis.evidence import H1_KNOBS, Evidence
from dlrm_study.analysis.judgement import Judgement, Status
from dlrm_study.analysis.readers import left_out
from dlrm_study.config.variants import OPTIMIZED_BF16, OPTIMIZED_FP32
from dlrm_study.records import Machine, provenance
from dlrm_study.records import columns as col
from dlrm_study.studies.baseline import OLD

Rule = Callable[[Evidence, str, rules.Lens], Judgement]


@dataclasses.dataclass(frozen=True)
class Claim:
    """One claim: `frames` names the Evidence fields its rule reads (`gpu_knobs` for every knob sweep);
    `count` the pairs of its deciding comparisons on one machine's evidence (the fewest of them)."""

    id: str
    text: str
    frames: tuple[str, ...]
    rule: Rule
    notebook: str
    count: Callable[[Evidence], int]

    def reads(self, evidence: Evidence) -> list[pd.DataFrame]:
        """The frames of `evidence` this claim's rule reads."""
        out: list[pd.DataFrame] = []
        for name in self.frames:
            out += list(evidence.gpu_knobs.values()) if name == "gpu_knobs" else [getattr(evidence, name)]
        return out

    def pairs(self, evidence: Evidence, machine: str) -> int:
        """The fewest pairs of this claim's deciding comparisons on `machine` (its current code, warm-ups out);
        `evidence` is every machine's (`Evidence.load`) or already that machine's."""
        return self.count(evidence.of(machine))

    def judge(self, evidence: Evidence, machine: str) -> Judgement:
        """This claim on one machine's current evidence (`Evidence.of(machine)`)."""
        if not Machine.parse(machine).recorded:
            return Judgement(Status.UNRECORDED, "its records never said its ISA: listed, not judged")
        found = self.rule(evidence, machine, rules.Lens())
        notes = list(found.notes)
        if (turned := self.fragile(evidence, machine, found)) is not None:
            found = dataclasses.replace(found, status=Status.FRAGILE,
                                        detail=f"{found.status} over every run ({found.detail}); without run "
                                        f"{turned[0]}: {turned[1]}")  # fmt: skip
        code = code_of(self.reads(evidence), machine)
        if not code.known and code.commits:
            notes.append(f"code unknown: measured before code fingerprints (commit {', '.join(code.commits)})")
        if predates(self.reads(evidence)):
            notes.append("records measured before these rules")
        left = found.left_out or unused(self.reads(evidence))
        return dataclasses.replace(found, notes=tuple(notes), left_out=left)

    def fragile(self, evidence: Evidence, machine: str, found: Judgement) -> tuple[str, Status] | None:
        """The first run whose removal turns a verdict word into another outcome (inconclusive or the opposite
        word), the rest judged as they are (one run left: over its pairs); None where none does."""
        if not found.status.word:
            return None
        outcomes = {Status.REPRODUCED, Status.NOT_REPRODUCED, Status.INCONCLUSIVE} - {found.status}
        for run in runs_of(self.reads(evidence)):
            again = self.rule(evidence.without_run(run), machine, rules.Lens(loo=True))
            if again.status in outcomes:
                return run, again.status
        return None


def runs_of(frames: list[pd.DataFrame]) -> list[str]:
    """The run ids of these frames' records, in order."""
    found: set[str] = set()
    for frame in frames:
        if not frame.empty and col.RUN_ID in frame:
            found |= set(frame[col.RUN_ID].dropna().astype(str))
    return sorted(found)


def unused(frames: list[pd.DataFrame]) -> dict[str, int]:
    """What the readers (and the code and warm-up filters) left out of these frames, by reason."""
    total: dict[str, int] = {}
    for frame in frames:
        for reason, n in left_out(frame).items():
            total[reason] = total.get(reason, 0) + n
    return total


def predates(frames: list[pd.DataFrame]) -> bool:
    """Whether any record read was measured under other rules (or before rules were hashed)."""
    now = provenance.rules_hash()
    for frame in frames:
        if not frame.empty:
            hashes = frame[col.RULES_HASH].fillna("").astype(str) if col.RULES_HASH in frame else pd.Series([""])
            if (hashes != now).any():
                return True
    return False


def fewest(counts: list[int]) -> int:
    return min(counts, default=0)


def count_h1(evidence: Evidence) -> int:
    found = rules.h1_pairs(evidence)
    return fewest([len(found.get(k, ())) for k in H1_KNOBS])


def count_grid(along: str) -> Callable[[Evidence], int]:
    return lambda evidence: fewest([len(p) for _, p in rules.grid_pairs(evidence, along)[0]])


def count_h4(evidence: Evidence) -> int:
    return fewest([len(p) for p in rules.h4_pairs(evidence).values()]) if not evidence.gpu_placements.empty else 0


def count_s1(evidence: Evidence) -> int:
    old = evidence.baseline
    if old.empty:
        return 0
    loop = OPTIMIZED_BF16 if (old[col.VARIANT] == OPTIMIZED_BF16).any() else OPTIMIZED_FP32
    return len(rules.stats.pairs(rules.most_threads(old[old[col.CONFIG_NAME] == "dlrm-benchmark"]), loop, OLD))


def count_s2(evidence: Evidence) -> int:
    ref = rules.s2_records(evidence)
    return fewest([int((ref[col.CONFIG_NAME] == p).sum()) for p in rules.S2_PRESETS]) if not ref.empty else 0


def count_s3(evidence: Evidence) -> int:
    loops = rules.s3_records(evidence)
    if loops.empty:
        return 0
    return fewest([len(rules.stats.pairs(loops[loops[col.CONFIG_NAME] == p], OPTIMIZED_BF16, OPTIMIZED_FP32))
                   for p in rules.S3_PRESETS])  # fmt: skip


CLAIMS = [
    Claim("H1", "GPU throughput depends strongly on the model's shape", ("gpu_knobs",), rules.h1,
          "04_model_shape_sensitivity", count_h1),
    Claim("H2", "the GPU's advantage grows with the dense part", ("gpu_grid",), rules.h2,
          "03_dense_sparse_sensitivity", count_grid("model.dense_features")),
    Claim("H3", "the GPU's advantage shrinks as the sparse part grows", ("gpu_grid",), rules.h3,
          "03_dense_sparse_sensitivity", count_grid("tables")),
    Claim("H4", "host / remote tables cost throughput; a hot-row cache recovers most", ("gpu_placements", "remote"),
          rules.h4, "05_embedding_placement", count_h4),
    Claim("S1", "optimizing every operator gives a large single-socket speedup (110x in 2020)",
          ("baseline", "cpu_loops"), rules.s1, "02_cpu_optimizations", count_s1),
    Claim("S2", "in the reference, embedding backward and update dominate", ("cpu_loops",), rules.s2,
          "01_cpu_reference_breakdown", count_s2),
    Claim("S3", "BF16 Split-SGD trains up to 1.8x faster than FP32, same accuracy", ("cpu_loops", "accuracy"),
          rules.s3, "02_cpu_optimizations", count_s3),
    Claim("S4", "hybrid parallelism scales efficiently to 64 sockets", ("scaling",), rules.s4, "06_scaling",
          lambda evidence: 0),
]  # fmt: skip
BY_ID = {claim.id: claim for claim in CLAIMS}


def claim(claim_id: str) -> Claim:
    """The claim of an id; an unknown id is an error, never another claim's rule."""
    if claim_id not in BY_ID:
        raise KeyError(f"no claim {claim_id!r}: the claims are {', '.join(BY_ID)}")
    return BY_ID[claim_id]


def judge(claim_id: str, evidence: Evidence, machine: str) -> Judgement:
    """One claim on one machine's current evidence."""
    return claim(claim_id).judge(evidence, machine)


def verdicts(evidence: Evidence) -> dict[str, dict[str, Judgement]]:
    """claim id -> machine -> judgement, for every machine with records."""
    return {c.id: {m: c.judge(evidence.of(m), m) for m in evidence.machines()} for c in CLAIMS}


def class_status(by_machine: dict[str, Judgement], bf16_class: str) -> tuple[Status, dict[str, Status]]:
    """A bf16 class's row of a per-machine claim (S3): the set of its machines' statuses, read as one status
    where they agree and `machines disagree` where they do not."""
    mine = {m: j.status for m, j in by_machine.items()
            if Machine.parse(m).bf16_class == bf16_class and j.status != Status.NOT_YET}  # fmt: skip
    statuses = set(mine.values())
    if not statuses:
        return Status.NOT_YET, mine
    return (statuses.pop() if len(statuses) == 1 else Status.MACHINES_DISAGREE), mine
