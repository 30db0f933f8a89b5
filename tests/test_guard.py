"""The load guard (`studies.guard`): a run's host condition read around it, contention named with its reason, and
the verdicts leaving a caught run's records out, counted (`analysis.contention`); and a fresh measurement's
agreement with the committed one (`report.fresh.prediction`)."""

import math
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from dlrm_study.analysis import contention
from dlrm_study.analysis.evidence import Evidence
from dlrm_study.analysis.readers import left_out
from dlrm_study.claims import registry
from dlrm_study.records import store
from dlrm_study.report import fresh
from dlrm_study.studies import guard

TICK = os.sysconf("SC_CLK_TCK")
XEON_AMX = "intel-xeon-f6m207s2/avx512f+avx512_bf16+amx_bf16/2cpu"
RESULTS = Path(__file__).resolve().parents[1] / "results"


def at(wall: float, busy_s: float, steal_s: float, children_s: float, probe_s: float = 0.1) -> guard.Condition:
    return guard.Condition(wall, int(busy_s * TICK), int(steal_s * TICK), 0, children_s, probe_s)


def test_others_are_the_busy_time_the_run_did_not_spend() -> None:
    """100 s on 2 CPUs: the run used 150 CPU seconds and the machine was busy 170: others took 10%."""
    others, steal = guard.shares(at(0, 0, 0, 0), at(100, 170, 4, 150), cpus=2)
    assert others == pytest.approx(0.10, abs=0.001) and steal == pytest.approx(0.02, abs=0.001)


@pytest.mark.parametrize(
    ("others", "steal", "probe", "said"),
    [
        (0.02, 0.0, 0.10, ""),
        (0.25, 0.0, 0.10, "other processes used 25% of the CPUs"),
        (0.0, 0.08, 0.10, "the hypervisor stole 8%"),
        (0.0, 0.0, 0.14, "the probe ran 1.40x its quiet time"),
    ],
)
def test_a_run_is_contended_for_a_named_reason(others: float, steal: float, probe: float, said: str) -> None:
    assert guard.verdict(others, steal, probe, quiet_s=0.10) == said


def test_the_guards_rows_mark_the_runs_the_verdicts_leave_out(tmp_path: Path) -> None:
    """Two runs' rows, one contended: only its records (machine, invocation, process) are left out, counted."""
    quiet, loaded = (at(0, 0, 0, 0), at(100, 150, 0, 150)), (at(0, 0, 0, 0), at(100, 190, 0, 150, probe_s=0.2))
    guard.record(tmp_path, XEON_AMX, "inv", "cpu-loops", 1, 11, *quiet)
    row = guard.record(tmp_path, XEON_AMX, "inv", "cpu-loops", 2, 12, *loaded)
    assert "other processes used 20%" in row["contended"] and "probe ran 2.00x" in row["contended"]
    caught = contention.contended_runs(tmp_path)
    assert caught == {(XEON_AMX, "inv", "12")}
    frame = pd.DataFrame({"machine": [XEON_AMX] * 3, "invocation": ["inv", "inv", "other"],
                          "process_id": [11, 12, 12], "run_id": ["a", "b", "c"]})  # fmt: skip
    kept = contention.without_contended(frame, caught)
    assert list(kept["run_id"]) == ["a", "c"]
    assert left_out(kept)[contention.CONTENDED] == 1


def copy_of_results(tmp_path: Path) -> Path:
    out = tmp_path / "results"
    out.mkdir()
    for path in RESULTS.glob("*.csv"):
        shutil.copy(path, out / path.name)
    return out


def test_a_class_slowed_below_the_claim_reads_not_reproduced(tmp_path: Path) -> None:
    """The committed records with every bf16 record of the AMX Xeon slowed until each preset's ratio is at most
    0.8x: S3 there reads "not reproduced" (it reads "reproduced" on the records as they are)."""
    out = copy_of_results(tmp_path)
    claim = registry.claim("S3")
    assert claim.judge(Evidence.load(out, "quick").of(XEON_AMX), XEON_AMX).status == "reproduced"
    for name in ("sweeps.csv", "bench.csv"):
        frame = store.load(out / name)
        slow = (frame["machine"] == XEON_AMX) & (frame["variant"] == "optimized-bf16")
        frame.loc[slow, "samples_per_s"] = frame.loc[slow, "samples_per_s"] * 0.8 / 3.6  # 3.45x at most -> < 0.8x
        frame.loc[slow, "ms_median"] = frame.loc[slow, "ms_median"] * 3.6 / 0.8
        frame.to_csv(out / name, index=False)
    found = claim.judge(Evidence.load(out, "quick").of(XEON_AMX), XEON_AMX)
    assert found.status == "not reproduced", found.detail


def test_a_fresh_invocation_agrees_within_the_prediction_interval_not_the_confidence_interval() -> None:
    """Committed: two invocations of 6 runs whose means differ by 0.10 on the log scale, runs within 0.02. A fresh
    invocation 0.06 above the committed mean lies outside the committed confidence interval of the mean but
    inside the prediction interval, which carries the between-invocation spread; 0.5 above it does not."""
    runs = [0.01 * ((i % 3) - 1) for i in range(6)]
    committed = [("a", 0.80 + x) for x in runs] + [("b", 0.90 + x) for x in runs]
    centre, low, high, how = fresh.prediction(committed, fresh_runs=5)
    assert centre == pytest.approx(0.85) and "2 committed invocations" in how
    assert low < 0.91 < high and not low < 1.35 < high
    one = fresh.prediction([("a", 0.80 + x) for x in runs], fresh_runs=5)
    assert "not estimable" in one[3] and one[2] - one[1] < high - low
    assert math.isnan(fresh.prediction([("a", 0.8)], 5)[0])


def test_the_quiet_time_is_a_low_quantile_not_one_lucky_probe(tmp_path: Path) -> None:
    """One probe far faster than the rest (a moment the host's other tenants were idle) does not become the bar:
    from QUIET_FROM probes on, the quiet time is their QUIET_QUANTILE; fewer, the fastest."""
    few = [0.030, 0.016, 0.027]
    for i, probe in enumerate(few):
        guard.record(tmp_path, XEON_AMX, "inv", "cpu-loops", i, i, at(0, 0, 0, 0, probe_s=probe),
                     at(100, 100, 0, 100, probe_s=probe))  # fmt: skip
    assert guard.quiet_time(tmp_path, XEON_AMX, 0.026) == 0.016
    for i in range(8):
        probe = 0.024 + 0.001 * i
        guard.record(tmp_path, XEON_AMX, "inv", "cpu-loops", 10 + i, 10 + i, at(0, 0, 0, 0, probe_s=probe),
                     at(100, 100, 0, 100, probe_s=probe))  # fmt: skip
    quiet = guard.quiet_time(tmp_path, XEON_AMX, 0.026)
    assert 0.016 < quiet < 0.025  # the tenth of 23 probes, not the lucky one
    assert guard.verdict(0.0, 0.0, 0.027, quiet) == ""  # a usual probe is no contention
    assert "probe ran" in guard.verdict(0.0, 0.0, 1.4 * quiet, quiet)
