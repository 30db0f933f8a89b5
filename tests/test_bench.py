import pytest

from dlrm_study import config
from dlrm_study.measure import bench
from dlrm_study.measure.cpu import operator_of
from dlrm_study.records.columns import OPERATORS, quantile


def test_bench_fields_have_timing_and_breakdown(small):
    record = bench(small, steps=4, warmup=1, profile_steps=1, progress=False)
    assert record["ms_p10"] <= record["ms_median"] <= record["ms_p90"]
    assert record["samples_per_s"] == pytest.approx(32 / (record["ms_median"] / 1e3))
    ops = {name: record[f"op_{name}_ms"] for name in OPERATORS}
    assert all(ms >= 0 for ms in ops.values())
    for name in ("bottom_mlp", "embedding_forward", "top_mlp", "dense_backward", "embedding_backward_update"):
        assert ops[name] > 0, name
    assert record["loop"] == "reference" and record["sparse_arch"] == "reference" and record["precision"] == "fp32"
    assert record["peak_mem_bytes"] > 0 and record["threads"] >= 1 and record["native_bf16"] is None


def test_operator_classification():
    assert operator_of("dlrm:embedding_update") == "embedding_backward_update"
    assert operator_of("autograd::engine::evaluate_function: EmbeddingBagBackward0") == "embedding_backward_update"
    assert operator_of("autograd::engine::evaluate_function: AddmmBackward0") == "dense_backward"
    assert operator_of("dlrm:step") is None
    assert operator_of("aten::rand") is None


def test_quantile():
    assert quantile([4.0, 1.0, 3.0, 2.0, 5.0], 0.5) == 3.0
    assert quantile([1.0, 2.0], 0.1) == pytest.approx(1.1)
    assert quantile([7.0], 0.9) == 7.0


def test_preset_bench_sizes_fit_this_machine():
    for name in config.PRESETS:
        config.check_fits(config.preset(name), "cpu")


def test_unprofiled_bench_has_no_breakdown_columns(small):
    record = bench(small, steps=2, warmup=1, profile_steps=0, progress=False)
    assert not [key for key in record if key.startswith("op_")]
