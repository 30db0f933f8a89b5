"""S4 (SC20): hybrid parallelism scales efficiently to 64 sockets.

Not measurable on one machine: the 1 to 2 rank efficiencies are shown, with no 64-socket projection.
"""

import pandas as pd

from dlrm_study.analysis.evidence import Evidence
from dlrm_study.analysis.judgement import Judgement, Status
from dlrm_study.analysis.scaling import measured_efficiency
from dlrm_study.analysis.wording import describe
from dlrm_study.claims.claim import SC20, Claim
from dlrm_study.claims.rule import Lens, counted

ID = "S4"


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


def no_pairs(evidence: Evidence) -> list[pd.DataFrame]:
    return []


CLAIM = Claim(
    ID, "hybrid parallelism scales efficiently to 64 sockets", SC20, "efficient scaling to 64 sockets",
    ("scaling",), s4, "06_scaling", no_pairs,
)  # fmt: skip
