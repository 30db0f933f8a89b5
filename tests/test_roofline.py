import math

import pytest

from dlrm_study import config
from dlrm_study.measure import roofline

# dlrm-benchmark: batch 2048, 8 tables, 100 ids per bag (fixed), dim 64.
BENCH_IDS = 2048 * 8 * 100


def test_tiny_work_by_hand(tiny: config.Config) -> None:
    work = roofline.iteration_work(tiny)
    # batch 64, 4 tables, uniform pooling in [1, 4]: mean 2.5 ids per bag
    assert work["ids_per_iteration"] == 64 * 4 * 2.5
    assert work["embedding_forward_bytes"] == 640 * 8 * 4
    # bottom 13-16-8; top input 8 + 5*4/2 = 18 dots and dense, then 16-1
    macs = 13 * 16 + 16 * 8 + 18 * 16 + 16 * 1
    assert work["mlp_flops"] == (2 + 4) * 64 * macs == 245_760
    assert work["interaction_flops"] == (2 + 4) * 64 * (5 * 5 * 8)


def test_dlrm_benchmark_bytes() -> None:
    fp32 = roofline.iteration_work(config.preset("dlrm-benchmark"))
    assert fp32["ids_per_iteration"] == BENCH_IDS
    assert fp32["embedding_forward_bytes"] == BENCH_IDS * 64 * 4
    assert fp32["embedding_update_bytes"] == BENCH_IDS * 64 * (4 + 4)

    bf16 = roofline.iteration_work(config.load("dlrm-benchmark", ["train.loop=optimized", "train.precision=bf16"]))
    assert bf16["embedding_forward_bytes"] == BENCH_IDS * 64 * 2  # upper halves only
    assert bf16["embedding_update_bytes"] == BENCH_IDS * 64 * (4 + 4)  # both halves read and written

    adagrad = roofline.iteration_work(config.load("dlrm-benchmark", ["train.optimizer=rowwise_adagrad"]))
    assert adagrad["embedding_update_bytes"] == BENCH_IDS * (64 * 8 + 8)


def fake_limits(scale: float = 1.0) -> dict[str, float]:
    limits = {"stream_gbps": 10.0, "gemm_fp32_gflops": 100.0, "gemm_bf16_gflops": 400.0}
    for size in roofline.ROW_BYTES:
        limits[f"gather_gbps_{size}B"] = size / 64
        limits[f"update_gbps_{size}B"] = size / 128
    return {key: value * scale for key, value in limits.items()}


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_bound_parts_and_scaling(precision: str) -> None:
    cfg = config.load("dlrm-benchmark", ["train.loop=optimized", f"train.precision={precision}"])
    slow, fast = roofline.bound_ms(cfg, fake_limits()), roofline.bound_ms(cfg, fake_limits(2.0))
    assert slow["roofline_ms"] == pytest.approx(slow["roofline_embedding_ms"] + slow["roofline_mlp_ms"])
    for key, value in slow.items():
        assert fast[key] < value
    assert fast["roofline_ms"] == pytest.approx(slow["roofline_ms"] / 2)
    work = roofline.iteration_work(cfg)
    gflops = 400.0 if precision == "bf16" else 100.0
    assert slow["roofline_mlp_ms"] == pytest.approx((work["mlp_flops"] + work["interaction_flops"]) / gflops / 1e6)
    assert "bound:" in roofline.roofline_report(cfg, fake_limits())


def test_bound_needs_the_row_size() -> None:
    cfg = config.load("tiny", ["model.embedding_dim=12", "model.bottom_mlp=16-12"])  # 48 B rows
    assert roofline.row_sizes(cfg) == [48]
    with pytest.raises(ValueError, match="row_sizes"):
        roofline.bound_ms(cfg, fake_limits())


def test_measure_limits_quick() -> None:
    limits = roofline.measure_limits(quick=True)
    expected = ["stream_gbps", "gemm_fp32_gflops"]
    expected += [f"{kind}_{size}B" for size in roofline.ROW_BYTES for kind in ("gather_gbps", "update_gbps")]
    assert set(expected) <= set(limits)
    for key, value in limits.items():
        assert math.isfinite(value) and value > 0, key
    limits["stream_gbps"] = -1.0  # a copy: the per-process cache is untouched
    assert roofline.measure_limits(quick=True)["stream_gbps"] > 0
    assert roofline.bound_ms(config.preset("tiny"), limits)["roofline_ms"] > 0
