"""The claim rules (docs/claims.md) driven through every outcome each can reach, on synthetic records.

Pairs are built with spread (`ratios`: a chosen centre and interval), so a rule that reads the wrong end
of an interval, or one tail where it should read two, fails here.
"""

import math

import pandas as pd
import pytest

from dlrm_study.analysis import evidence as ev
from dlrm_study.analysis import stats, verdicts
from dlrm_study.analysis.views import MIN_CLEAN

GPU = "intel-xeon/avx512f+avx512_bf16+amx_bf16/16cpu/nvidia-h200"
XEON = "intel-xeon/avx512f+avx512_bf16/2cpu"
AMX = "intel-xeon-f6m143s8/avx512f+avx512_bf16+amx_bf16/2cpu"
SOCKET = "intel-xeon/avx512f+avx512_bf16/56cpu"  # a full 28-core socket (two threads a core)
ZEN3 = "amd-epyc-f25m1s1/avx2/2cpu"
UNRECORDED = "intel-xeon/isa-unrecorded/2cpu"
PATTERN = (-1.0, 1.0, -0.5, 0.5, 0.0, -0.25, 0.25, -0.75, 0.75, 0.1)  # deviations of the pairs' logs


def ratios(center: float, low: float, n: int = 5) -> list[float]:
    """n ratios whose 95% interval (geometric mean, t on the logs) is [low, center**2 / low]."""
    z = PATTERN[:n]
    mean = sum(z) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in z) / (n - 1))
    scale = math.log(center / low) * math.sqrt(n) / (stats.t975(n - 1) * sd)
    return [center * math.exp(scale * (x - mean)) for x in z]


def rows(machine: str, variant: str, rates: list[float], run: str = "r1", flags: str = "", threads: int = 2,
         **columns) -> list[dict]:  # fmt: skip
    """One record per repeat of one run, the given samples/s."""
    return [
        {"machine": machine, "variant": variant, "repeat": i, "run_id": run, "samples_per_s": rate,
         "ms_median": 1e3 / rate, "flags": flags, "threads": threads, "timestamp": f"2026-12-01T00:00:{i:02d}",
         "rules_hash": "", **columns}
        for i, rate in enumerate(rates)
    ]  # fmt: skip


def paired(machine: str, variant: str, baseline: str, pair_ratios: list[float], run: str = "r1", **columns) -> list:
    """Records of two variants whose per-repeat ratios are `pair_ratios` (the baseline's rates jitter too)."""
    base = [100.0 * (1 + 0.01 * ((i % 3) - 1)) for i in range(len(pair_ratios))]
    return rows(machine, baseline, base, run, **columns) + rows(
        machine, variant, [b * r for b, r in zip(base, pair_ratios, strict=True)], run, **columns
    )


def evidence(**parts: object) -> ev.Evidence:
    base = {"gpu": pd.DataFrame(rows(GPU, "gpu-hbm", [1.0] * 5, device="cuda"))}  # every other study: none
    return ev.Evidence(**{**base, **parts})


def verdict(claim: str, machine: str, **parts: object) -> verdicts.Verdict:
    return verdicts.judge(claim, evidence(**parts).of(machine), machine)


# --- H1 -------------------------------------------------------------------------------------------


def knob(far: list[float], run: str = "r1") -> pd.DataFrame:
    """A knob's sweep on the GPU: samples/s at its far end (x=9) over its near end (x=1), per repeat."""
    frame = pd.DataFrame(paired(GPU, "far", "near", far, run))
    return frame.assign(x=frame["variant"].map({"near": 1.0, "far": 9.0}), variant="gpu-hbm")


WITHIN = ratios(1.0, 0.8)  # [0.80, 1.25]: inside [1/1.5, 1.5]


def h1(overrides: dict) -> str:
    knobs = {k: knob(WITHIN) for k in ev.H1_KNOBS}
    for name, far in overrides.items():
        if far is None:
            del knobs[name]
        else:
            knobs[name] = knob(far) if isinstance(far, list) else far
    return verdict("H1", GPU, gpu_knobs=knobs).status


@pytest.mark.parametrize(
    ("overrides", "status"),
    [
        ({"lookups": ratios(0.4, 0.36)}, "reproduced"),  # 2.5x slower at the far end: strong, down
        ({"mlp_width": ratios(3.0, 2.7)}, "reproduced"),  # 3x faster: strong, up
        ({}, "not reproduced"),  # every knob's interval inside [1/1.5, 1.5]
        ({"lookups": None}, "inconclusive"),  # one knob missing: nothing strong, not all measured
        ({"rows": ratios(0.9, 0.6)}, "inconclusive"),  # [0.60, 1.35]: crosses 1/1.5, so not within (two tails)
    ],
)
def test_h1_outcomes(overrides: dict, status: str) -> None:
    assert h1(overrides) == status


def test_h1_reads_both_tails_and_corrects_for_six_knobs() -> None:
    assert h1({"rows": ratios(1.0, 1 / 1.4)}) == "not reproduced"  # [0.71, 1.40]: inside both bounds
    assert h1({"rows": ratios(0.9, 0.6)}) == "inconclusive"  # its lower end is past 1/1.5
    assert h1({"lookups": ratios(1.8, 1.7)}) == "reproduced"  # beyond 1.5 even at 1 - 0.05/6
    assert h1({"lookups": ratios(1.7, 1.52)}) == "inconclusive"  # beyond 1.5 at 95%, not at 1 - 0.05/6


def test_h1_needs_pairs_within_runs() -> None:
    few = {k: knob(WITHIN[:3]) for k in ev.H1_KNOBS}
    assert verdict("H1", GPU, gpu_knobs=few).status == "too few repeats"
    unpaired = {k: knob(WITHIN, run="") for k in ev.H1_KNOBS}  # no run id: ends measured apart, never paired
    assert verdict("H1", GPU, gpu_knobs=unpaired).status == "too few repeats"


def test_gpu_claims_need_a_gpu_and_its_records() -> None:
    for claim in ("H1", "H2", "H3", "H4"):
        assert verdict(claim, XEON).status == "not measurable here"
    assert verdict("H1", GPU, gpu=pd.DataFrame()).status == "not yet measured"


def test_unrecorded_machines_are_not_judged() -> None:
    assert all(verdict(c, UNRECORDED).status == "unrecorded machine" for c in verdicts.CLAIMS)


# --- H2 / H3 --------------------------------------------------------------------------------------


def grid(gpu_rate: dict, n: int = 5, cpu_machine: str = GPU, spread: float = 0.03) -> dict:
    """The GPU grid's sweep: gpu-hbm and its host's CPU loops (`host-*`), one run; GPU rates jitter by `spread`."""
    out = []
    for (dense, tables), value in gpu_rate.items():
        columns = {"model.dense_features": dense, "model.table_rows": f"{tables}x100"}
        jitter = [value * (1 + spread * PATTERN[(i + len(out)) % len(PATTERN)]) for i in range(n)]
        out += rows(GPU, "gpu-hbm", jitter, device="cuda", **columns)
        out += rows(cpu_machine, "host-optimized-fp32", [10.0] * n, device="cpu", **columns)
        out += rows(cpu_machine, "host-optimized-bf16", [1.0] * n, device="cpu", **columns)
    return {"gpu_grid": pd.DataFrame(out)}


UP = {(16, 2): 100, (1024, 2): 300, (16, 32): 50, (1024, 32): 150}


@pytest.mark.parametrize(
    ("gpu_rate", "claim", "status"),
    [
        (UP, "H2", "reproduced"),
        ({(16, 2): 300, (1024, 2): 100, (16, 32): 150, (1024, 32): 50}, "H2", "not reproduced"),
        ({(16, 2): 100, (1024, 2): 300, (16, 32): 150, (1024, 32): 50}, "H2", "inconclusive"),  # up at one, down
        ({(16, 2): 100, (1024, 2): 101, (16, 32): 100, (1024, 32): 101}, "H2", "inconclusive"),  # spans 1
        (UP, "H3", "reproduced"),
        ({(16, 2): 50, (1024, 2): 100, (16, 32): 100, (1024, 32): 200}, "H3", "not reproduced"),
    ],
)
def test_grid_claims(gpu_rate: dict, claim: str, status: str) -> None:
    assert verdict(claim, GPU, **grid(gpu_rate)).status == status


def test_grid_claims_need_the_gpu_hosts_own_cpu_records_and_enough_repeats() -> None:
    assert verdict("H2", GPU, **grid(UP, cpu_machine=XEON)).status == "not yet measured"  # never two machines
    assert verdict("H2", GPU, **grid(UP, n=3)).status == "too few repeats"
    assert "GPU / optimized-fp32" in verdict("H2", GPU, **grid(UP)).evidence  # the fastest CPU loop of the records


# --- H4 -------------------------------------------------------------------------------------------


def placements(host: list[float], cached: list[float], uvm: list[float] | None = None) -> pd.DataFrame:
    parts = paired(GPU, "gpu-host", "gpu-hbm", host) + paired(GPU, "gpu-cached", "gpu-hbm", cached)[len(host) :]
    if uvm:
        parts += paired(GPU, "gpu-uvm", "gpu-hbm", uvm)[len(uvm) :]
    return pd.DataFrame(parts)


@pytest.mark.parametrize(
    ("host", "cached", "status"),
    [
        (ratios(0.3, 0.28), ratios(0.9, 0.85), "reproduced"),  # needed(0.32) = 0.66: the cache wins back more
        (ratios(1.2, 1.1), ratios(1.3, 1.2), "not reproduced"),  # host memory costs nothing
        (ratios(0.3, 0.28), ratios(0.5, 0.47), "not reproduced"),  # the cache wins back less than half
        (ratios(0.3, 0.28), ratios(0.65, 0.55), "inconclusive"),  # the cache's interval spans needed(host)
        (ratios(0.3, 0.28)[:4], ratios(0.9, 0.85)[:4], "too few repeats"),
    ],
)
def test_h4_outcomes(host: list, cached: list, status: str) -> None:
    assert verdict("H4", GPU, gpu_placements=placements(host, cached)).status == status


def test_h4_without_placements_and_on_a_cpu() -> None:
    assert verdict("H4", GPU, gpu_placements=pd.DataFrame(columns=["variant"])).status == "not yet measured"
    remote = pd.DataFrame(paired(XEON, "remote", "local", ratios(0.9, 0.8)))
    v = verdict("H4", XEON, remote=remote)
    assert v.status == "not measurable here" and "remote tables over local tables" in v.evidence


# --- S1 -------------------------------------------------------------------------------------------


def baseline(machine: str, speedup: list[float], threads: int) -> pd.DataFrame:
    columns = {"config_name": "dlrm-benchmark", "threads": threads}
    ours = paired(machine, "optimized-bf16", "reference-2020", speedup, **columns)
    today = paired(machine, "reference", "reference-2020", [3.0] * len(speedup), **columns)[len(speedup) :]
    return pd.DataFrame(ours + today)


@pytest.mark.parametrize(
    ("speedup", "status"),
    [
        (ratios(150.0, 130.0), "reproduced"),
        (ratios(40.0, 30.0), "not reproduced"),
        (ratios(110.0, 60.0), "inconclusive"),  # the interval spans 110x: decides nothing
        (ratios(150.0, 130.0, n=3), "too few repeats"),
    ],
)
def test_s1_outcomes_at_a_full_socket(speedup: list, status: str) -> None:
    assert verdict("S1", SOCKET, baseline=baseline(SOCKET, speedup, threads=28)).status == status


def test_s1_below_a_socket_is_not_measurable_and_shows_what_was_measured() -> None:
    v = verdict("S1", XEON, baseline=baseline(XEON, ratios(13.0, 11.0), threads=2))
    assert v.status == "not measurable here" and "over the 2020 step" in v.evidence and "28-core" in v.evidence
    loops = pd.DataFrame(paired(XEON, "optimized-bf16", "reference", ratios(3.0, 2.8), config_name="dlrm-benchmark"))
    v = verdict("S1", XEON, cpu_loops=loops)
    assert v.status == "not measurable here" and "over today's reference at 2 threads" in v.evidence
    assert verdict("S1", XEON).status == "not yet measured"


# --- S2 -------------------------------------------------------------------------------------------


def breakdown(shares: list[float], flags: list[str] | None = None) -> pd.DataFrame:
    out = rows(XEON, "reference", [1.0] * len(shares), config_name="dlrm-benchmark")
    for i, (row, share) in enumerate(zip(out, shares, strict=True)):
        row.update({f"op_{name}_ms": 0.0 for name in ("interaction", "top_mlp", "loss", "dense_backward",
                                                       "optimizer_step", "other")})  # fmt: skip
        row.update(op_embedding_backward_update_ms=100 * share, op_embedding_forward_ms=5.0,
                   op_bottom_mlp_ms=95 - 100 * share, flags=(flags or [""] * len(shares))[i])  # fmt: skip
    return pd.DataFrame(out)


def spread_shares(center: float, n: int = 5) -> list[float]:
    return [center + 0.02 * z for z in PATTERN[:n]]


@pytest.mark.parametrize(
    ("shares", "status"),
    [
        (spread_shares(0.7), "reproduced"),
        (spread_shares(0.3), "not reproduced"),
        (spread_shares(0.5), "inconclusive"),
        (spread_shares(0.7, 4), "too few repeats"),
    ],
)
def test_s2_outcomes(shares: list, status: str) -> None:
    assert verdict("S2", XEON, cpu_loops=breakdown(shares)).status == status


def test_s2_judges_backward_and_update_alone_with_forward_beside_it() -> None:
    text = verdict("S2", XEON, cpu_loops=breakdown(spread_shares(0.45))).evidence
    assert "embedding backward + update: 45%" in text and "forward beside it: 5%" in text
    assert verdict("S2", XEON).status == "not yet measured"


def test_s2_with_too_few_unflagged_repeats_is_not_assessable() -> None:
    flags = ["spread"] * 4 + [""]
    v = verdict("S2", XEON, cpu_loops=breakdown(spread_shares(0.7), flags))
    assert v.status == "reproduced" and "robustness not assessable" in v.note


# --- S3 -------------------------------------------------------------------------------------------


def speed(machine: str, bf16: list[float], presets: tuple[str, ...] = ("dlrm-benchmark", "mlperf-scaled")) -> list:
    return [r for p in presets for r in paired(machine, "optimized-bf16", "optimized-fp32", bf16, config_name=p)]


def aucs(machine: str, gaps: list[float]) -> pd.DataFrame:
    out = []
    for seed, gap in enumerate(gaps):
        for variant, auc in (("optimized-fp32", 0.80), ("optimized-bf16", 0.80 + gap)):
            out.append({"machine": machine, "variant": variant, "kind": "eval", "eval_auc": auc, "train.seed": seed,
                        "run_id": "acc", "config_name": "dlrm-benchmark", "rules_hash": ""})  # fmt: skip
    return pd.DataFrame(out)


SAME = [0.0003, -0.0002, 0.0001]


@pytest.mark.parametrize(
    ("machine", "bf16", "gaps", "status", "said"),
    [
        (XEON, ratios(1.9, 1.8), SAME, "reproduced", ""),
        (XEON, ratios(1.3, 1.2), SAME, "not reproduced", "faster but short of 1.8x"),
        (XEON, ratios(0.7, 0.65), SAME, "not reproduced", "not faster enough"),
        (XEON, ratios(1.9, 1.8), [0.010, 0.011, 0.012], "not reproduced", "accuracy differs"),
        (XEON, ratios(1.9, 1.8), [0.0003], "too few repeats", "needs 3 seeds"),
        (XEON, ratios(1.9, 1.8)[:3], SAME, "too few repeats", ""),
        (XEON, ratios(1.7, 1.5), SAME, "inconclusive", ""),  # the interval spans 1.62x
        (XEON, ratios(1.9, 1.8), [0.001, 0.003, 0.0025], "inconclusive", ""),  # the gap's interval crosses 0.002
        (ZEN3, ratios(1.9, 1.8), SAME, "not measurable here", "no native bf16"),
        (AMX, ratios(1.9, 1.8), SAME, "reproduced", "native bf16 with AMX"),
    ],
)
def test_s3_outcomes(machine: str, bf16: list, gaps: list, status: str, said: str) -> None:
    v = verdict("S3", machine, cpu_loops=pd.DataFrame(speed(machine, bf16)), accuracy=aucs(machine, gaps))
    assert v.status == status and said in v.evidence


def test_s3_without_records_and_with_one_preset() -> None:
    assert verdict("S3", XEON).status == "not yet measured"
    other = pd.DataFrame(paired(XEON, "optimized-bf16", "reference", ratios(1.9, 1.8), config_name="dlrm-benchmark"))
    assert verdict("S3", XEON, cpu_loops=other).status == "not yet measured"  # no bf16/fp32 pair
    one = pd.DataFrame(speed(XEON, ratios(1.9, 1.8), ("mlperf-scaled",)))
    assert verdict("S3", XEON, cpu_loops=one, accuracy=aucs(XEON, SAME)).status == "reproduced"


def test_s3_accuracy_is_the_bf16_class_s() -> None:
    """Another machine of the same bf16 class measured the accuracy: it counts; one of another class does not."""
    loops = pd.DataFrame(speed(XEON, ratios(1.9, 1.8)))
    same_class = aucs("amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu", SAME)
    assert verdict("S3", XEON, cpu_loops=loops, accuracy=same_class).status == "reproduced"
    assert verdict("S3", XEON, cpu_loops=loops, accuracy=aucs(AMX, SAME)).status == "too few repeats"


# --- S4 -------------------------------------------------------------------------------------------


def test_s4_needs_a_cluster() -> None:
    assert verdict("S4", XEON).status == "not yet measured"


# --- robustness: flags are a sensitivity check, never a filter --------------------------------------


def flag(records: pd.DataFrame, variant: str, repeats: list[int], what: str = "spread") -> pd.DataFrame:
    records = records.copy()
    records.loc[(records["variant"] == variant) & records["repeat"].isin(repeats), "flags"] = what
    return records


def test_flagged_slow_repeats_leave_the_verdict_alone() -> None:
    """Two slow repeats, flagged: the verdict is over every pair; without them it says the same."""
    base = ratios(1.9, 1.8, n=7)
    slow = [r * (0.9 if i < 2 else 1.0) for i, r in enumerate(base)]
    loops = flag(pd.DataFrame(speed(XEON, slow)), "optimized-bf16", [0, 1])
    v = verdict("S3", XEON, cpu_loops=loops, accuracy=aucs(XEON, SAME))
    assert v.status == "reproduced" and "(7 pairs)" in v.evidence


def test_a_verdict_is_fragile_only_where_the_unflagged_pairs_turn_it_over() -> None:
    """Over all 13 pairs S1 is reproduced; the 3 unflagged pairs (another run) say not reproduced: fragile."""
    high = baseline(SOCKET, ratios(1000.0, 900.0, n=10), threads=28).assign(run_id="r1")
    high = flag(high, "optimized-bf16", list(range(10)))
    low = baseline(SOCKET, ratios(40.0, 35.0, n=3), threads=28).assign(run_id="r2")
    v = verdict("S1", SOCKET, baseline=pd.concat([high, low], ignore_index=True))
    assert v.status == "fragile", v
    assert "over every pair reproduced" in v.evidence and "without the flagged pairs not reproduced" in v.evidence


def test_a_verdict_with_too_few_unflagged_pairs_says_so() -> None:
    records = flag(baseline(SOCKET, ratios(150.0, 130.0), threads=28), "optimized-bf16", [0, 1, 2])
    v = verdict("S1", SOCKET, baseline=records)
    assert v.status == "reproduced" and "robustness not assessable" in v.note
    assert MIN_CLEAN == 3


def test_a_pair_whose_members_slowed_together_is_no_outlier() -> None:
    """Repeat 2 ran 30% slow on both members: the ratio is like the others, so no pair is flagged."""
    records = pd.DataFrame(paired(XEON, "a", "b", ratios(2.0, 1.9)))
    records.loc[records["repeat"] == 2, "samples_per_s"] *= 0.7
    found = stats.pairs(records, "a", "b")
    from dlrm_study.analysis.flags import pair_flags

    assert not pair_flags(found).any()


def test_an_outlier_pair_is_judged_within_its_run() -> None:
    """A far pair is an outlier of its run; a second run does not change which pairs of the first are flagged."""
    from dlrm_study.analysis.flags import pair_flags

    first = ratios(2.0, 1.95, n=6)
    first[3] = 4.0
    one = pd.DataFrame(paired(XEON, "a", "b", first, run="r1"))
    flagged_one = list(pair_flags(stats.pairs(one, "a", "b")))
    both = pd.concat([one, pd.DataFrame(paired(XEON, "a", "b", ratios(1.0, 0.95), run="r2"))], ignore_index=True)
    found = stats.pairs(both, "a", "b")
    flagged_both = pair_flags(found)
    assert flagged_one.count(True) == 1
    assert list(flagged_both[found["run_id"] == "r1"]) == flagged_one


# --- pairing ---------------------------------------------------------------------------------------


def test_records_of_two_runs_two_machines_or_two_thread_counts_never_pair() -> None:
    a = pd.DataFrame(rows(XEON, "a", [2.0] * 5, run="r1") + rows(XEON, "b", [1.0] * 5, run="r2"))
    assert stats.paired_ratio(a, "a", "b").n == 0
    b = pd.DataFrame(rows(XEON, "a", [2.0] * 5) + rows(GPU, "b", [1.0] * 5))
    assert stats.paired_ratio(b, "a", "b").n == 0
    c = pd.DataFrame(rows(XEON, "a", [2.0] * 5, threads=1) + rows(XEON, "b", [1.0] * 5, threads=2))
    assert stats.paired_ratio(c, "a", "b").n == 0
    assert stats.paired_ratio(pd.DataFrame(rows(XEON, "a", [2.0] * 5) + rows(XEON, "b", [1.0] * 5)), "a", "b").n == 5


def test_a_second_run_of_a_cell_adds_pairs() -> None:
    one = paired(XEON, "a", "b", ratios(2.0, 1.9), run="r1")
    two = one + paired(XEON, "a", "b", ratios(2.0, 1.9), run="r2")
    assert stats.paired_ratio(pd.DataFrame(one), "a", "b").n == 5
    assert stats.paired_ratio(pd.DataFrame(two), "a", "b").n == 10


def test_two_records_of_one_cell_in_one_run_are_an_error() -> None:
    doubled = pd.DataFrame(rows(XEON, "a", [2.0] * 5) + rows(XEON, "a", [2.1] * 5) + rows(XEON, "b", [1.0] * 5))
    with pytest.raises(ValueError, match="two records of one cell"):
        stats.paired_ratio(doubled, "a", "b")


def test_the_centre_is_the_one_the_interval_is_built_on() -> None:
    r = stats.Ratio.of([1.0, 1.0, 4.0])  # median 1, geometric mean 4 ** (1/3)
    assert r.center == pytest.approx(4 ** (1 / 3))
    assert r.low < r.center < r.high and math.log(r.high / r.center) == pytest.approx(math.log(r.center / r.low))
