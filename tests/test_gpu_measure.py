"""The gpu loop's measurement: busy from kernel time over the block-timed step, the bound from the host's
enqueue time, one profiled window per point, and the embedding benchmark timed over blocks; on the CPU."""

import math

import pytest
import torch

from dlrm_study import config, settings
from dlrm_study.measure import context, gpu, graph_profiler
from dlrm_study.measure.prepared import prepare

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def test_kernel_time_is_the_union_of_spans_inside_the_window():
    window = (1_000.0, 2_000.0)
    spans = [(1_100.0, 1_300.0), (1_200.0, 1_400.0), (1_500.0, 1_600.0)]  # two overlap: counted once
    assert gpu.covered_us(spans, window) == 400.0


def test_one_bogus_early_timestamp_does_not_make_busy_zero():
    """The old busy stretched its window from the first span: one span stamped at 0 made a busy device read idle."""
    window = (1e9, 1e9 + 1_000)
    spans = [(0.0, 1.0), (1e9 + 10, 1e9 + 990)]
    assert gpu.covered_us(spans, window) == 980.0
    assert gpu.covered_us([(0.0, 1e9 + 500)], window) == 500.0  # a bogus start counts only inside the window
    assert gpu.covered_us(spans, (-math.inf, math.inf)) == 981.0  # what the record's clipped share compares


def profiled(kernel_ms: float) -> dict[str, object]:
    return {"kernels_per_step": 300.0, "kernel_ms_per_step": kernel_ms, "profiled_steps": 20, "profile_note": ""}


def test_busy_is_kernel_time_over_the_block_timed_step_and_the_bound_is_the_hosts_enqueue_time():
    """A graph at batch 2,048: 1.8 ms of kernels in a 2 ms step, its launch gaps inside the graph; the host
    issues a replay in 0.05 ms: device-bound, whatever the gaps. Eager, the host needs 1.9 ms: host-bound."""
    graph = gpu.judged(profiled(1.8), step_ms=2.0, enqueue=0.05, device=CUDA)
    assert graph["gpu_busy_fraction"] == pytest.approx(0.9) and graph["bound"] == "device"
    eager = gpu.judged(profiled(1.8), step_ms=2.0, enqueue=1.9, device=CUDA)
    assert eager["bound"] == "host" and eager["host_enqueue_share"] == pytest.approx(0.95)
    on_cpu = gpu.judged(profiled(1.5), step_ms=2.0, enqueue=2.0, device=CPU)  # no device to be busy
    assert on_cpu["bound"] == "cpu" and math.isnan(on_cpu["gpu_busy_fraction"]) and on_cpu["kernel_ms_per_step"] == 1.5
    unknown = gpu.judged(gpu.unprofiled("no kernel"), step_ms=2.0, enqueue=0.05, device=CUDA)
    assert math.isnan(unknown["gpu_busy_fraction"]) and unknown["bound"] == "device"  # unknown, never 0


def gpu_loop(*extra: str) -> config.Config:
    return config.load("tiny", ["train.loop=gpu", "train.batch_size=16", "data.pooling=fixed", *extra])


def test_a_point_is_profiled_once_and_its_repeats_are_judged_against_it(monkeypatch):
    monkeypatch.setattr(context, "_PROCESS", context.RunContext())
    sessions = []
    original = gpu.profile_window
    monkeypatch.setattr(gpu, "profile_window", lambda *a: sessions.append(a) or original(*a))
    prepared = prepare(gpu_loop())
    try:
        first = gpu.measure_training(prepared, steps=2, warmup=1, profile_steps=2)
        second = gpu.measure_training(prepared, steps=2, warmup=1, profile_steps=2)
    finally:
        prepared.close()
    assert len(sessions) == 1 and (first["profile_reused"], second["profile_reused"]) == (False, True)
    for fields in (first, second):
        assert fields["profiled_steps"] == 2 and fields["kernels_per_step"] > 0 and fields["profile_note"] == ""
        assert 0 <= fields["profile_clipped_share"] < 0.5
        assert fields["kernel_ms_per_step"] > 0 and fields["host_enqueue_ms"] > 0 and fields["bound"] == "cpu"


def test_the_profiler_is_set_up_for_graphs_once_before_the_first_capture(monkeypatch):
    calls = []
    monkeypatch.setattr(context, "_PROCESS", context.RunContext())
    monkeypatch.setattr("torch.profiler._utils._init_for_cuda_graphs", lambda: calls.append("init"))
    monkeypatch.setenv(settings.GRAPH_PROFILER, "init")
    graph_profiler.prepare(CPU)
    assert calls == []  # nothing to capture on the CPU
    graph_profiler.prepare(CUDA)
    graph_profiler.prepare(CUDA)
    assert calls == ["init"]
    monkeypatch.setattr(context, "_PROCESS", context.RunContext())
    monkeypatch.setenv(settings.GRAPH_PROFILER, "attach")
    graph_profiler.prepare(CUDA)
    assert calls == ["init"]


def test_with_the_profiler_off_a_gpu_point_has_no_busy_rather_than_a_false_one(monkeypatch):
    monkeypatch.setenv(settings.GRAPH_PROFILER, "off")
    fields = gpu.profile_window(lambda: None, 20, CUDA)
    assert math.isnan(fields["kernel_ms_per_step"]) and fields["profile_note"].startswith("off")


def test_the_embedding_benchmark_times_blocks_of_calls(monkeypatch):
    """Each timed interval holds `steps` calls of the arch (their launches overlap), never one eager call."""
    calls_per_interval = []
    original = gpu.elapsed_ms

    def counted(fn, device):
        before = counter["lookups"]
        took = original(fn, device)
        calls_per_interval.append(counter["lookups"] - before)
        return took

    counter = {"lookups": 0}
    from dlrm_study.model.tables.base import SparseArch

    lookup = SparseArch.lookup

    def counting_lookup(self, batch):
        counter["lookups"] += 1
        return lookup(self, batch)

    monkeypatch.setattr(SparseArch, "lookup", counting_lookup)
    monkeypatch.setattr(gpu, "elapsed_ms", counted)
    record = gpu.embedding_bench(gpu_loop("train.placement=hbm"), steps=4, warmup=1)
    assert calls_per_interval == [4] * (2 * gpu.BLOCKS)  # the lookup alone, then lookup + update, in blocks
    assert (record["timing"], record["blocks"], record["block_steps"]) == ("blocks", gpu.BLOCKS, 4)
    assert record["embedding_gbps"] > 0 and record["embedding_forward_gbps"] > 0
