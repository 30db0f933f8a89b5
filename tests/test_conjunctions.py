"""Claims of two halves (S3: speed and accuracy; H4: host memory's cost and the cache's recovery) are decided as
logic (`judgement.conjunction`): either half not reproduced refutes the claim whatever the other's state; both
reproduced reproduce it; otherwise the half short of evidence says so, else inconclusive. Each case of the truth
table, then scenarios through the real rules (`claims.s3.s3`, `claims.h4.h4`), asserting the Status."""

import pandas as pd
import pytest
from tests.test_verdicts import GPU, XEON, aucs, evidence, only, paired, placements, ratios, speed

from dlrm_study.analysis import evidence as ev
from dlrm_study.analysis.judgement import Judgement, Status, conjunction
from dlrm_study.claims import h4 as h4_claim
from dlrm_study.claims import s3 as s3_claim
from dlrm_study.claims.rule import Lens

R, N, INC = Status.REPRODUCED, Status.NOT_REPRODUCED, Status.INCONCLUSIVE
ONE, FEW, YET = Status.ONE_RUN, Status.TOO_FEW, Status.NOT_YET

TRUTH = [  # (a, b, a and b): every unordered pair of half outcomes, each asserted both ways
    (R, R, R),
    (R, N, N),
    (R, INC, INC),
    (R, ONE, ONE),
    (R, FEW, FEW),
    (R, YET, YET),
    (N, N, N),
    (N, INC, N),
    (N, ONE, N),
    (N, FEW, N),
    (N, YET, N),
    (INC, INC, INC),
    (INC, ONE, ONE),
    (INC, FEW, FEW),
    (INC, YET, YET),
    (ONE, ONE, ONE),
    (ONE, FEW, FEW),  # the half with least evidence speaks: none paired, or too few, before one run
    (ONE, YET, YET),
    (FEW, FEW, FEW),
    (FEW, YET, YET),
    (YET, YET, YET),
]


@pytest.mark.parametrize(("a", "b", "both"), TRUTH)
def test_each_case_of_the_truth_table(a: Status, b: Status, both: Status) -> None:
    assert conjunction(a, b) == both
    assert conjunction(b, a) == both


def test_the_truth_table_covers_every_pair_of_half_outcomes() -> None:
    halves = {R, N, INC, ONE, FEW, YET}
    assert {frozenset((a, b)) for a, b, _ in TRUTH} == {frozenset((a, b)) for a in halves for b in halves}


@pytest.mark.parametrize("other", [Status.FRAGILE, Status.NOT_MEASURABLE, Status.UNRECORDED, Status.MACHINES_DISAGREE])
def test_a_half_is_a_rules_outcome(other: Status) -> None:
    with pytest.raises(ValueError, match="a half of a claim"):
        conjunction(R, other)


# --- S3 through its rule -----------------------------------------------------------------------------------


def s3(bf16: list[float] | None = None, presets: tuple[str, ...] = s3_claim.S3_PRESETS,
       gains: list[float] | None = None, more: list | None = None) -> Status:  # fmt: skip
    """S3's status on XEON (native bf16): bf16 over fp32 per run at `presets` (None: no speed records), `more`
    records beside them, and the accuracy half's per-seed gains (None: no accuracy records)."""
    loops = (speed(XEON, bf16, presets) if bf16 else []) + (more or [])
    parts = {"cpu_loops": pd.DataFrame(loops)} | ({"accuracy": aucs(XEON, gains)} if gains else {})
    return s3_claim.s3(ev.Evidence(**parts).of(XEON), XEON, Lens()).status


SLOW = ratios(0.81, 0.63)  # 0.81x [0.63, 1.04] over 5 runs: wholly below 1.62x, even at 1 - 0.05/2
FAST = ratios(1.9, 1.8)
SAME = [1.0003, 0.9998, 1.0001]  # the accuracy half holds
WORSE = [0.95, 0.94, 0.96]  # the accuracy half fails


def test_a_failed_speed_half_is_not_hidden_by_an_accuracy_half_without_seeds() -> None:
    """(Fails before, at one preset: the accuracy half's "too few" was returned before the speed half's failure.)"""
    assert s3(SLOW) == N  # no accuracy records
    assert s3(SLOW, gains=SAME[:1]) == N  # one seed: too few
    assert s3(SLOW, ("mlperf-scaled",)) == N  # the one preset that has pairs
    assert s3(SLOW, ("mlperf-scaled",), gains=SAME[:1]) == N


def test_a_failed_accuracy_half_is_not_hidden_by_a_speed_half_short_of_runs() -> None:
    """(Fails before: "one run" was returned before the accuracy half was read; without speed pairs, "not yet
    measured".)"""
    assert s3(FAST[:1], gains=WORSE) == N  # one run
    assert s3(FAST[:2], gains=WORSE) == N  # two runs: short of MIN_RUNS
    assert s3(None, gains=WORSE) == N  # no speed pairs at all


def test_s3_reproduced_needs_both_halves() -> None:
    assert s3(FAST, gains=SAME) == R
    assert s3(FAST) == FEW  # no accuracy records: too few seeds
    assert s3(FAST, gains=SAME[:2]) == FEW
    assert s3(FAST[:1], gains=SAME) == ONE
    assert s3(FAST[:2], gains=SAME) == FEW
    assert s3(None, gains=SAME) == YET


def test_s3_an_inconclusive_half_beside_one_short_of_evidence_is_short_of_evidence() -> None:
    spans = ratios(1.7, 1.5)  # spans 1.62x
    assert s3(spans, gains=SAME) == INC
    assert s3(spans, gains=SAME[:1]) == FEW
    assert s3(FAST, gains=[0.99, 1.0, 0.98]) == INC  # the gain's interval spans 99%
    assert s3(FAST[:1], gains=[0.99, 1.0, 0.98]) == ONE


def test_s3_speed_half_waits_on_a_preset_short_of_runs_unless_another_reaches() -> None:
    """Short at one preset, the other preset measured in one run: the speed half lacks evidence (the other preset
    could reach); above at one preset, the other's single run does not matter (some preset reaches)."""
    one_run = speed(XEON, FAST[:1], ("mlperf-scaled",), run="x")
    assert s3(SLOW, ("dlrm-benchmark",), gains=SAME, more=one_run) == ONE
    assert s3(FAST, ("dlrm-benchmark",), gains=SAME, more=one_run) == R


# --- H4 through its rule -----------------------------------------------------------------------------------


def h4(frame: pd.DataFrame) -> Status:
    return h4_claim.h4(evidence(gpu_placements=frame).of(GPU), GPU, Lens()).status  # with GPU records


def cached_in_first_run(host: list[float], won: float) -> pd.DataFrame:
    """host/hbm in every run; cached (winning back `won` of host's loss) in the first run only: the recovery has
    one run."""
    frame = pd.DataFrame(paired(GPU, "gpu-host", "gpu-hbm", host))
    cached = only(paired(GPU, "gpu-cached", "gpu-hbm", [host[0] + won * (1 - host[0])]), "gpu-cached")
    return pd.concat([frame, pd.DataFrame(cached)], ignore_index=True)


def test_h4_host_costing_nothing_refutes_it_whatever_the_recovery() -> None:
    """Host 1.2x [1.1, 1.3] over hbm (5 runs), the cache in one run: not reproduced. (Fails before: "one run".)"""
    assert h4(cached_in_first_run(ratios(1.2, 1.1), 0.8)) == N


def test_h4_host_costing_with_a_recovery_of_one_run_is_one_run() -> None:
    assert h4(cached_in_first_run(ratios(0.3, 0.28), 0.8)) == ONE


def test_h4_host_cost_needs_host_wholly_below_1() -> None:
    """Host 0.95x [0.85, 1.06] spans 1, the cache winning back 80% +- 1% of each repeat's loss: inconclusive (a
    rule that read host's low end below 1 as a cost would say reproduced)."""
    host = ratios(0.95, 0.85)
    won = [0.8 + 0.01 * z for z in (-1.0, 1.0, -0.5, 0.5, 0.0)]
    assert h4(placements(host, [h + w * (1 - h) for h, w in zip(host, won, strict=True)])) == INC
    below = ratios(0.5, 0.45)
    assert h4(placements(below, [h + w * (1 - h) for h, w in zip(below, won, strict=True)])) == R


def test_s3_says_where_its_benchmark_cannot_tell_split_sgd_from_plain_bf16():
    """A note of the verdict where the control did not fail at small steps, and the ledger's class row prints it
    beside the machine's word (a cell has no room for it); none where the control failed."""
    from dlrm_study.analysis.convergence import FAILS, HOLDS, AccuracyJudgement
    from dlrm_study.claims.s3 import CONTROL_KEPT, control_notes
    from dlrm_study.report.ledger import class_rows

    assert control_notes(AccuracyJudgement(status=HOLDS, plain_status=HOLDS, control_status=HOLDS)) == (CONTROL_KEPT,)
    assert "does not tell Split-SGD" in CONTROL_KEPT
    assert control_notes(AccuracyJudgement(status=HOLDS, plain_status=FAILS, control_status=FAILS)) == ()
    host = "amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu"
    kept = Judgement(Status.INCONCLUSIVE, "speed and accuracy", notes=(CONTROL_KEPT,))
    row = [line for line in class_rows("S3", {host: kept}, [host], {}) if line.startswith("- ")]
    assert row == [f"- S3 on native bf16 without AMX: **inconclusive** (`{host}` inconclusive ({CONTROL_KEPT}))"]


def test_s3_a_control_that_kept_the_gain_at_small_steps_leaves_s3_inconclusive() -> None:
    """Split-SGD keeps fp32's gain in both regimes and the speed half reaches: reproduced only where the control
    fails at small steps; kept there, the accuracy half is untested (inconclusive); not trained there, too few."""
    from tests.test_verdicts import aucs as both_regimes

    def with_control(share: float, regimes: tuple[str, ...] = ("", "-small-steps")) -> Status:
        accuracy = both_regimes(XEON, SAME, regimes)
        plain = accuracy["variant"] == "optimized-bf16-plain-sgd"
        accuracy.loc[plain, "eval_auc"] = 0.5 + 0.3 * share
        parts = {"cpu_loops": pd.DataFrame(speed(XEON, FAST)), "accuracy": accuracy}
        return s3_claim.s3(evidence(**parts).of(XEON), XEON, Lens()).status

    assert with_control(0.9) == R
    assert with_control(1.0) == INC
    assert with_control(0.9, ("",)) == FEW
