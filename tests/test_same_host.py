"""The same-host pair, measured and not judged (`analysis.same_host`): the GPU over its host's optimized bf16 loop
and that loop over the host's reference, paired within repeats, beside 2-core machines of the same CPU model."""

import pandas as pd

from dlrm_study.analysis import same_host

GPU = "intel-xeon-f6m207s2/avx512f+avx512_bf16+amx_bf16/16cpu/nvidia-h200"
SAME_CPU = "intel-xeon-f6m207s2/avx512f+avx512_bf16+amx_bf16/2cpu"
OTHER_CPU = "intel-xeon-f6m143s8/avx512f+avx512_bf16+amx_bf16/2cpu"


def records(machine: str, study: str, rates: dict[str, list[float]], preset: str = "mlperf-scaled") -> list[dict]:
    return [
        {"machine": machine, "study": study, "variant": variant, "repeat": k, "run_id": f"{machine}-r",
         "samples_per_s": rate, "config_name": preset, "batch_size": 2048, "git_commit": "abcdef0123",
         "timestamp": f"2026-12-04T00:00:{k:02d}", "code_fingerprint": "c", "threads": 2, "error": None}
        for variant, series in rates.items() for k, rate in enumerate(series)
    ]  # fmt: skip


def test_the_gpu_and_its_host_loops_pair_within_repeats():
    gpu = {"gpu-hbm": [1000.0, 1100.0, 900.0], "host-optimized-bf16": [40.0, 44.0, 36.0],
           "host-reference": [10.0, 11.0, 9.0]}  # fmt: skip
    found = same_host.same_host(pd.DataFrame(records(GPU, "gpu-same-host", gpu)))
    assert [(m.what, round(m.ratio.center, 3), m.ratio.n, m.ratio.runs) for m in found] == [
        ("the GPU over its host's optimized bf16 loop", 25.0, 3, 1),
        ("the host's optimized bf16 loop over its reference", 4.0, 3, 1),
    ]
    assert found[0].commits == ("abcdef0",) and found[0].batch == 2048 and found[0].preset == "mlperf-scaled"
    assert same_host.same_host(pd.DataFrame(records(GPU, "gpu-grid", gpu))) == []  # another study's records


def test_two_cores_of_the_same_cpu_model_stand_beside_it_and_no_other():
    loops = {"optimized-bf16": [30.0, 33.0, 27.0], "reference": [10.0, 11.0, 9.0]}
    frame = pd.DataFrame(records(SAME_CPU, "cpu-loops-quick", loops) + records(OTHER_CPU, "cpu-loops-quick", loops))
    beside = same_host.two_cores_beside(frame, GPU)
    assert [(m.machine, round(m.ratio.center, 3)) for m in beside] == [(SAME_CPU, 3.0)]
    assert same_host.two_cores_beside(frame, "intel-xeon/avx512f/16cpu/nvidia-h200") == []  # no model to match
    assert beside[0].ratio.n == 3 and beside[0].ratio.runs == 1


def test_failed_records_are_not_read():
    rates = {"gpu-hbm": [1000.0], "host-optimized-bf16": [40.0]}
    frame = pd.DataFrame(records(GPU, "gpu-same-host", rates)).assign(error="out of memory")
    assert same_host.same_host(frame) == []
