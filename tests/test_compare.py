import pytest
import torch

from dlrm_study.measure import roofline
from dlrm_study.measure.compare import compare, report
from dlrm_study.train import loop


def test_compare_interleaves_variants_and_reports_ratios(tmp_path):
    pytest.importorskip("torchrec")
    limits = roofline.measure_limits(quick=True)
    out = tmp_path / "bench.csv"
    records = compare(["tiny"], rounds=2, steps=2, warmup=1, out=out, progress=False, limits=limits)
    assert [r["variant"] for r in records] == ["reference", "optimized-fp32", "optimized-bf16", "torchrec"] * 2
    assert [r["round"] for r in records] == [0] * 4 + [1] * 4
    assert all(r["roofline_ms"] > 0 and r["roofline_fraction"] > 0 for r in records)
    text = report(records)
    for line in ("optimized bf16 / reference", "optimized fp32 / reference", "optimized bf16 / torchrec"):
        assert line in text
    assert "optimized-fp32 time / bound" in text and "target <= 1.3x" in text


def test_report_arithmetic():
    def record(variant, rate, ms, bound):
        return {"config_name": "p", "variant": variant, "samples_per_s": rate, "ms_median": ms, "roofline_ms": bound}

    records = [
        record("reference", 100, 10, 1),
        record("reference", 300, 10, 1),  # median of the two rounds: 200
        record("optimized-bf16", 1000, 2, 1.6),
        record("optimized-fp32", 400, 5, 2),
        record("torchrec", 500, 4, 1),
    ]
    text = report(records)
    assert "optimized bf16 / reference        5.00x   target >= 4.0x: meets" in text
    assert "optimized fp32 / reference        2.00x   target >= 2.2x: misses" in text
    assert "optimized bf16 / torchrec         2.00x   target >= 2.5x: misses" in text
    assert "optimized-fp32 time / bound       2.50x   target <= 1.3x: misses" in text
    assert "optimized-bf16 time / bound       1.25x   target <= 1.3x: meets" in text


def test_bf16_falls_back_to_fp32_where_unsupported(tiny, monkeypatch, capsys):
    monkeypatch.setattr(loop, "bf16_supported", lambda device: False)
    tiny.train.loop, tiny.train.precision = "optimized", "bf16"
    run = loop.build(tiny)
    assert run.model.top_mlp[0].weight.dtype == torch.float32 and tiny.train.precision == "fp32"
    assert "no bf16 support here; running fp32 instead" in capsys.readouterr().err
