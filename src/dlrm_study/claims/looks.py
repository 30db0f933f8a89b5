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
