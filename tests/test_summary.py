"""The GPU claims' verdict rules (H1-H4), on synthetic records of known effect."""

import pandas as pd

from dlrm_study.studies import summary

GPU = "intel-xeon/avx512f/nvidia-h200"
CPU = "intel-xeon/avx512f"


def rows(host: str, variant: str, rates: list[float], **columns: object) -> list[dict[str, object]]:
    """One record per repeat, unflagged, with the given samples/s."""
    return [
        {"host": host, "machine": host, "variant": variant, "repeat": i, "samples_per_s": rate, "flags": "",
         "timestamp": f"2026-12-01T00:00:0{i}", **columns}
        for i, rate in enumerate(rates)
    ]  # fmt: skip


def evidence(**parts: object) -> summary.Evidence:
    empty = pd.DataFrame()
    base = {"cpu_loops": empty, "convergence": empty, "scaling": empty, "remote": empty, "cache": empty}
    gpu = pd.DataFrame(rows(GPU, "gpu-hbm", [1.0]))  # the host has GPU records
    return summary.Evidence(**{**base, "gpu": gpu, **parts})


def knob(effect: float, spread: float = 0.01) -> pd.DataFrame:
    """gpu-hbm at a knob's two ends; the far end `effect` times the near one, 3 repeats."""
    near = [100.0, 100.0 * (1 + spread), 100.0 * (1 - spread)]
    return pd.DataFrame(rows(GPU, "gpu-hbm", near, x=1.0) + rows(GPU, "gpu-hbm", [effect * r for r in near], x=10.0))


def test_h1_reproduced_when_one_knob_moves_throughput_strongly() -> None:
    knobs = {k: knob(1.1) for k in summary.H1_KNOBS}
    assert summary.h1(evidence(gpu_knobs=knobs), GPU).status == "not reproduced"
    knobs["lookups"] = knob(0.4)  # 2.5x slower at the far end: strong, whichever way
    verdict = summary.h1(evidence(gpu_knobs=knobs), GPU)
    assert verdict.status == "reproduced" and "0.40" in verdict.evidence
    del knobs["lookups"]  # a knob missing: no longer sure nothing is strong
    assert summary.h1(evidence(gpu_knobs=knobs), GPU).status == "inconclusive"


def test_h1_leaves_flagged_repeats_out() -> None:
    knobs = {k: knob(1.1).assign(flags="spread") for k in summary.H1_KNOBS}
    verdict = summary.h1(evidence(gpu_knobs=knobs), GPU)
    assert verdict.status == "inconclusive" and "36 of 36 repeats flagged" in verdict.evidence


def test_gpu_claims_need_a_gpu_host() -> None:
    assert summary.h1(evidence(), CPU).status == "not measurable here"
    assert summary.h2(evidence(), CPU).status == "not measurable here"


def grid(host: str, variant: str, rate: dict[tuple[int, int], float]) -> pd.DataFrame:
    out = []
    for (dense, tables), value in rate.items():
        columns = {"model.dense_features": dense, "model.table_rows": "-".join(["100"] * tables)}
        out += rows(host, variant, [value * 0.99, value, value * 1.01], **columns)
    return pd.DataFrame(out)


def test_h2_and_h3_follow_the_gpu_over_cpu_ratio() -> None:
    points = [(16, 2), (1024, 2), (16, 32), (1024, 32)]
    cpu = grid(CPU, "optimized-bf16", dict.fromkeys(points, 10.0))
    # The GPU gains with dense features and loses with tables: both hypotheses hold.
    gpu = grid(GPU, "gpu-hbm", {(16, 2): 100.0, (1024, 2): 200.0, (16, 32): 50.0, (1024, 32): 100.0})
    ev = evidence(gpu_grid=gpu, cpu_grid=cpu, cpu_loops=pd.DataFrame(rows(CPU, "reference", [1.0])))
    assert summary.h2(ev, GPU).status == "reproduced"
    assert summary.h3(ev, GPU).status == "reproduced"
    flat = grid(GPU, "gpu-hbm", dict.fromkeys(points, 100.0))
    ev = evidence(gpu_grid=flat, cpu_grid=cpu, cpu_loops=pd.DataFrame(rows(CPU, "reference", [1.0])))
    assert summary.h2(ev, GPU).status == "inconclusive"  # no change: the interval spans 1


def placements(host_ratio: float, cached_ratio: float) -> pd.DataFrame:
    base = [100.0, 101.0, 99.0]
    frames = [rows(GPU, "gpu-hbm", base)]
    for variant, ratio in (("gpu-host", host_ratio), ("gpu-uvm", 0.9), ("gpu-cached", cached_ratio)):
        frames.append(rows(GPU, variant, [ratio * b for b in base]))
    return pd.DataFrame([r for frame in frames for r in frame])


def test_h4_asks_for_a_cost_and_a_recovery() -> None:
    assert summary.h4(evidence(gpu_placements=placements(0.3, 0.8)), GPU).status == "reproduced"
    # host costs 70%; a cache at 0.5 wins back less than half of it.
    assert summary.h4(evidence(gpu_placements=placements(0.3, 0.5)), GPU).status == "not reproduced"
    one = placements(0.3, 0.8)
    one.loc[(one["variant"] == "gpu-host") & (one["repeat"] > 0), "flags"] = "spread"
    assert summary.h4(evidence(gpu_placements=one), GPU).status == "inconclusive"


def decomposition(optimized: dict[int, float], old: dict[int, float]) -> pd.DataFrame:
    """The 2020 step and the optimized loop at 1 and 2 threads, 3 repeats each, on dlrm-benchmark."""
    out = []
    for threads in (1, 2):
        for variant, rate in (("reference-2020", old[threads]), ("optimized-fp32", optimized[threads])):
            out += rows(CPU, variant, [rate * 0.99, rate, rate * 1.01], config_name="dlrm-benchmark", threads=threads)
    return pd.DataFrame(out)


def test_s1_is_judged_against_the_2020_step_with_a_projection_beside_it() -> None:
    # The optimized loop doubles with the second thread, the 2020 step does not move: 3x at 2 threads.
    frame = decomposition({1: 150.0, 2: 300.0}, {1: 100.0, 2: 100.0})
    verdict = summary.s1(evidence(baseline=frame), CPU)
    assert verdict.status == "not reproduced" and "3.00x" in verdict.evidence and "2 threads" in verdict.evidence
    # Projection: each side keeps its scaling exponent (1 and 0) to 28 cores: 3 x 14 = 42x, not a verdict.
    assert "42x" in verdict.evidence and "projected (not measured)" in verdict.evidence
    assert summary.s1(evidence(baseline=decomposition({1: 150e2, 2: 300e2}, {1: 100, 2: 100})), CPU).status == (
        "reproduced"
    )
