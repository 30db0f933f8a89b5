import math

import pytest

from dlrm_study import config
from dlrm_study.measure import limits as machine_limits
from dlrm_study.measure import membench
from dlrm_study.perfmodel import roofline
from dlrm_study.perfmodel.roofline import Access

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


def fake_limits(cfg: config.Config, scale: float = 1.0, layer_gflops: float = 100.0) -> dict[str, float]:
    """Limits for `cfg`: square GEMMs at 1 GFLOP/s (never the bound's), every layer GEMM at
    `layer_gflops` (4x that in bf16); gathers at read bytes / 64 GB/s, updates at 2 GB/s."""
    limits = {"gemm_fp32_gflops": 1.0, "gemm_bf16_gflops": 1.0}
    for access in roofline.accesses(cfg).values():
        limits[access.key] = access.read / 64 if access.kind == "gather" else 2.0
    for layer in roofline.layer_shapes(cfg):
        for gemm_pass in roofline.GEMM_PASSES:
            limits[roofline.layer_key("fp32", layer, gemm_pass)] = layer_gflops
            limits[roofline.layer_key("bf16", layer, gemm_pass)] = 4 * layer_gflops
    return {key: value * scale for key, value in limits.items()}


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_bound_parts_and_scaling(precision: str) -> None:
    cfg = config.load("dlrm-benchmark", ["train.loop=optimized", f"train.precision={precision}"])
    slow, fast = roofline.bound_ms(cfg, fake_limits(cfg)), roofline.bound_ms(cfg, fake_limits(cfg, 2.0))
    assert slow["roofline_ms"] == pytest.approx(slow["roofline_embedding_ms"] + slow["roofline_mlp_ms"])
    for key, value in slow.items():
        assert fast[key] < value
    assert fast["roofline_ms"] == pytest.approx(slow["roofline_ms"] / 2)
    work = roofline.iteration_work(cfg)
    gflops = 400.0 if precision == "bf16" else 100.0
    gemm_flops = sum(flops for _, _, flops in roofline.gemm_work(cfg))
    # The interaction: the slower of its pairs' FLOPs at the fastest GEMM rate measured (bf16's 400)
    # and its bytes at the stream rate (2 GB/s), forward and backward each.
    pair_flops = work["interaction_pair_flops"]
    expected = gemm_flops / gflops / 1e6
    expected += max(pair_flops / 3 / 400.0, work["interaction_forward_bytes"] / 2.0) / 1e6
    expected += max(pair_flops * 2 / 3 / 400.0, work["interaction_backward_bytes"] / 2.0) / 1e6
    assert slow["roofline_mlp_ms"] == pytest.approx(expected)
    assert "bound:" in roofline.roofline_report(cfg, fake_limits(cfg))


def test_dlrm_benchmark_gemms_by_hand() -> None:
    """bottom 512-512-64, top (64 + 8*9/2 = 100)-1024-1024-1024-1, batch 2048; the first layer has
    no input gradient, every other layer three GEMMs of 2 * B * fan_in * fan_out FLOPs."""
    cfg = config.preset("dlrm-benchmark")
    layers = [(512, 512), (512, 64), (100, 1024), (1024, 1024), (1024, 1024), (1024, 1)]
    assert roofline.layer_shapes(cfg) == [(2048, i, o) for i, o in layers]
    gemms = roofline.gemm_work(cfg)
    assert len(gemms) == 3 * len(layers) - 1
    assert ((2048, 512, 512), "grad_input", 2.0 * 2048 * 512 * 512) not in gemms
    assert sum(f for _, _, f in gemms) == 2 * 2048 * (3 * sum(i * o for i, o in layers) - 512 * 512)
    assert roofline.needs(cfg)["layers"] == sorted({(2048, i, o) for i, o in layers})


def test_bound_uses_each_layers_own_rate_not_the_square_gemm() -> None:
    """The Zen 4 case: the loop beat a bound that charged every layer at one square GEMM's rate.
    The bound now charges each GEMM at its own shape's and pass's rate, and the square GEMM
    (here 1 GFLOP/s, far below the layers) changes nothing."""
    cfg = config.load("dlrm-benchmark", ["train.loop=optimized", "train.precision=fp32"])
    limits = fake_limits(cfg)
    base = roofline.bound_ms(cfg, limits)
    for key in ("gemm_fp32_gflops", "gemm_bf16_gflops"):
        assert roofline.bound_ms(cfg, limits | {key: 1e-3})["roofline_ms"] == base["roofline_ms"]
    # Halve the rate of one GEMM: the bound grows by exactly that GEMM's FLOPs at the new rate.
    layer = (2048, 1024, 1024)
    slower = limits | {roofline.layer_key("fp32", layer, "grad_weight"): 50.0}
    flops = 2.0 * 2048 * 1024 * 1024 * 2  # the layer shape appears twice in the top MLP
    grown = roofline.bound_ms(cfg, slower)["roofline_mlp_ms"] - base["roofline_mlp_ms"]
    assert grown == pytest.approx(flops / 50.0 / 1e6 - flops / 100.0 / 1e6)
    # bf16 rates are not an fp32 config's, and a missing layer rate is an error, not a guess.
    assert roofline.bound_ms(cfg, limits | {roofline.layer_key("bf16", layer, "forward"): 1e-3}) == base
    del slower[roofline.layer_key("fp32", layer, "forward")]
    with pytest.raises(ValueError, match="needs"):
        roofline.bound_ms(cfg, slower)


def test_rates_are_the_layers_rates_fp32_beside_bf16() -> None:
    cfg = config.load("dlrm-benchmark", ["train.loop=optimized", "train.precision=bf16"])
    fields = roofline.rates(cfg, fake_limits(cfg))
    assert fields["roofline_gemm_fp32_gflops"] == pytest.approx(100.0)
    assert fields["roofline_gemm_bf16_gflops"] == pytest.approx(400.0)
    assert fields["roofline_gather_fp32_gbps"] == 256 / 64 and fields["roofline_gather_bf16_gbps"] == 128 / 64
    assert fields["roofline_update_fp32_gbps"] == fields["roofline_update_bf16_gbps"] == 2.0  # one [hi | lo] row
    no_bf16 = {k: v for k, v in fake_limits(cfg).items() if not k.startswith("gemm_bf16")}
    assert "roofline_gemm_bf16_gflops" not in roofline.rates(cfg, no_bf16)  # emulated: not measured


def test_accesses_are_the_tables_rows() -> None:
    """dlrm-benchmark: 8M rows of 64 dims; bf16 Split-SGD rows are [hi | lo], as wide as fp32's."""
    cfg = config.load("dlrm-benchmark", ["train.loop=optimized", "train.precision=bf16"])
    rows = roofline.accesses(cfg)
    tables = (1_000_000,) * 8
    assert rows["gather_fp32"] == Access("gather", 256, 256, 8_000_000, tables)
    assert rows["gather_bf16"] == Access("gather", 128, 256, 8_000_000, tables)  # forward reads the upper halves
    assert rows["update"] == Access("update", 256, 256, 8_000_000, tables)  # one row read and written, both halves
    assert rows["gather_bf16"].key == "gather_gbps_128B_of_256B_8000000rows_8tables"
    odd = roofline.accesses(config.load("tiny", ["model.embedding_dim=7", "model.bottom_mlp=16-7"]))
    assert odd["gather_bf16"].read == 16  # 14 bytes of bf16, in whole 4-byte words


def test_bound_charges_each_access_at_its_rate() -> None:
    cfg = config.load("dlrm-benchmark", ["train.loop=optimized", "train.precision=bf16"])
    limits, work = fake_limits(cfg), roofline.iteration_work(cfg)
    bound = roofline.bound_ms(cfg, limits)
    assert bound["roofline_embedding_forward_ms"] == pytest.approx(work["embedding_forward_bytes"] / 2.0 / 1e6)
    assert bound["roofline_embedding_update_ms"] == pytest.approx(work["embedding_update_bytes"] / 2.0 / 1e6)
    del limits[roofline.accesses(cfg)["update"].key]
    with pytest.raises(ValueError, match="needs"):
        roofline.bound_ms(cfg, limits)


def test_measure_limits_quick() -> None:
    tiny = config.load("tiny", ["train.loop=optimized", "train.precision=bf16"])
    needs = roofline.needs(tiny)
    assert needs["accesses"] == sorted(roofline.accesses(tiny).values())
    limits = machine_limits.measure_limits(quick=True, **needs)
    expected = ["gemm_fp32_gflops", *[access.key for access in needs["accesses"]]]
    expected += [roofline.layer_key("fp32", layer, p) for layer, p, _ in roofline.gemm_work(tiny)]
    assert set(expected) <= set(limits)
    for key, value in limits.items():  # a prefetch distance may be 0 (none was best): one of those searched
        assert value in membench.DISTANCES if membench.rate_key(key) else math.isfinite(value) and value > 0, key
    limits["gemm_fp32_gflops"] = -1.0  # a copy: the per-process cache is untouched
    assert machine_limits.measure_limits(quick=True)["gemm_fp32_gflops"] > 0
    assert roofline.bound_ms(tiny, limits)["roofline_ms"] > 0 and roofline.rates(tiny, limits)


def test_interaction_bound_charges_only_the_distinct_pairs_and_its_bytes() -> None:
    """dlrm-benchmark: F = 9 features, 36 pairs (not bmm's 81), batch 2048, dim 64; fp32 features
    (2048 x 9 x 64 x 4 B) read and the output (2048 x (64 + 36) x 4 B) written forward."""
    cfg = config.load("dlrm-benchmark", ["train.loop=optimized"])
    work = roofline.iteration_work(cfg)
    assert work["interaction_pair_flops"] == 6 * 2048 * 36 * 64 and work["interaction_flops"] == 6 * 2048 * 81 * 64
    inputs, outputs = 2048 * 9 * 64 * 4, 2048 * 100 * 4
    assert work["interaction_forward_bytes"] == inputs + outputs
    assert work["interaction_backward_bytes"] == 2 * inputs + outputs  # features, output grad in; feature grads out
    bf16 = roofline.iteration_work(config.load("dlrm-benchmark", ["train.loop=optimized", "train.precision=bf16"]))
    assert bf16["interaction_forward_bytes"] == (inputs + outputs) / 2  # the fewest bytes a bf16 loop moves
    limits = fake_limits(cfg)
    stream = roofline.accesses(cfg)["interaction"]
    assert stream == Access("stream", 256, 256, 2048 * 9)
    limits[stream.key] = 1e6  # memory all but free: the FLOPs at the fastest GEMM rate (bf16's 400) bound it
    assert roofline.interaction_ms(cfg, limits)["forward"] == pytest.approx(2 * 2048 * 36 * 64 / 400.0 / 1e6)
    limits[stream.key] = 2.0  # slow memory: the bytes bound it
    assert roofline.interaction_ms(cfg, limits)["backward"] == pytest.approx((2 * inputs + outputs) / 2.0 / 1e6)
