"""S2 (SC20): in the reference, embedding backward and update dominate the iteration.

The share of the reference's profiled iteration in embedding backward + update, against S2_SHARE, at each timed
preset (S2_PRESETS), each judged and named.
"""

import pandas as pd

from dlrm_study.analysis import stats
from dlrm_study.analysis.cpu import embedding_share_rows, largest_operator
from dlrm_study.analysis.evidence import Evidence
from dlrm_study.analysis.identity import RECORDS, record_ids
from dlrm_study.analysis.judgement import Judgement, Status, decided
from dlrm_study.analysis.readers import leave_out
from dlrm_study.analysis.views import side
from dlrm_study.analysis.wording import amount, describe
from dlrm_study.claims.claim import SC20, Claim
from dlrm_study.claims.rule import OTHER_PRESETS, Lens, counted, most_threads, too_few
from dlrm_study.config.variants import REFERENCE
from dlrm_study.records import columns as col
from dlrm_study.rules import literal

ID = "S2"
S2_SHARE = literal(ID, "share")
S2_PRESETS = tuple(literal(ID, "presets"))  # each timed preset of the CPU study (tests/test_rules_id.py)


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


def deciding(evidence: Evidence) -> list[pd.DataFrame]:
    """Each preset's profiled reference records: a share is read from one record, its own comparison."""
    ref = s2_records(evidence)
    if ref.empty:
        return []
    mine = [ref[ref[col.CONFIG_NAME] == p] for p in S2_PRESETS]
    return [part.assign(**{RECORDS: record_ids(part).map(lambda one: (one,))}) for part in mine]


CLAIM = Claim(
    ID, "in the reference, embedding backward and update dominate", SC20,
    f"more than {S2_SHARE:.0%} of the reference's iteration",
    ("cpu_loops",), s2, "01_cpu_reference_breakdown", deciding,
    quantity="embedding backward + update, share of the reference's iteration",
)  # fmt: skip
