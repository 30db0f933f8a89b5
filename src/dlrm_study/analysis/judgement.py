"""What a claim's rule decides: a status and the numbers it decided on (`Judgement`); no sentences here
beyond the rule's own account of its numbers (`detail`): `analysis.wording` says a Judgement in words."""

import dataclasses
import enum

from dlrm_study.analysis import stats


class Status(enum.StrEnum):
    """The outcomes of a claim's rule on one machine (docs/claims.md, Outcomes)."""

    REPRODUCED = "reproduced"
    NOT_REPRODUCED = "not reproduced"
    INCONCLUSIVE = "inconclusive"
    FRAGILE = "fragile"
    ONE_RUN = "one run"
    TOO_FEW = "too few repeats"
    NOT_MEASURABLE = "not measurable here"
    NOT_YET = "not yet measured"
    UNRECORDED = "unrecorded machine"
    MACHINES_DISAGREE = "machines disagree"

    @property
    def word(self) -> bool:
        """Whether this is a verdict word (it needs MIN_RUNS runs)."""
        return self in (Status.REPRODUCED, Status.NOT_REPRODUCED)

    @property
    def opposite(self) -> "Status | None":
        return {Status.REPRODUCED: Status.NOT_REPRODUCED, Status.NOT_REPRODUCED: Status.REPRODUCED}.get(self)


@dataclasses.dataclass(frozen=True)
class Judgement:
    """A rule's decision on one claim and machine.

    `numbers`: the comparisons it decided on, by name; `runs` and `pairs`: the fewest runs of a deciding
    comparison and the pairs over all of them; `left_out`: records of the claim's frames not used, by
    reason; `notes`: robustness and provenance, said after the evidence; `qualifier`: how the rule reached
    its word, where the word alone would say more than the test (S3's "reached 1.62x" or "exceeded 1.8x");
    `left_records`: the identities behind the rule's `left_out` (so a record two frames left out is counted
    once)."""

    status: Status
    detail: str = ""
    numbers: dict[str, stats.Ratio] = dataclasses.field(default_factory=dict, compare=False)
    runs: int = 0
    pairs: int = 0
    left_out: dict[str, int] = dataclasses.field(default_factory=dict, compare=False)
    notes: tuple[str, ...] = ()
    qualifier: str = ""  # how a word was reached, said beside it ("exceeded 1.8x": S3's direction); "" for most
    left_records: dict[str, frozenset[str]] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    @property
    def evidence(self) -> str:  # the name the notebooks and tests have read since the first rules
        return self.detail

    @property
    def note(self) -> str:
        return "; ".join(self.notes)


LACKING = (Status.NOT_YET, Status.TOO_FEW, Status.ONE_RUN)  # a half short of evidence for a word, least first
HALVES = frozenset({Status.REPRODUCED, Status.NOT_REPRODUCED, Status.INCONCLUSIVE, *LACKING})


def conjunction(a: Status, b: Status) -> Status:
    """A claim of two halves ("A and B"), decided as logic: one half not reproduced refutes the claim whatever the
    other's state (a half short of evidence cannot hide a failed other, nor a failed half wait on one); reproduced
    only when both are; otherwise the lack of the half with least evidence (`LACKING`), else inconclusive."""
    if not {a, b} <= HALVES:
        raise ValueError(f"a half of a claim is a rule's outcome, not {a!r} and {b!r}")
    if Status.NOT_REPRODUCED in (a, b):
        return Status.NOT_REPRODUCED
    if a == b == Status.REPRODUCED:
        return Status.REPRODUCED
    return next((s for s in LACKING if s in (a, b)), Status.INCONCLUSIVE)


def decided(status: Status, detail: str, numbers: dict[str, stats.Ratio] | None = None) -> Judgement:
    """A Judgement whose runs and pairs are counted from the comparisons it decided on."""
    numbers = numbers or {}
    used = [r for r in numbers.values() if r.n]
    runs = min((r.runs for r in used), default=0)
    return Judgement(status, detail, numbers, runs, sum(r.n for r in used))
