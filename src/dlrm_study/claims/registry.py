"""The claims, in the order every page lists them: one line per claim module. Adding a claim is its module
(`claims/<id>.py`, holding its `CLAIM`), a line here and its tests."""

from dlrm_study.analysis.evidence import Evidence
from dlrm_study.analysis.judgement import Judgement, Status
from dlrm_study.claims import h1, h2, h3, h4, s1, s2, s3, s4
from dlrm_study.claims.claim import Claim
from dlrm_study.records import Machine

CLAIMS: tuple[Claim, ...] = (
    h1.CLAIM,
    h2.CLAIM,
    h3.CLAIM,
    h4.CLAIM,
    s1.CLAIM,
    s2.CLAIM,
    s3.CLAIM,
    s4.CLAIM,
)
BY_ID = {claim.id: claim for claim in CLAIMS}


def claim(claim_id: str) -> Claim:
    """The claim of an id; an unknown id is an error, never another claim's rule."""
    if claim_id not in BY_ID:
        raise KeyError(f"no claim {claim_id!r}: the claims are {', '.join(BY_ID)}")
    return BY_ID[claim_id]


def judge(claim_id: str, evidence: Evidence, machine: str) -> Judgement:
    """One claim on one machine's current evidence."""
    return claim(claim_id).judge(evidence, machine)


def verdicts(evidence: Evidence, views: dict[str, Evidence] | None = None) -> dict[str, dict[str, Judgement]]:
    """claim id -> machine -> judgement, for every machine with records; `views`: each machine's `evidence.of`,
    where the caller has them already."""
    views = views if views is not None else {m: evidence.of(m) for m in evidence.machines()}
    return {c.id: {m: c.judge(view, m) for m, view in views.items()} for c in CLAIMS}


def papers() -> dict[str, tuple[str, ...]]:
    """Each paper's claim ids, in the registry's order."""
    found: dict[str, tuple[str, ...]] = {}
    for c in CLAIMS:
        found[c.paper] = (*found.get(c.paper, ()), c.id)
    return found


def on_figure(figure: str) -> tuple[str, ...]:
    """The claims whose verdicts a gallery figure's findings print (none for most figures)."""
    return tuple(c.id for c in CLAIMS if figure in c.figures)


def gpu_claims() -> tuple[Claim, ...]:
    """The claims judged from a GPU's records, whose pairs a GPU session counts."""
    return tuple(c for c in CLAIMS if c.gpu)


def class_status(by_machine: dict[str, Judgement], bf16_class: str) -> tuple[Status, dict[str, Status]]:
    """A bf16 class's row of a per-machine claim (S3): the set of its machines' statuses, read as one status
    where they agree and `machines disagree` where they do not."""
    mine = {m: j.status for m, j in by_machine.items()
            if Machine.parse(m).bf16_class == bf16_class and j.status != Status.NOT_YET}  # fmt: skip
    statuses = set(mine.values())
    if not statuses:
        return Status.NOT_YET, mine
    return (statuses.pop() if len(statuses) == 1 else Status.MACHINES_DISAGREE), mine
