"""The GPU script runs end to end on the CPU (dry run), and refuses a real run without a GPU."""

import os
import subprocess
import sys

import papermill
import pytest
import torch
from tests.conftest import ROOT

from dlrm_study.analysis import predictions
from dlrm_study.analysis import sensitivity as knobs
from dlrm_study.analysis.readers import sweep_records
from dlrm_study.measure import sweep
from dlrm_study.records import store
from dlrm_study.report import plots
from dlrm_study.studies import gpu as gpu_grid
from dlrm_study.studies import sensitivity as sensitivity_study
from dlrm_study.studies.gpu import sweeps

SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def run_script(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable}
    env.pop("TRITON_INTERPRET", None)  # the torch kernels: the Triton ones are tested on their own
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True)


@pytest.mark.slow
def test_dry_run_writes_every_record(tmp_path):
    predicted = tmp_path / "predicted"
    predicted.mkdir()
    predictions.predict("smoke", predicted)
    done = run_script("--dry-run", "--skip-tests", "--out", str(tmp_path), "--predictions", str(predicted))
    assert done.returncode == 0, done.stderr[-2000:]
    grid = store.load(tmp_path / sensitivity_study.GPU_RECORDS)
    for spec in sweeps(tmp_path, dry_run=True):  # every point of every sweep measured (shared points once)
        measured = sweep_records(spec, machine=None)
        assert len(measured) == len(sweep.points(spec)) * spec.repeats, spec.name
    assert grid["error"].isna().all() and (grid["device"] == "cpu").all()
    host = grid[grid["variant"].str.startswith("host-")]  # the grid's CPU loops, in the GPU study's own run
    assert set(host["loop"]) == {"optimized"} and set(host["study"]) == {"gpu-sensitivity-smoke"}
    study = grid[grid["study"] == "gpu-sensitivity-smoke"]  # the grid and every knob: one run
    assert study["run_id"].nunique() == 1 and len(study) == len(
        {(r.config_hash, r.variant, r.repeat) for r in study.itertuples()}
    )
    grid = grid[grid["loop"] == "gpu"]
    assert set(grid["placement"]) >= {"hbm", "host", "uvm", "cached"}
    # Block-timed, from a ring of batches; on the CPU nothing is captured and the host bounds every step.
    assert (grid["timing"] == "blocks").all() and (grid["blocks"] == 5).all() and (grid["ring_batches"] >= 2).all()
    assert (grid["capture"] == "eager").all() and (grid["bound"] == "cpu").all()
    assert (grid["ms_block_min"] <= grid["ms_median"]).all() and (grid["ms_median"] <= grid["ms_block_max"]).all()
    assert set(grid[grid["study"] == "gpu-presets-large"]["batch_size"]) == {48, 96}
    assert set(grid[grid["study"] == "gpu-presets"]["variant"]) == {"gpu-hbm", "gpu-hbm-fp32", "gpu-eager"}
    host_loops = store.load(tmp_path / "sweeps.csv")  # last: the CPU loops on the GPU machine's CPU (S1, S3)
    assert set(host_loops["study"]) == {"cpu-loops-smoke"} and (host_loops["device"] == "cpu").all()
    assert set(host_loops["variant"]) == set(gpu_grid.HOST_LOOPS)
    embedding = store.load(tmp_path / "gpu_embedding.csv")
    assert sorted(set(embedding["placement"])) == ["cached", "hbm", "host", "uvm"]
    assert sorted(set(embedding["repeat"])) == [0, 1]
    assert (embedding["embedding_gbps"] > 0).all() and (embedding["copy_gbps"] > 0).all()
    assert (embedding[embedding["placement"] != "cached"]["embedding_forward_gbps"] > 0).all()
    text = (tmp_path / "summary.txt").read_text()
    assert "dry run" in text and "cached (10%, Zipf 1.05) / hbm" in text
    for line in ("mlperf-scaled bf16 hbm captured, batch 65,536", "graph/eager", "dispatch-overhead floor, no claim",
                 "hbm lookup bytes / copy bandwidth"):  # fmt: skip
        assert line in text
    # The predictions are read and scored; a dry run's records are CPU ones, so none is measured.
    assert f"0 of {len(predictions.load(predicted))} measured" in text
    # The notebooks draw such records beside the CPU ones: the GPU-over-CPU heatmap, the placements.
    for name in ("03_dense_sparse_sensitivity", "05_embedding_placement"):
        papermill.execute_notebook(
            str(ROOT / "notebooks" / f"{name}.ipynb"),
            str(tmp_path / f"{name}.ipynb"),
            parameters={"profile": "smoke", "results_dir": str(tmp_path), "measure": True, "publish": True},
            kernel_name="python3",
            cwd=str(ROOT / "notebooks"),
            progress_bar=False,
        )
    drawn = {path.name for path in (tmp_path / "figures").glob("*.png")}
    assert {"05_placements.png", "05_placement-skew.png", "05_placement-size.png"} <= drawn
    # Notebook 03 draws GPU records only if measured on cuda; its heatmap, fed the dry run's grid, whose
    # host CPU loops ran in the same run as its GPU loop (GPU over CPU: one machine, paired per repeat):
    spec = sensitivity_study.on_gpu(sensitivity_study.dense_sparse_grid("smoke", tmp_path), "cpu", host=True)
    grid = sweep_records(spec, machine=None)
    assert {"gpu-hbm", "host-optimized-fp32"} <= set(grid["variant"]) and grid["run_id"].nunique() == 1
    ratio = knobs.gpu_over_cpu(grid)
    assert ratio.shape == (2, 2) and (ratio > 0).all().all()
    plots.save(plots.heatmap(ratio, "dry run", grid), "heatmap", tmp_path)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_real_run_without_a_gpu_is_refused(tmp_path):
    done = run_script("--out", str(tmp_path))
    assert done.returncode == 2
    message = "gpu_check: no CUDA GPU here: run on a GPU machine, or pass --dry-run"
    assert done.stderr.strip() == message  # one line, no traceback
