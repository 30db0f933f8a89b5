"""Asymmetric cases of the verdict layer (issue 68): each built so that one of the claims layer's mutations
(`tests/claims_mutations.py`) turns its status, where the symmetric fixtures (both presets the same ratios, every
comparison the same runs, one thread count, the run that turns a verdict sorting first) let it pass.

Each case is also a scenario of the golden fixture (`tests/golden/scenarios.py`, `asymmetric`), so the rules' id
moves with any of these statuses.
"""

import math

import pandas as pd
from tests.test_verdicts import (
    GPU,
    PATTERN,
    SAME,
    XEON,
    aucs,
    breakdown,
    judged,
    placements,
    ratios,
    rows,
    speed,
    spread_shares,
    verdict,
)

# --- S3 ---------------------------------------------------------------------------------------------


def s3_speed_apart() -> pd.DataFrame:
    """dlrm-benchmark spans 1.62x (1.70x), mlperf-scaled lies below it (1.30x), each at the level S3 reads."""
    return pd.DataFrame(speed(XEON, ratios(1.7, 1.5), ("dlrm-benchmark",))
                        + speed(XEON, ratios(1.3, 1.2), ("mlperf-scaled",)))  # fmt: skip


def s3_fewer_threads() -> pd.DataFrame:
    """bf16 reaches at the machine's most threads (2); at 1 thread, in runs of their own, it is no faster."""
    slow = [{**r, "threads": 1} for r in speed(XEON, ratios(1.0, 0.95), run="t1")]
    return pd.DataFrame(speed(XEON, ratios(1.9, 1.8)) + slow)


def s3_turned_by_the_last_run() -> pd.DataFrame:
    """Three runs of dlrm-benchmark at 2.0x, 0.5% and 0.25% above it: only without the last-sorted run (r1-2, the
    middle value) are the two left 0.5% apart, an interval over 2 runs (1 degree of freedom) that spans 1.62x."""
    return pd.DataFrame(speed(XEON, [2.0, 2.0 * math.exp(0.005), 2.0 * math.exp(0.0025)], ("dlrm-benchmark",)))


def test_s3_is_refuted_only_where_every_preset_lies_below() -> None:
    """One preset spanning the reach and the other below it is inconclusive, not "not reproduced" (the "and" of
    "both below")."""
    v = verdict("S3", XEON, cpu_loops=s3_speed_apart(), accuracy=aucs(XEON, SAME))
    assert v.status == "inconclusive", v.evidence


def test_s3_reads_the_machines_most_threads_alone() -> None:
    """Records at fewer threads than the machine's most (no faster there) are left out, counted: reproduced."""
    v = verdict("S3", XEON, cpu_loops=s3_fewer_threads(), accuracy=aucs(XEON, SAME))
    assert v.status == "reproduced", v.evidence
    assert v.left_out["at fewer threads than the machine's most"] > 0


def test_leave_one_out_leaves_out_the_last_sorted_run_too() -> None:
    """Reproduced over every run; fragile without r1-2, the run that sorts last (after the accuracy's `acc`)."""
    parts = {"cpu_loops": s3_turned_by_the_last_run(), "accuracy": aucs(XEON, SAME)}
    assert verdict("S3", XEON, **parts).status == "reproduced"
    v = judged("S3", XEON, **parts)
    assert v.status == "fragile" and "without run r1-2" in v.detail, v.detail


# --- S2 ---------------------------------------------------------------------------------------------


def s2_one_preset_one_run() -> pd.DataFrame:
    """dlrm-benchmark over 5 runs, mlperf-scaled over 1."""
    return pd.concat([breakdown(spread_shares(0.7)), breakdown(spread_shares(0.7)[:1], preset="mlperf-scaled")])


def s2_above_at_95_only() -> pd.DataFrame:
    """mlperf-scaled at 52%: above 50% at the look's level of 95% ([50.2%, 53.8%] at 98.9%), across it at the
    look's level of 1 - 0.05/2 ([49.8%, 54.2%] at 99.5%)."""
    return pd.concat([breakdown(spread_shares(0.7)),
                      breakdown([0.52 + 0.011 * z for z in PATTERN[:5]], preset="mlperf-scaled")])  # fmt: skip


def s2_below_at_the_family_of_two() -> pd.DataFrame:
    """Two presets measured; mlperf-scaled at 48%: below 50% at the look's level of 1 - 0.05/2 ([46.1%, 49.9%]),
    across it at that of 1 - 0.05/3 ([45.9%, 50.1%]: the family of the three presets S2 could measure)."""
    return pd.concat([breakdown(spread_shares(0.7)),
                      breakdown([0.48 + 0.0096 * z for z in PATTERN[:5]], preset="mlperf-scaled")])  # fmt: skip


def test_s2_needs_its_runs_at_every_preset() -> None:
    """One preset over 5 runs and another over 1: one run (the gate is over every preset), no verdict word."""
    assert verdict("S2", XEON, cpu_loops=s2_one_preset_one_run()).status == "one run"


def test_s2_holds_by_each_presets_95_percent_interval() -> None:
    """Reproduced is an "and" over the presets: each at (the look's level of) 95%, not at the "or"'s 1 - 0.05/m."""
    v = verdict("S2", XEON, cpu_loops=s2_above_at_95_only())
    assert v.status == "reproduced", v.evidence


def test_s2s_family_counts_the_presets_measured() -> None:
    """Not reproduced is an "or" over the presets measured (2 here): each read at (the look's level of) 1 - 0.05/2."""
    v = verdict("S2", XEON, cpu_loops=s2_below_at_the_family_of_two())
    assert v.status == "not reproduced", v.evidence


# --- H2 / H3 ----------------------------------------------------------------------------------------


def grid_one_run_at(claim: str) -> pd.DataFrame:
    """The grid with 5 runs at one value of the other axis and 1 run at its other value (H2: 5 at 2 tables, 1 at
    32; H3: 5 at 16 dense features, 1 at 1024); every change the claimed way."""
    out = []
    for (dense, tables), value in {(16, 2): 100, (1024, 2): 300, (16, 32): 50, (1024, 32): 150}.items():
        n = 5 if (tables if claim == "H2" else dense) in (2, 16) else 1
        columns = {"model.dense_features": dense, "model.table_rows": f"{tables}x100"}
        out += rows(GPU, "gpu-hbm", [value * (1 + 0.03 * PATTERN[i]) for i in range(n)], device="cuda", **columns)
        out += rows(GPU, "host-optimized-fp32", [10.0] * n, device="cpu", **columns)
        out += rows(GPU, "host-optimized-bf16", [1.0] * n, device="cpu", **columns)
    return pd.DataFrame(out)


def test_grid_claims_need_their_runs_at_every_change() -> None:
    """A change over 5 runs and another over 1: one run (the gate is over every change), for H2 and H3 alike."""
    for claim in ("H2", "H3"):
        v = verdict(claim, GPU, gpu_grid=grid_one_run_at(claim))
        assert v.status == "one run", (claim, v.evidence)


# --- H4 ---------------------------------------------------------------------------------------------


def h4_host_above_1_at_95_only() -> pd.DataFrame:
    """Host over hbm at 1.10x: wholly above 1 at 95% ([1.01, 1.20]), across it at 97.5%; the cache wins back 80%
    of every repeat's loss."""
    host = ratios(1.1, 1.01)
    return placements(host, [h + (0.8 + 0.01 * z) * (1 - h) for h, z in zip(host, PATTERN, strict=False)])


def test_h4_refutes_host_memorys_cost_at_1_minus_0_05_over_2() -> None:
    """Host memory's cost refuted is one side of an "or" (read at 97.5%): above 1 at 95% only is inconclusive."""
    v = verdict("H4", GPU, gpu_placements=h4_host_above_1_at_95_only())
    assert v.status == "inconclusive", v.evidence


# --- which records are current ----------------------------------------------------------------------


def renamed(frame: pd.DataFrame) -> pd.DataFrame:
    """The same records in runs of other ids (`n1-0` ..)."""
    return frame.assign(run_id="n" + frame["run_id"])


def s2_newest_code_named_first() -> pd.DataFrame:
    """Older code ("bbb", November) at 70%, the newest ("aaa", December) at 30%: the newest by time, whatever
    its name, is judged."""
    old = breakdown(spread_shares(0.7)).assign(code_fingerprint="bbb", timestamp="2026-11-01T00:00:00")
    new = renamed(breakdown(spread_shares(0.3))).assign(code_fingerprint="aaa", timestamp="2026-12-01T00:00:00")
    return pd.concat([old, new])


def s2_runs_of_mixed_codes() -> pd.DataFrame:
    """Runs r1-0 .. r1-4 hold reference records of two codes: dlrm-benchmark's of the newest ("ref2", at 30%) beside
    mlperf-scaled's of an older one ("ref1"); runs n1-0 .. n1-4 measured dlrm-benchmark at the newest code alone, at
    70%. A run's records of one loop are history whole where it holds a record of that loop at an older code: the
    r1 runs are history, their 30% too, and S2 reads the n1 runs: reproduced."""

    def code(frame: pd.DataFrame, fingerprint: str, stamp: str) -> pd.DataFrame:
        return frame.assign(**{"train.loop": "reference", "code_fingerprint": fingerprint, "timestamp": stamp})

    nov, dec = "2026-11-01T00:00:00", "2026-12-01T00:00:00"
    return pd.concat([code(breakdown(spread_shares(0.3)), "ref2", dec),
                      code(breakdown(spread_shares(0.3), preset="mlperf-scaled"), "ref1", nov),
                      code(renamed(breakdown(spread_shares(0.7))), "ref2", dec)])  # fmt: skip


def test_the_newest_code_is_the_latest_measured_not_the_last_named() -> None:
    v = verdict("S2", XEON, cpu_loops=s2_newest_code_named_first())
    assert v.status == "not reproduced", v.evidence


def test_a_run_holding_older_code_is_history_whole() -> None:
    v = verdict("S2", XEON, cpu_loops=s2_runs_of_mixed_codes())
    assert v.status == "reproduced", v.evidence
    assert v.left_out["earlier code (history)"] == 2 * 2 * 5  # both presets of the r1 runs: a warm-up and a repeat
