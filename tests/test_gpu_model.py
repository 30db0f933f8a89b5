"""The GPU performance model and its pre-registered predictions (no GPU needed)."""

import dataclasses

import pandas as pd
import pytest

from dlrm_study import config
from dlrm_study.analysis import findings, predictions
from dlrm_study.cli import main as cli
from dlrm_study.errors import UsageError
from dlrm_study.perfmodel import gpu as gpu_model
from dlrm_study.records import provenance, store

H200 = "intel-xeon/avx512f+avx512_bf16+amx_bf16/16cpu/nvidia-h200"  # the machine the fake GPU records name

# A made-up device with round numbers, so every bound below is easy to check by hand.
ROUND = gpu_model.Device("round", hbm_gbps=1000.0, bf16_tflops=100.0, tf32_tflops=50.0, fp32_tflops=10.0,
                         link_gbps=10.0, host_gbps=5.0, source="test")  # fmt: skip


def small(*overrides: str) -> config.Config:
    # 2 tables of 1,000 rows, dim 8, 4 fixed lookups, batch 100, bottom 13-16-8, top 11-4-1.
    base = ["model.table_rows=1000-1000", "model.embedding_dim=8", "model.bottom_mlp=16-8", "model.top_mlp=4-1"]
    base += ["data.lookups_per_table=4", "data.pooling=fixed", "train.batch_size=100", "train.loop=gpu"]
    return config.load("tiny", [*base, *overrides])


def test_hbm_bound_by_hand() -> None:
    cfg = small("train.precision=bf16")
    # ids: 100 samples x 2 tables x 4 = 800; bytes per id: 8 x 4 read + 8 x 8 read and written = 96.
    # MACs per sample: 13*16 + 16*8 + (8 + 3) * 4 + 4 * 1 = 208 + 128 + 44 + 4 = 384; interaction 3*3*8 = 72.
    terms = gpu_model.bound_ms(cfg, ROUND, "hbm")
    assert terms["hbm_ms"] == pytest.approx(800 * 96 / 1000e9 * 1e3)
    assert terms["dense_ms"] == pytest.approx(6 * 100 * (384 + 72) / 100e12 * 1e3)
    assert terms["link_ms"] == 0 and terms["host_embedding_ms"] == 0
    # fp32 runs the GEMMs on the plain fp32 rate (torch leaves TF32 off), 10x slower here.
    fp32 = gpu_model.bound_ms(small("train.precision=fp32"), ROUND, "hbm")
    assert fp32["dense_ms"] == pytest.approx(10 * terms["dense_ms"])


def test_placement_bounds_by_hand() -> None:
    cfg = small("model.embedding_dim=16", "model.bottom_mlp=16-16", "train.batch_size=50")
    ids = 50 * 2 * 4
    uvm = gpu_model.bound_ms(cfg, ROUND, "uvm")
    assert uvm["hbm_ms"] == 0 and uvm["link_ms"] == pytest.approx(ids * 16 * 12 / 10e9 * 1e3)
    host = gpu_model.bound_ms(cfg, ROUND, "host")
    assert host["host_embedding_ms"] == pytest.approx(ids * 16 * 12 / 5e9 * 1e3)
    assert host["link_ms"] == pytest.approx(2 * 50 * 2 * 16 * 4 / 10e9 * 1e3)  # pooled down, gradients up
    cached = gpu_model.bound_ms(cfg, ROUND, "cached", hit_rate=0.75)
    assert cached["link_ms"] == pytest.approx(2 * ids * 0.25 * 16 * 4 / 10e9 * 1e3)
    assert cached["hbm_ms"] == pytest.approx(ids * 16 * 12 / 1000e9 * 1e3)
    with pytest.raises(ValueError, match="placement"):
        gpu_model.bound_ms(cfg, ROUND, "torchrec-fused")


@pytest.mark.parametrize("placement", ["uvm", "host", "cached"])
def test_link_bound_follows_the_link(placement: str) -> None:
    cfg = small()
    slow = gpu_model.bound_ms(cfg, ROUND, placement, hit_rate=0.5)["link_ms"]
    fast = gpu_model.bound_ms(cfg, dataclasses.replace(ROUND, link_gbps=40.0), placement, hit_rate=0.5)["link_ms"]
    assert slow > 0 and fast == pytest.approx(slow / 4)
    hbm = gpu_model.bound_ms(cfg, dataclasses.replace(ROUND, link_gbps=40.0), "hbm")
    assert hbm == gpu_model.bound_ms(cfg, ROUND, "hbm")  # hbm never touches the link


def test_step_range_corners() -> None:
    cfg = small()
    fast, slow = gpu_model.step_range_ms(cfg, ROUND, (0.1, 0.5), "uvm", ops=100)
    link = gpu_model.bound_ms(cfg, ROUND, "uvm")["link_ms"] + gpu_model.bound_ms(cfg, ROUND, "uvm")["dense_ms"]
    floor = 100 * gpu_model.KERNEL_FLOOR_US / 1e3
    assert fast == pytest.approx(max(link / 0.5 + floor, 100 * gpu_model.HOST_OP_US[0] / 1e3))
    assert slow == pytest.approx(link / 0.1 + floor + 100 * gpu_model.HOST_OP_US[1] / 1e3)


def test_published_check_gives_an_efficiency_below_one() -> None:
    rows = gpu_model.published_check()
    assert {row["math"] for row in rows} == {"bf16", "tf32"}
    for row in rows:
        assert 0.05 < row["efficiency"] < 1  # the published run is slower than its bound, not absurdly so
        assert row["published_ms"] == pytest.approx(65536 / row["published_samples_per_s"] * 1e3)
    low, high = gpu_model.efficiency_range()
    assert low == pytest.approx(min(r["efficiency"] for r in rows) / gpu_model.SLACK)
    assert high == max(r["efficiency"] for r in rows)


def test_count_ops_follows_the_layers() -> None:
    two = gpu_model.count_ops(small())
    four = gpu_model.count_ops(small("model.top_mlp=8-8-4-1"))
    assert 20 < two < four  # two more layers dispatch more ops


def test_predictions_are_appended_never_rewritten(tmp_path, monkeypatch) -> None:
    path, written = predictions.predict("smoke", tmp_path)
    assert written > 0
    first = store.load(path)
    assert set(first["claim"]) >= {"target", "H1", "H4"}
    assert (first["low"] <= first["mid"]).all() and (first["mid"] <= first["high"]).all()
    assert predictions.predict("smoke", tmp_path)[1] == 0  # the same commit: nothing added

    monkeypatch.setattr(provenance, "git_commit", lambda: "later0")
    monkeypatch.setattr(gpu_model, "SLACK", 10.0)  # a later model with other ranges
    _, again = predictions.predict("smoke", tmp_path)
    both = store.load(path)
    assert again == written and len(both) == 2 * written
    pd.testing.assert_frame_equal(both.iloc[:written].reset_index(drop=True), first, check_dtype=False)
    kept = predictions.load(tmp_path)
    assert len(kept) == written and (kept["git_commit"] != "later0").all()  # the earliest rows count


def test_scoring_against_measured_records(tmp_path) -> None:
    predictions.predict("smoke", tmp_path)
    pred = predictions.load(tmp_path)
    row = pred[(pred["quantity"] == "samples_per_s") & (pred["variant"] == "gpu-hbm")].iloc[0]
    inside, above = (row["low"] + row["high"]) / 2, row["high"] * 3
    fake = [
        {"study": row["sweep"], "config_hash": row["config_hash"], "variant": "gpu-hbm", "device": "cuda",
         "machine": H200,
         "samples_per_s": value, "repeat": i, "error": None, "protocol": 2}
        for i, value in enumerate([inside, inside, above])
    ]  # fmt: skip  # protocol 2: every repeat timed after settling (`gpu_loop.repeats` drops protocol 1's repeat 0)
    # An H100's records of the same point: an H200's prediction is never scored against them (pooled, the
    # median of the six would be `above`).
    other_gpu = [{**record, "machine": H200.replace("nvidia-h200", "nvidia-h100"), "samples_per_s": above}
                 for record in fake]  # fmt: skip
    store.append_many(tmp_path / "gpu_sweeps.csv", fake + other_gpu)
    scored = predictions.score(tmp_path)
    mine = scored[(scored["config_hash"] == row["config_hash"]) & (scored["quantity"] == "samples_per_s")]
    assert (mine["measured"] == inside).all() and (mine["verdict"] == "inside").all()  # the median of repeats
    assert (scored[scored["config_hash"] != row["config_hash"]]["verdict"] == "not yet measured").all()
    assert predictions.verdict(1, 2, 3) == "above" and predictions.verdict(1, 2, 0.5) == "below"
    counts = predictions.counts(scored)
    measured = int((scored["verdict"] != "not yet measured").sum())
    assert int(counts["inside"].sum()) == measured and "above" not in counts  # the median of repeats: inside
    assert "each measured point scored once, 1 of 1 inside the model's ranges" in findings.prediction_summary(scored)[0]


def test_predict_cli_refuses_bad_input(tmp_path, capsys) -> None:
    assert cli.main(["predict", "--device", "v100", "--results", str(tmp_path)]) == 2
    assert "--device 'v100'" in capsys.readouterr().err
    assert cli.main(["predict", "--results", str(tmp_path / "missing")]) == 2
    assert cli.main(["predict", "--profile", "full", "--results", str(tmp_path)]) == 2
    assert not list(tmp_path.iterdir())  # nothing written


def test_measured_bandwidths_replace_the_datasheets(tmp_path) -> None:
    with pytest.raises(UsageError, match="no measured bandwidths"):
        predictions.measured_device("h200", tmp_path)
    fake = [{"gpu_model": "NVIDIA H200", "copy_gbps": x, "h2d_gbps": x / 100} for x in (4000.0, 4200.0, 4400.0)]
    store.append_many(tmp_path / "gpu_embedding.csv", fake)
    device = predictions.measured_device("h200", tmp_path)
    assert (device.hbm_gbps, device.link_gbps) == (4200.0, 42.0)
    assert device.bf16_tflops == gpu_model.DEVICES["h200"].bf16_tflops and "measured" in device.name
    _, written = predictions.predict("smoke", tmp_path, measured_bandwidths=True)
    assert written and predictions.load(tmp_path).empty  # kept apart from the datasheet's predictions


def test_profiled_op_costs_are_rows_beside_the_preregistered_ones(tmp_path) -> None:
    """`predict(profiled_from=...)`: the measured kernels per step (and one dispatch for a captured step)
    in place of the counted ops, as rows of their own model; the pre-registered rows stay as written
    and stay the ones scored."""
    path, written = predictions.predict("smoke", tmp_path)
    first = store.load(path)
    row = first[(first["quantity"] == "samples_per_s") & (first["variant"] == "gpu-hbm")].iloc[0]
    profiled = tmp_path / "gpu-run"
    profiled.mkdir()
    with pytest.raises(UsageError, match="no profiled GPU records"):
        predictions.predict("smoke", tmp_path, profiled_from=profiled)
    fake = [
        {"study": row["sweep"], "config_hash": row["config_hash"], "variant": "gpu-hbm", "device": "cuda",
         "machine": H200,
         "samples_per_s": 1e6, "repeat": i, "error": None, "kernels_per_step": kernels, "capture": "graph"}
        for i, kernels in enumerate([90.0, 100.0, 110.0])
    ]  # fmt: skip
    store.append_many(profiled / "gpu_sweeps.csv", fake)
    _, added = predictions.predict("smoke", tmp_path, profiled_from=profiled)
    both = store.load(path)
    new = both.iloc[written:]
    assert added == len(new) > 0 and set(new["model"]) == {predictions.PROFILED_MODEL}
    assert set(new["config_hash"]) == {row["config_hash"]}
    rates = new[new["quantity"] == "samples_per_s"]
    assert (rates["ops_per_step"] == 100.0).all() and (rates["host_ops_per_step"] == 1.0).all()
    assert (rates["high"] > row["high"]).all()  # one dispatch a step instead of every op: a faster corner
    pd.testing.assert_frame_equal(both.iloc[:written].reset_index(drop=True), first, check_dtype=False)
    assert predictions.predict("smoke", tmp_path, profiled_from=profiled)[1] == 0  # once per commit and model
    assert (predictions.load(tmp_path)["model"] == predictions.MODEL).all()
