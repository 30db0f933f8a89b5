"""S1 (SC20): optimizing every operator gives a large single-socket speedup (110x in 2020).

The optimized loop over the 2020 reference step at a full socket's cores (S1_CORES), on S1_PRESET; below that
size it is not measurable here, and what was measured is shown (no projection: docs/claims.md).
"""

import pandas as pd

from dlrm_study.analysis import stats
from dlrm_study.analysis.evidence import Evidence
from dlrm_study.analysis.judgement import Judgement, Status, decided
from dlrm_study.analysis.readers import leave_out
from dlrm_study.analysis.wording import variant_words
from dlrm_study.claims.claim import SC20, Claim
from dlrm_study.claims.rule import OTHER_PRESETS, Lens, counted, most_threads, outcome, ratio_text, too_few
from dlrm_study.config.variants import OPTIMIZED_BF16, OPTIMIZED_FP32, REFERENCE
from dlrm_study.plans.baseline import OLD
from dlrm_study.records import Machine
from dlrm_study.records import columns as col
from dlrm_study.rules import literal

ID = "S1"
S1_FACTOR, S1_CORES, S1_PRESET = literal(ID, "factor"), literal(ID, "cores"), literal(ID, "preset")


def s1(evidence: Evidence, machine: str, lens: Lens) -> Judgement:
    """The optimized loop over the 2020 reference step at a full socket's cores (S1_CORES): below that, not
    measurable here, with what was measured (the 2020 stack to today's, optimization, threads); no projection
    (docs/claims.md: neither S1's nor S4's is printed)."""
    m = Machine.parse(machine)
    loop = OPTIMIZED_BF16 if m.native_bf16 else OPTIMIZED_FP32  # the one comparison the rule reads
    said = variant_words(loop)
    old, loops = evidence.baseline, evidence.cpu_loops
    old = leave_out(old, old[col.CONFIG_NAME] == S1_PRESET, OTHER_PRESETS) if not old.empty else old
    if not loops.empty:
        loops = most_threads(leave_out(loops, loops[col.CONFIG_NAME] == S1_PRESET, OTHER_PRESETS))
    parts = []
    if not old.empty:
        for threads, group in old.groupby(col.THREADS):
            today, ours = lens.paired(group, REFERENCE, OLD), lens.paired(group, loop, OLD)
            parts.append(f"at {int(threads)} thread(s): today's reference {ratio_text(today)} and {said} "
                         f"{ratio_text(ours)} over the 2020 step")  # fmt: skip
    if not loops.empty:
        parts.append(f"{said} over today's reference at {int(loops[col.THREADS].max())} threads: "
                     f"{ratio_text(lens.paired(loops, loop, REFERENCE))}")  # fmt: skip
    if m.cpus < S1_CORES:  # what the machine is decides first: no record could make it a socket
        why = f"{m.cpus} logical CPUs, the claim is of a {S1_CORES}-core socket against the 2020 step"
        measured = "; measured: " + "; ".join(parts) if parts else ""
        return counted(Judgement(Status.NOT_MEASURABLE, why + measured), old, loops)
    if old.empty:
        said = "; measured: " + "; ".join(parts) if parts else ""
        return counted(Judgement(Status.NOT_YET, f"no 2020 step here (make baseline-2020){said}"), old, loops)
    at_most = most_threads(old)
    r = lens.paired(at_most, loop, OLD)
    threads = int(at_most[col.THREADS].max())
    text = f"{said} over the 2020 step at {threads} threads: {ratio_text(r)}, against {S1_FACTOR:g}x"
    if not lens.enough(r):
        return counted(too_few({loop: r}, text), at_most, loops)
    return counted(decided(outcome(r, S1_FACTOR), text, {loop: r}), at_most, loops)


def deciding(evidence: Evidence) -> list[pd.DataFrame]:
    old = evidence.baseline
    if old.empty:
        return []
    loop = OPTIMIZED_BF16 if (old[col.VARIANT] == OPTIMIZED_BF16).any() else OPTIMIZED_FP32
    return [stats.pairs(most_threads(old[old[col.CONFIG_NAME] == S1_PRESET]), loop, OLD)]


CLAIM = Claim(
    ID, "optimizing every operator gives a large single-socket speedup (110x in 2020)", SC20,
    f"{S1_FACTOR:.0f}x on a {S1_CORES}-core socket over the 2020 step",
    ("baseline", "cpu_loops"), s1, "02_cpu_optimizations", deciding,
    names=lambda loop: f"{variant_words(loop)} over the 2020 step",
)  # fmt: skip
