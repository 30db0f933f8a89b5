"""Predictions scored once per measured point, and against a naive constant range."""

import pandas as pd
from tests.conftest import ROOT

from dlrm_study.analysis import predictions
from dlrm_study.records import columns as col


def scored(rows: list[tuple]) -> pd.DataFrame:
    cols = ["claim", "config_hash", "variant", "quantity", "low", "high", "measured", "verdict"]
    return pd.DataFrame(rows, columns=cols)


def test_a_point_with_a_ratio_row_counts_once() -> None:
    frame = scored([
        ("H2/H3", "a", "gpu-hbm", "samples_per_s", 1.0, 4.0, 2.0, "inside"),
        ("H2/H3", "a", "gpu-hbm", "gpu_over_cpu", 10.0, 40.0, 50.0, "above"),  # the same measurement again
        ("H2/H3", "b", "gpu-hbm", "samples_per_s", 1.0, 4.0, float("nan"), "not yet measured"),
        ("H2/H3", "b", "gpu-hbm", "gpu_over_cpu", 1.0, 4.0, float("nan"), "not yet measured"),
    ])  # fmt: skip
    assert len(predictions.independent(frame)) == 1
    counts = predictions.counts(frame)
    assert counts.loc["H2/H3", "inside"] == 1 and counts.loc["H2/H3", "not yet measured"] == 1
    assert "above" not in counts  # the ratio row was not scored a second time


def test_the_naive_range_is_as_wide_and_centred_on_the_measurements() -> None:
    # Ranges 4x wide placed badly (every measurement above its range), but the measurements sit close together:
    # one constant 4x range around their median holds them all.
    frame = scored([("H1", str(i), "gpu-hbm", "samples_per_s", 1.0, 4.0, 10.0 + i, "above") for i in range(5)])
    table = predictions.against_naive(frame).iloc[0]
    assert (table.points, table.model_inside, table.naive_inside) == (5, 0, 5)


def test_a_gpu_over_cpu_prediction_is_never_scored_across_machines(tmp_path, monkeypatch) -> None:
    """Its CPU side was another machine's: the GPU's records over that CPU would be a ratio of two machines."""
    rows = [("H2/H3", "a", "gpu-hbm", q, 1.0, 4.0, float("nan"), "") for q in ("samples_per_s", "gpu_over_cpu")]
    predicted = scored(rows).drop(columns=["measured", "verdict"]).assign(sweep="s", grid="g", cpu_samples_per_s=0.1)
    got = pd.DataFrame({"config_hash": ["a"], "variant": ["gpu-hbm"], "samples_per_s": [2.0], "flagged_only": [False]})
    monkeypatch.setattr(predictions, "load", lambda out, device_name="h200": predicted)
    monkeypatch.setattr(predictions, "measured", lambda out, device_name="h200": got)
    verdicts = predictions.score(tmp_path).set_index("quantity")["verdict"]
    assert verdicts["samples_per_s"] == "inside" and verdicts["gpu_over_cpu"] == predictions.NOT_COMPARABLE
    counts = predictions.counts(predictions.score(tmp_path))
    assert counts.loc["H2/H3"].to_dict() == {"inside": 1}  # one point, scored once; the ratio is not a point


def test_both_presets_predictions_at_one_batch_are_kept():
    """Rows written when a point's label was its grid alone: dlrm-benchmark's large-batch targets shared
    mlperf-scaled's labels and were dropped as duplicates, so the dlrm-benchmark 16,384 target was never scored."""
    pred = predictions.load(ROOT / "results")
    large = pred[(pred["sweep"] == "gpu-presets-large") & (pred["quantity"] == col.SAMPLES_PER_S)]
    at = large[(large[col.GRID] == "train.batch_size=16384") & (large[col.VARIANT] == "gpu-hbm")]
    assert set(at[col.CONFIG_NAME]) == {"mlperf-scaled", "dlrm-benchmark"}
