"""A claim: its id, words, the paper it comes from, the frames it reads, its rule, its deciding pairs and how a
reader sees them. Each claim is one module of this package (`h1` .. `s4`) holding one `Claim`; the registry
(`claims.registry`) lists them.

`Claim.judge` decides a claim on one machine's current evidence (`Evidence.of`): its rule over every
run, then a leave-one-out check over runs: a verdict word whose rule, with any one run left out,
is inconclusive or the opposite word is **fragile** (flags never enter a verdict; they stay
diagnostics of the findings).
"""

import dataclasses
from collections.abc import Callable
from itertools import chain
from pathlib import Path

import pandas as pd

from dlrm_study.analysis import clusters
from dlrm_study.analysis.current import code_of
from dlrm_study.analysis.evidence import Evidence
from dlrm_study.analysis.identity import RECORDS, record_ids
from dlrm_study.analysis.judgement import Judgement, Status
from dlrm_study.analysis.power import Design, Reader
from dlrm_study.analysis.readers import left_out, left_out_records
from dlrm_study.claims.rule import Lens
from dlrm_study.plans.gpu import GpuRun
from dlrm_study.records import Machine, provenance
from dlrm_study.records import columns as col

HPCA = "HPCA 2021 (GPU, Acun et al.)"
SC20 = "SC20 (CPU, Kalamkar et al.)"
Rule = Callable[[Evidence, str, Lens], Judgement]
NOT_PAIRED = "read, in no deciding pair (shown beside, unpaired, or between a knob's ends)"
ACCURACY = "trained seeds of the accuracy half (judged per seed, not paired samples/s)"


@dataclasses.dataclass(frozen=True)
class Claim:
    """One claim: `frames` names the Evidence fields its rule reads (`gpu_knobs` for every knob sweep);
    `deciding` the pairs of its deciding comparisons on one machine's evidence, each row with the
    identities of its records (`identity.RECORDS`)."""

    id: str
    text: str
    paper: str  # HPCA or SC20: the results page groups the claims by it
    claimed: str  # what the paper claims, from the rule's own constants (the results page's first screen)
    frames: tuple[str, ...]
    rule: Rule
    notebook: str
    deciding: Callable[[Evidence], list[pd.DataFrame]]
    names: Callable[[str], str] = str  # a deciding number's key (preset, knob, value) in a reader's words
    figures: tuple[str, ...] = ()  # the gallery figures whose findings are this claim's verdicts
    per_class: bool = False  # judged per machine, and read per bf16 class (the ledger's class rows)
    quantity: str = ""  # what its number measures, where a page names it only by the claim's id
    gpu_points: str = ""  # a GPU claim: what its rule pairs, and over what the fewest are counted
    # a GPU claim: (pairs, runs) its rule counts in a GPU session's records (`lending.gpu_pairs`)
    session_counts: Callable[[Path, GpuRun], tuple[int, int]] | None = None
    designs: tuple[Design, ...] = ()  # the design of runs that feeds its rule, per comparison (`claims.designs`)
    reader: Reader | None = None  # how its design reads its variances from committed records (None: assumed)

    @property
    def gpu(self) -> bool:
        """Whether its deciding records are a GPU's (a GPU session counts its pairs)."""
        return bool(self.gpu_points)

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

    def reads(self, evidence: Evidence, runs_only: bool = False) -> list[pd.DataFrame]:
        """The frames of `evidence` this claim's rule reads (`runs_only`: those measured in runs, not the trained
        seeds of S3's accuracy half)."""
        out: list[pd.DataFrame] = []
        for name in self.frames:
            if runs_only and name == "accuracy":
                continue
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
        found = self.rule(evidence, machine, Lens())
        notes = list(found.notes)
        if (turned := self.fragile(evidence, machine, found)) is not None:
            found = dataclasses.replace(found, status=Status.FRAGILE, qualifier="",
                                        detail=f"{found.status} over every run ({found.detail}); without "
                                        f"{turned[0]}: {turned[1]}")  # fmt: skip
        if found.status.word or found.status == Status.FRAGILE:
            n = len(clusters.invocations(self.reads(evidence, runs_only=True)))
            notes.append(f"{n} invocation{'s' * (n != 1)}")
        code = code_of(self.reads(evidence), machine)
        if not code.known and code.commits:
            notes.append(f"code unknown: measured before code fingerprints (commit {', '.join(code.commits)})")
        if predates(self.reads(evidence)):
            notes.append("records measured before these rules")
        return dataclasses.replace(found, notes=tuple(notes), left_out=self.account(evidence, machine, found))

    def fragile(self, evidence: Evidence, machine: str, found: Judgement) -> tuple[str, Status] | None:
        """The first run (then, with two or more invocations, the first invocation) whose removal turns a verdict
        word into another outcome (inconclusive or the opposite word), the rest judged by the verdict's own interval
        over the runs left (`Lens(loo=True)`: from 2 runs, so a word's MIN_RUNS leave one out); None where none
        does. Leaving out an invocation sees a batch of runs disturbed together, which no single run reveals."""
        if not found.status.word:
            return None
        outcomes = {Status.REPRODUCED, Status.NOT_REPRODUCED, Status.INCONCLUSIVE} - {found.status}
        frames = self.reads(evidence)
        for run in runs_of(frames):
            again = self.rule(evidence.without_run(run), machine, Lens(loo=True))
            if again.status in outcomes:
                return f"run {run}", again.status
        invoked = clusters.invocations(self.reads(evidence, runs_only=True))
        for name, runs in invoked.items() if len(invoked) >= 2 else ():
            again = self.rule(evidence.without_runs(runs), machine, Lens(loo=True))
            if again.status in outcomes:
                return f"invocation {name}", again.status
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
