"""The sequential design's stop: after each look's runs, whether every claim the CPU loops' claim runs feed has its
word (docs/claims.md, "Design and power").

S2 and S3 are judged at the looks of `sequential.LOOKS`; a claim whose word there is decided and not fragile needs no
more runs, nor does one this machine cannot measure. S3 is read by its speed half alone: more runs cannot move its
accuracy half (seeds, trained once). `make reproduce` asks `stop` after each look and measures no further claim runs
once it says why.
"""

import dataclasses
from pathlib import Path

from dlrm_study.analysis.evidence import Evidence
from dlrm_study.analysis.judgement import Judgement, Status
from dlrm_study.claims import s2, s3
from dlrm_study.claims.claim import Claim
from dlrm_study.plans.profiles import LOOKS
from dlrm_study.records import columns as col

# What the claim runs decide, per claim: S2 whole, S3's speed half.
BY_RUNS: tuple[Claim, ...] = (s2.CLAIM, dataclasses.replace(s3.CLAIM, rule=s3.speed_only))
SETTLED = (Status.REPRODUCED, Status.NOT_REPRODUCED, Status.NOT_MEASURABLE)


def judged(evidence: Evidence, machine: str) -> dict[str, Judgement]:
    """Each claim the claim runs feed, on this machine's records as they are (fragility included)."""
    part = evidence.of(machine)
    return {claim.id: claim.judge(part, machine) for claim in BY_RUNS}


def look(results: Path, profile: str, machine: str) -> tuple[bool, str]:
    """At a look: whether every claim the claim runs feed is settled on `machine` (its word, not fragile, or not
    measurable there), and each one's status in one line (`studies.runs.Look`)."""
    found = judged(Evidence.load(results, profile), machine)
    words = ", ".join(f"{claim} {j.status}" for claim, j in found.items())
    return all(j.status in SETTLED for j in found.values()), words


def expected(machine: str) -> str:
    """What the claim runs should take on `machine`'s class, in one line: the mean runs the looks give at its
    class's committed truths and SDs (`claims.designs.class_runs`), or the cap for a class not yet measured."""
    from dlrm_study.claims.designs import class_runs  # simulated on use: a second or two

    found = class_runs()
    mine = found[found[col.MACHINE] == machine]
    if mine.empty:
        return (f"claim runs: a class with no committed runs of today's loops, so up to {LOOKS[-1]}, judged after "
                f"{', '.join(map(str, LOOKS))}")  # fmt: skip
    said = ", ".join(f"{row.claim} {row.runs:.1f}" for row in mine.itertuples())
    return f"claim runs on this class: judged after {', '.join(map(str, LOOKS))}; expected (mean runs) {said}"
