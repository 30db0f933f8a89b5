"""The claim rules (docs/claims.md) driven through every outcome each can reach, on synthetic records."""

import itertools

import pandas as pd
import pytest

from dlrm_study.analysis import evidence as ev
from dlrm_study.analysis import stats, verdicts

GPU = "intel-xeon/avx512f+avx512_bf16+amx_bf16/16cpu/nvidia-h200"
XEON = "intel-xeon/avx512f+avx512_bf16/2cpu"
ZEN3 = "amd-epyc-f25m1s1/avx2/2cpu"
UNRECORDED = "intel-xeon/isa-unrecorded/2cpu"
JITTER = (1.0, 1.01, 0.99, 1.02, 0.98, 1.005, 0.995)


def rows(machine: str, variant: str, rate: float, n: int = 5, run: str = "r1", flags: str = "", **columns) -> list:
    """One record per repeat of one run, `rate` samples/s times a small jitter."""
    return [
        {"machine": machine, "variant": variant, "repeat": i, "run_id": run, "samples_per_s": rate * JITTER[i],
         "flags": flags, "threads": 2, "timestamp": f"2026-12-01T00:00:{i:02d}", "rules_hash": "", **columns}
        for i in range(n)
    ]  # fmt: skip


def evidence(**parts: object) -> ev.Evidence:
    empty = pd.DataFrame()
    base = dict.fromkeys(["cpu_loops", "convergence", "scaling", "remote", "cache", "gpu"], empty)
    base["gpu"] = pd.DataFrame(rows(GPU, "gpu-hbm", 1.0, device="cuda"))
    return ev.Evidence(**{**base, **parts})


def verdict(claim: str, machine: str, **parts: object) -> verdicts.Verdict:
    return verdicts.judge(claim, evidence(**parts).of(machine), machine)


# --- H1 -------------------------------------------------------------------------------------------


def knob(effect: float, n: int = 5, run: str = "r1") -> pd.DataFrame:
    return pd.DataFrame(
        rows(GPU, "gpu-hbm", 100.0, n, run, x=1.0) + rows(GPU, "gpu-hbm", 100.0 * effect, n, run, x=9.0)
    )


@pytest.mark.parametrize(
    ("effects", "n", "run", "status"),
    [
        ({"lookups": 0.4}, 5, "r1", "reproduced"),  # 2.5x slower at the far end: strong, whichever way
        ({}, 5, "r1", "not reproduced"),  # every knob within 1.5x
        ({"lookups": None}, 5, "r1", "inconclusive"),  # one knob missing: nothing strong, not all measured
        ({}, 3, "r1", "too few repeats"),
        ({}, 5, "", "too few repeats"),  # records without a run id: ends measured apart, never paired
    ],
)
def test_h1_outcomes(effects: dict, n: int, run: str, status: str) -> None:
    knobs = {k: knob(1.1, n, run) for k in ev.H1_KNOBS}
    for name, effect in effects.items():
        if effect is None:
            del knobs[name]
        else:
            knobs[name] = knob(effect, n, run)
    assert verdict("H1", GPU, gpu_knobs=knobs).status == status


def test_gpu_claims_need_a_gpu_and_its_records() -> None:
    for claim in ("H1", "H2", "H3", "H4"):
        assert verdict(claim, XEON).status == "not measurable here"
    assert verdict("H1", GPU, gpu=pd.DataFrame()).status == "not yet measured"


def test_unrecorded_machines_are_not_judged() -> None:
    assert all(verdict(c, UNRECORDED).status == "unrecorded machine" for c in verdicts.CLAIMS)


# --- H2 / H3 --------------------------------------------------------------------------------------


def grid(machine: str, variant: str, rate: dict[tuple[int, int], float], n: int = 5, device: str = "cpu") -> list:
    out = []
    for (dense, tables), value in rate.items():
        columns = {"model.dense_features": dense, "model.table_rows": f"{tables}x100", "device": device}
        out += rows(machine, variant, value, n, **columns)
    return out


def grid_evidence(gpu_rate: dict, cpu_rate: dict, n: int = 5, cpu_machine: str = GPU) -> dict:
    """The GPU grid's sweep: gpu-hbm and its host's CPU loops (`host-*`), one run."""
    slow = {k: 1.0 for k in cpu_rate}
    cpu = grid(cpu_machine, "host-optimized-fp32", cpu_rate, n) + grid(cpu_machine, "host-optimized-bf16", slow, n)
    return {"gpu_grid": pd.DataFrame(grid(GPU, "gpu-hbm", gpu_rate, n, "cuda") + cpu)}


CPU_FLAT = {(16, 2): 10.0, (1024, 2): 10.0, (16, 32): 10.0, (1024, 32): 10.0}


@pytest.mark.parametrize(
    ("gpu_rate", "claim", "status"),
    [
        ({(16, 2): 100, (1024, 2): 300, (16, 32): 50, (1024, 32): 150}, "H2", "reproduced"),
        ({(16, 2): 300, (1024, 2): 100, (16, 32): 150, (1024, 32): 50}, "H2", "not reproduced"),
        (
            {(16, 2): 100, (1024, 2): 300, (16, 32): 150, (1024, 32): 50},
            "H2",
            "inconclusive",
        ),  # up at one, down at the other
        ({(16, 2): 100, (1024, 2): 300, (16, 32): 50, (1024, 32): 150}, "H3", "reproduced"),
        ({(16, 2): 50, (1024, 2): 100, (16, 32): 100, (1024, 32): 200}, "H3", "not reproduced"),
    ],
)
def test_grid_claims(gpu_rate: dict, claim: str, status: str) -> None:
    assert verdict(claim, GPU, **grid_evidence(gpu_rate, CPU_FLAT)).status == status


def test_grid_claims_need_the_gpu_hosts_own_cpu_records_and_enough_repeats() -> None:
    rate = {(16, 2): 100, (1024, 2): 300, (16, 32): 50, (1024, 32): 150}
    other_machine = grid_evidence(rate, CPU_FLAT, cpu_machine=XEON)  # a ratio never spans two machines
    assert verdict("H2", GPU, **other_machine).status == "not yet measured"
    assert verdict("H2", GPU, **grid_evidence(rate, CPU_FLAT, n=3)).status == "too few repeats"


def test_grid_claims_compare_with_the_fastest_cpu_loop_in_the_records() -> None:
    rate = {(16, 2): 100, (1024, 2): 300, (16, 32): 50, (1024, 32): 150}
    text = verdict("H2", GPU, **grid_evidence(rate, CPU_FLAT)).evidence
    assert "GPU / optimized-fp32" in text  # bf16 ran at 1.0 samples/s here, fp32 at 10


# --- H4 -------------------------------------------------------------------------------------------


def placements(host: float, uvm: float, cached: float, n: int = 5) -> pd.DataFrame:
    parts = [rows(GPU, f"gpu-{v}", r, n) for v, r in (("hbm", 1.0), ("host", host), ("uvm", uvm), ("cached", cached))]
    return pd.DataFrame(list(itertools.chain(*parts)))


@pytest.mark.parametrize(
    ("host", "uvm", "cached", "n", "status"),
    [
        (0.3, 0.5, 0.9, 5, "reproduced"),  # best off-GPU 0.5; the cache wins back more than half
        (0.3, 0.95, 0.78, 5, "not reproduced"),  # uvm loses little; the cache is slower than uvm
        (1.2, 1.1, 1.3, 5, "not reproduced"),  # off-GPU tables cost nothing
        (0.3, 0.5, 0.75, 5, "inconclusive"),  # needed: 0.75, right at the cache's rate
        (0.3, 0.5, 0.9, 3, "too few repeats"),
    ],
)
def test_h4_outcomes(host: float, uvm: float, cached: float, n: int, status: str) -> None:
    assert verdict("H4", GPU, gpu_placements=placements(host, uvm, cached, n)).status == status


# --- S1 -------------------------------------------------------------------------------------------


def loops(config: str, rates: dict[str, float], n: int = 5, **columns) -> list:
    return [r for v, rate in rates.items() for r in rows(XEON, v, rate, n, config_name=config, **columns)]


@pytest.mark.parametrize(
    ("speedup", "n", "status"),
    [
        (150.0, 5, "reproduced"),
        (20.0, 5, "not reproduced"),
        (110.0, 5, "inconclusive"),
        (500.0, 1, "too few repeats"),  # one 500x pair is no verdict
        (150.0, 3, "too few repeats"),
    ],
)
def test_s1_outcomes(speedup: float, n: int, status: str) -> None:
    records = pd.DataFrame(loops("dlrm-benchmark", {"reference": 1.0, "optimized-fp32": speedup}, n))
    reference = records["variant"] == "reference"
    records.loc[reference, "samples_per_s"] = list(reversed(JITTER[:n]))  # ratios vary between repeats
    assert verdict("S1", XEON, cpu_loops=records).status == status


def test_s1_spanning_interval_is_inconclusive_not_refuted() -> None:
    """110x [24.6, 489] said "not reproduced" before; an interval across 110x decides nothing."""
    wide = [0.3, 3.0, 0.4, 2.5, 1.0]
    records = pd.DataFrame(loops("dlrm-benchmark", {"reference": 1.0, "optimized-fp32": 110.0}))
    fast = records["variant"] == "optimized-fp32"
    records.loc[fast, "samples_per_s"] = [110.0 * w for w in wide]
    assert verdict("S1", XEON, cpu_loops=records).status == "inconclusive"


def test_flagged_slow_repeats_make_a_verdict_fragile_and_leave_the_all_repeats_one() -> None:
    """Flagged repeats are slower (as in the records): with them S1 is refuted, without them too few pairs remain."""
    records = pd.DataFrame(loops("dlrm-benchmark", {"reference": 1.0, "optimized-fp32": 20.0}, n=6))
    records.loc[(records["variant"] == "optimized-fp32") & (records["repeat"] < 2), "flags"] = "spread"
    v = verdict("S1", XEON, cpu_loops=records)
    assert v.status == "fragile"
    assert "all repeats: not reproduced" in v.evidence and "flagged repeats removed: too few repeats" in v.evidence


# --- S2 -------------------------------------------------------------------------------------------


def breakdown(update_share: float, n: int = 5) -> pd.DataFrame:
    out = rows(XEON, "reference", 1.0, n, config_name="dlrm-benchmark")
    for i, row in enumerate(out):
        share = update_share * JITTER[i]
        row.update({f"op_{name}_ms": 0.0 for name in ("bottom_mlp", "interaction", "top_mlp", "loss", "dense_backward",
                                                       "optimizer_step", "other")})  # fmt: skip
        row.update(op_embedding_backward_update_ms=100 * share, op_embedding_forward_ms=5.0,
                   op_bottom_mlp_ms=95 - 100 * share)  # fmt: skip
    return pd.DataFrame(out)


@pytest.mark.parametrize(
    ("share", "n", "status"),
    [(0.7, 5, "reproduced"), (0.3, 5, "not reproduced"), (0.5, 5, "inconclusive"), (0.7, 4, "too few repeats")],
)
def test_s2_outcomes(share: float, n: int, status: str) -> None:
    assert verdict("S2", XEON, cpu_loops=breakdown(share, n)).status == status


def test_s2_judges_backward_and_update_alone_with_forward_beside_it() -> None:
    text = verdict("S2", XEON, cpu_loops=breakdown(0.45)).evidence
    assert "embedding backward + update: 45%" in text and "forward beside it: 5%" in text


def test_shares_get_intervals_inside_zero_and_one() -> None:
    _, low, high = stats.share_interval([0.97, 0.99, 0.6])
    assert 0 < low < high < 1


# --- S3 -------------------------------------------------------------------------------------------


def aucs(gaps: list[float]) -> pd.DataFrame:
    out = []
    for seed, gap in enumerate(gaps):
        for variant, auc in (("optimized-fp32", 0.80), ("optimized-bf16", 0.80 + gap)):
            out.append({"machine": XEON, "variant": variant, "kind": "eval", "eval_auc": auc, "train.seed": seed})
    return pd.DataFrame(out)


@pytest.mark.parametrize(
    ("machine", "bf16", "gaps", "n", "status"),
    [
        (XEON, 1.5, [0.0003, -0.0002, 0.0001], 5, "reproduced"),
        (XEON, 0.7, [0.0, 0.0, 0.0], 5, "not reproduced"),  # slower on both presets
        (XEON, 1.5, [0.010, 0.011, 0.012], 5, "not reproduced"),  # faster, but the AUC moved
        (XEON, 1.5, [0.0003], 5, "too few repeats"),  # accuracy from one seed
        (XEON, 1.5, [0.0], 3, "too few repeats"),
        (XEON, 1.5, [0.001, 0.003, 0.0025], 5, "inconclusive"),  # the gap's interval crosses the margin
        (ZEN3, 1.5, [0.0, 0.0, 0.0], 5, "not measurable here"),  # bf16 emulated
    ],
)
def test_s3_outcomes(machine: str, bf16: float, gaps: list[float], n: int, status: str) -> None:
    records = pd.DataFrame(
        loops("dlrm-benchmark", {"optimized-fp32": 1.0, "optimized-bf16": bf16}, n)
        + loops("mlperf-scaled", {"optimized-fp32": 1.0, "optimized-bf16": bf16}, n)
    ).assign(machine=machine)
    v = verdict("S3", machine, cpu_loops=records, convergence=aucs(gaps).assign(machine=machine))
    assert v.status == status


def test_s3_names_the_hardware_class() -> None:
    records = pd.DataFrame(loops("dlrm-benchmark", {"optimized-fp32": 1.0, "optimized-bf16": 1.5}))
    assert "native bf16 without AMX" in verdict("S3", XEON, cpu_loops=records).evidence


# --- pairing ---------------------------------------------------------------------------------------


def test_records_of_two_runs_or_two_machines_never_pair() -> None:
    a = pd.DataFrame(rows(XEON, "a", 2.0, run="r1") + rows(XEON, "b", 1.0, run="r2"))
    assert stats.paired_ratio(a, "a", "b").n == 0
    b = pd.DataFrame(rows(XEON, "a", 2.0) + rows(GPU, "b", 1.0))
    assert stats.paired_ratio(b, "a", "b").n == 0
    assert stats.paired_ratio(pd.DataFrame(rows(XEON, "a", 2.0) + rows(XEON, "b", 1.0)), "a", "b").n == 5


def test_two_records_of_one_cell_are_an_error() -> None:
    doubled = pd.DataFrame(rows(XEON, "a", 2.0) + rows(XEON, "a", 2.1) + rows(XEON, "b", 1.0))
    with pytest.raises(ValueError, match="two records of one cell"):
        stats.paired_ratio(doubled, "a", "b")


def test_a_verdict_word_needs_enough_pairs() -> None:
    assert stats.direction(1.2, 1.5, "faster", "slower", n=4).startswith("too few repeats")
    assert stats.direction(1.2, 1.5, "faster", "slower", n=5) == "faster"


def test_a_view_with_every_record_flagged_pairs_nothing() -> None:
    every = pd.DataFrame(rows(XEON, "a", 2.0, flags="spread") + rows(XEON, "b", 1.0, flags="spread"))
    f = stats.paired_finding(every, "a", "b")
    assert f.all.n == 5 and f.clean.n == 0 and f.word.startswith("fragile")
