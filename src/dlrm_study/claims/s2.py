"""S2 (SC20): in the reference, embedding backward and update dominate the iteration.

The share of the reference's profiled iteration in embedding backward + update, against S2_SHARE, at each timed
preset (S2_PRESETS), each judged and named.
"""

import math

import pandas as pd

from dlrm_study.analysis import stats
from dlrm_study.analysis.cpu import embedding_share_rows, largest_operator
from dlrm_study.analysis.evidence import Evidence
from dlrm_study.analysis.identity import RECORDS, record_ids
from dlrm_study.analysis.judgement import Judgement, Status, decided
from dlrm_study.analysis.power import XEON_AMX, Design, Measured, Reader, records
from dlrm_study.analysis.readers import leave_out
from dlrm_study.analysis.sequential import look_confidence
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
    reproduced where some preset's (at 1 - 0.05/m) lies below it. The runs are read at every look of the
    sequential design, so each interval it judges is at the look's level (`sequential.look_confidence`); the
    shares it prints are the 95% intervals every figure prints of the same quantity (one quantity, one value)."""
    ref = s2_records(evidence)
    if ref.empty:
        return counted(Judgement(Status.NOT_YET), ref)
    presets = [p for p in S2_PRESETS if p in set(ref[col.CONFIG_NAME])]
    each, family = look_confidence(stats.CONFIDENCE), look_confidence(stats.family(len(presets)))
    shares, held, strict, parts = {}, {}, {}, []
    for preset in presets:
        rows = embedding_share_rows(ref[ref[col.CONFIG_NAME] == preset])
        forward = embedding_share_rows(ref[ref[col.CONFIG_NAME] == preset], ("embedding_forward",))
        shares[preset] = lens.ratio(rows, value="share", share=True)
        held[preset] = lens.ratio(rows, each, value="share", share=True)
        strict[preset] = lens.ratio(rows, family, value="share", share=True)
        f, r = lens.ratio(forward, value="share", share=True), shares[preset]
        biggest, its = largest_operator(rows)
        parts.append(f"{preset} {amount(r)}, forward beside it {describe(*f[:3], percent=True)}"
                     + (f", largest operator {biggest} ({its:.0%}, median)" if biggest else ""))  # fmt: skip
    text = (f"embedding backward + update in the reference's profiled iteration at "
            f"{int(ref[col.THREADS].max())} threads: " + "; ".join(parts) + f"; threshold {S2_SHARE:.0%}, judged at "
            f"{each:.1%} each (the looks' level), shown at 95%")  # fmt: skip
    if not all(lens.enough(r) for r in shares.values()):
        return counted(too_few(shares, text), ref)
    sides = {p: side(r, S2_SHARE) for p, r in held.items()}
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


# The design of its deciding comparisons (`analysis.power`): the reference's profiled shares per preset.
S2_FILES = (("sweeps.csv", "cpu-loops-quick"),)
CLASS_CODE = "a3d3afd44e4d"  # the reference's code in the judged classes' committed runs (`designs.class_runs`)


def s2_shares(machine: str, code: str, preset: str, runs: int | None = None) -> pd.DataFrame:
    """The reference's share of its profiled iteration in embedding backward + update, per profiled repeat."""
    frame = records(S2_FILES, machine, code, runs)
    frame = frame[(frame[col.CONFIG_NAME] == preset) & (frame[col.VARIANT] == REFERENCE)]
    return embedding_share_rows(frame[frame[col.op_column("embedding_backward_update")].notna()])


READER = Reader(s2_shares, "share", "logit", timed=False)  # the profiled window's shares: as measured
S2_SOURCES = {
    "dlrm-benchmark": (
        Measured("amd-epyc-f23m1s2/avx2/2cpu", "ec2605cfdf0d", 2, 4, (15,), 0.4507, 0.013, 0.0),
        Measured("amd-epyc-f25m1s1/avx2/2cpu", "4558f71d66c2", 2, 4, (15,), 0.5543, 0.046, 0.0322),
        Measured("amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu", "", 1, 4, (20,), 0.5369, 0.0448, math.nan),
        Measured("intel-xeon/avx512f+avx512_bf16/2cpu", "", 2, 6, (10, 20), 0.6614, 0.255, 0.0),
        Measured(XEON_AMX, "a3d3afd44e4d", 7, 21, (10,), 0.6176, 0.0597, 0.0199),
    ),
    "mlperf-scaled": (
        Measured("amd-epyc-f23m1s2/avx2/2cpu", "ec2605cfdf0d", 2, 4, (15,), 0.0392, 0.0283, 0.1387),
        Measured("amd-epyc-f25m1s1/avx2/2cpu", "4558f71d66c2", 2, 4, (15,), 0.0536, 0.0617, 0.0818),
        Measured("amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu", "", 1, 4, (20,), 0.0614, 0.2506, math.nan),
        Measured("intel-xeon/avx512f+avx512_bf16/2cpu", "", 2, 6, (10, 20), 0.0711, 0.1376, 0.1023),
        Measured(XEON_AMX, "a3d3afd44e4d", 7, 21, (10,), 0.0715, 0.0716, 0.0889),
    ),
    "kaggle": (
        Measured("amd-epyc-f23m1s2/avx2/2cpu", "ec2605cfdf0d", 2, 4, (15,), 0.1816, 0.0778, 0.031),
        Measured("amd-epyc-f25m1s1/avx2/2cpu", "4558f71d66c2", 2, 4, (15,), 0.2204, 0.0753, 0.0),
        Measured("amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu", "", 1, 4, (20,), 0.1726, 0.0749, math.nan),
        Measured("intel-xeon/avx512f+avx512_bf16/2cpu", "", 2, 6, (10, 20), 0.1986, 0.0736, 0.0),
        Measured(XEON_AMX, "a3d3afd44e4d", 7, 21, (10,), 0.2166, 0.0893, 0.0806),
    ),
}
S2_BASIS = (
    "the reference's profiled shares on every machine's newest code (results/sweeps.csv cpu-loops-quick); the "
    "largest within and between SDs (a share comes from the profiled window, 5 steps in the records and the design: "
    "not rescaled); truths: the shares the machines nearest 50% showed"
)
DESIGNS = (
    Design(ID, "dlrm-benchmark", "logit", 0.5, 0.5369, 0.4507, 0.95, 1 - 0.05 / 3, 0.255, 0.0322, S2_BASIS,
           S2_SOURCES["dlrm-benchmark"]),
    Design(ID, "mlperf-scaled", "logit", 0.5, None, 0.0715, 0.95, 1 - 0.05 / 3, 0.2506, 0.1387,
           S2_BASIS + "; no machine's share lies above 50% here (4-7%), so no truth under the claim",
           S2_SOURCES["mlperf-scaled"]),
    Design(ID, "kaggle", "logit", 0.5, None, 0.2204, 0.95, 1 - 0.05 / 3, 0.0893, 0.0806,
           S2_BASIS + "; no machine's share lies above 50% here (17-22%), so no truth under the claim",
           S2_SOURCES["kaggle"]),
)  # fmt: skip


CLAIM = Claim(
    ID, "in the reference, embedding backward and update dominate", SC20,
    f"more than {S2_SHARE:.0%} of the reference's iteration",
    ("cpu_loops",), s2, "01_cpu_reference_breakdown", deciding,
    quantity="embedding backward + update, share of the reference's iteration",
    designs=DESIGNS,
    reader=READER,
)  # fmt: skip
