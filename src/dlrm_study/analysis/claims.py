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
from itertools import chain

import pandas as pd

from dlrm_study.analysis import clusters
from dlrm_study.analysis import verdicts as rules
from dlrm_study.analysis.current import code_of
from dlrm_study.analysis.evidence import H1_KNOBS, Evidence
from dlrm_study.analysis.identity import RECORDS, record_ids
from dlrm_study.analysis.judgement import Judgement, Status
from dlrm_study.analysis.readers import left_out, left_out_records
from dlrm_study.config.variants import OPTIMIZED_BF16, OPTIMIZED_FP32
from dlrm_study.plans.baseline import OLD
from dlrm_study.records import Machine, provenance
from dlrm_study.records import columns as col

Rule = Callable[[Evidence, str, rules.Lens], Judgement]
NOT_PAIRED = "read, in no deciding pair (shown beside, unpaired, or between a knob's ends)"
ACCURACY = "trained seeds of the accuracy half (judged per seed, not paired samples/s)"


@dataclasses.dataclass(frozen=True)
class Claim:
    """One claim: `frames` names the Evidence fields its rule reads (`gpu_knobs` for every knob sweep);
    `deciding` the pairs of its deciding comparisons on one machine's evidence, each row with the
    identities of its records (`identity.RECORDS`)."""

    id: str
    text: str
    frames: tuple[str, ...]
    rule: Rule
    notebook: str
    deciding: Callable[[Evidence], list[pd.DataFrame]]

    def count(self, evidence: Evidence) -> int:
        """The pairs of the deciding comparison with fewest (0 where one has none)."""
        return fewest([len(p) for p in self.deciding(evidence)])

    def runs(self, evidence: Evidence) -> int:
        """The runs of the deciding comparison with fewest (0 where one has none): a verdict word needs MIN_RUNS."""
        return fewest([len(clusters.run_groups(p)) for p in self.deciding(evidence)])

    def used(self, evidence: Evidence) -> set[str]:
        """The identities of the records in a deciding pair, on one machine's evidence."""
        return {one for pairs in self.deciding(evidence) if len(pairs) for ids in pairs[RECORDS] for one in ids}

    def account(self, evidence: Evidence, machine: str, found: Judgement | None = None) -> dict[str, int]:
        """Every record of this claim's frames on `machine` (one machine's evidence) not in a deciding pair,
        each counted once, by reason: the rule's reasons first (`found.left_records`), then the readers',
        then `NOT_PAIRED` for records read but in no deciding pair. With `used`, they sum to the frames' size."""
        frames = self.reads(evidence)
        everything = set().union(*(ids_of(f, machine) for f in frames))
        taken = self.used(evidence)
        counts: dict[str, int] = {}
        sources = [*(found.left_records.items() if found else ()), *chain(*(left_out_records(f, machine).items()
                                                                            for f in frames))]  # fmt: skip
        for reason, ids in sources:
            new = (ids & everything) - taken
            if new:
                counts[reason] = counts.get(reason, 0) + len(new)
                taken |= new
        if "accuracy" in self.frames and (seeds := (ids_of(evidence.accuracy, machine) & everything) - taken):
            counts[ACCURACY] = len(seeds)  # trained seeds: S3's accuracy half reads them, they are not pairs
            taken |= seeds
        if rest := everything - taken:
            counts[NOT_PAIRED] = len(rest)
        for reason, n in unreadable(frames, machine).items():  # rows the store could not read: no identity
            counts[reason] = counts.get(reason, 0) + n
        return counts

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
        return dataclasses.replace(found, notes=tuple(notes), left_out=self.account(evidence, machine, found))

    def fragile(self, evidence: Evidence, machine: str, found: Judgement) -> tuple[str, Status] | None:
        """The first run whose removal turns a verdict word into another outcome (inconclusive or the opposite
        word), the rest judged by the verdict's own interval over the runs left (`Lens(loo=True)`: from 2 runs,
        so a word's MIN_RUNS leave one out); None where none does."""
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


def ids_of(frame: pd.DataFrame, machine: str) -> set[str]:
    """The identities of a frame's records of `machine`: those it holds and those its readers left out."""
    mine = frame[frame[col.MACHINE] == machine] if col.MACHINE in frame else frame.iloc[0:0]
    return set(record_ids(mine)).union(*left_out_records(frame, machine).values())


def unreadable(frames: list[pd.DataFrame], machine: str) -> dict[str, int]:
    """Rows the store could not read (counted, without an identity): the most any one frame of the file saw."""
    found: dict[str, int] = {}
    for frame in frames:
        named = left_out_records(frame, machine)
        for reason, n in left_out(frame, machine).items():
            if reason not in named:
                found[reason] = max(found.get(reason, 0), n)
    return found


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


def deciding_h1(evidence: Evidence) -> list[pd.DataFrame]:
    found = rules.h1_pairs(evidence)
    return [found.get(k, pd.DataFrame()) for k in H1_KNOBS]


def deciding_grid(along: str) -> Callable[[Evidence], list[pd.DataFrame]]:
    return lambda evidence: [p for _, p in rules.grid_pairs(evidence, along)[0]]


def deciding_h4(evidence: Evidence) -> list[pd.DataFrame]:
    if evidence.gpu_placements.empty:
        return []
    found = rules.h4_pairs(evidence)
    return [found["host"], found["recovery"]]  # recovery's records are cached's and host's; uvm is shown beside


def deciding_s1(evidence: Evidence) -> list[pd.DataFrame]:
    old = evidence.baseline
    if old.empty:
        return []
    loop = OPTIMIZED_BF16 if (old[col.VARIANT] == OPTIMIZED_BF16).any() else OPTIMIZED_FP32
    return [rules.stats.pairs(rules.most_threads(old[old[col.CONFIG_NAME] == "dlrm-benchmark"]), loop, OLD)]


def deciding_s2(evidence: Evidence) -> list[pd.DataFrame]:
    """Each preset's profiled reference records: a share is read from one record, its own comparison."""
    ref = rules.s2_records(evidence)
    if ref.empty:
        return []
    mine = [ref[ref[col.CONFIG_NAME] == p] for p in rules.S2_PRESETS]
    return [part.assign(**{RECORDS: record_ids(part).map(lambda one: (one,))}) for part in mine]


def deciding_s3(evidence: Evidence) -> list[pd.DataFrame]:
    loops = rules.s3_records(evidence)
    if loops.empty:
        return []
    return [rules.stats.pairs(loops[loops[col.CONFIG_NAME] == p], OPTIMIZED_BF16, OPTIMIZED_FP32)
            for p in rules.S3_PRESETS]  # fmt: skip


def no_pairs(evidence: Evidence) -> list[pd.DataFrame]:
    return []


CLAIMS = [
    Claim("H1", "GPU throughput depends strongly on the model's shape", ("gpu_knobs",), rules.h1,
          "04_model_shape_sensitivity", deciding_h1),
    Claim("H2", "the GPU's advantage grows with the dense part", ("gpu_grid",), rules.h2,
          "03_dense_sparse_sensitivity", deciding_grid("model.dense_features")),
    Claim("H3", "the GPU's advantage shrinks as the sparse part grows", ("gpu_grid",), rules.h3,
          "03_dense_sparse_sensitivity", deciding_grid("tables")),
    Claim("H4", "host-memory tables cost throughput; a hot-row cache recovers most", ("gpu_placements", "remote"),
          rules.h4, "05_embedding_placement", deciding_h4),
    Claim("S1", "optimizing every operator gives a large single-socket speedup (110x in 2020)",
          ("baseline", "cpu_loops"), rules.s1, "02_cpu_optimizations", deciding_s1),
    Claim("S2", "in the reference, embedding backward and update dominate", ("cpu_loops",), rules.s2,
          "01_cpu_reference_breakdown", deciding_s2),
    Claim("S3", "BF16 Split-SGD trains up to 1.8x faster than FP32, same accuracy",
          ("cpu_loops", "cpu_compare", "accuracy"), rules.s3, "02_cpu_optimizations", deciding_s3),
    Claim("S4", "hybrid parallelism scales efficiently to 64 sockets", ("scaling",), rules.s4, "06_scaling",
          no_pairs),
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
