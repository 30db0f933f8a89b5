import os
import subprocess
import sys

import pytest
from tests.conftest import CRITEO_SAMPLE

from dlrm_study.cli.main import main
from dlrm_study.records import store


@pytest.fixture(autouse=True)
def in_tmp_dir(tmp_path, monkeypatch):
    """Default outputs (results/*.csv) land in a scratch folder, never in the repository."""
    monkeypatch.chdir(tmp_path)


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# Bad input of every kind, through the real CLI in a subprocess: tests/test_bad_inputs.py.


def test_malformed_criteo_line(capsys, tmp_path):
    bad = tmp_path / "bad.tsv"
    lines = CRITEO_SAMPLE.read_text().splitlines()
    bad.write_text("\n".join([*lines[:10], "0\t1", *lines[10:]]) + "\n")
    argv = ["train", "--config", "kaggle", "--set", "model.table_rows=26x1000", "--data", str(bad), "--no-progress"]
    code, _, err = run_cli(capsys, *argv, "--out", str(tmp_path / "r.csv"))
    assert code == 2 and err.strip() == f"dlrm-study: error: {bad}:11: expected 40 tab-separated fields, got 2"
    assert not (tmp_path / "r.csv").exists()  # nothing half-written
    code, out, err = run_cli(
        capsys, *argv, "--skip-bad-lines", "--steps", "3", "--set", "train.eval_batches=2", "--out", ""
    )
    assert code == 0 and "skipped 1 malformed line(s)" in err and "validation AUC" in out


def test_train_writes_a_record_and_checkpoint(capsys, tmp_path):
    out = tmp_path / "train.csv"
    argv = ["train", "--steps", "20", "--no-progress", "--out", str(out), "--checkpoint", str(tmp_path / "c.pt")]
    code, stdout, _ = run_cli(capsys, *argv)
    assert code == 0 and "validation AUC" in stdout
    record = store.load(out).iloc[0]
    assert record["steps"] == 20 and 0 <= record["eval_auc"] <= 1 and record["config_name"] == "tiny"
    code, stdout, err = run_cli(capsys, "train", "--resume", str(tmp_path / "c.pt"), "--steps", "30", "--no-progress")
    assert code == 0 and "resumed" in err and "trained 30 steps" in stdout
    assert len(store.load(tmp_path / "results" / "train.csv")) == 1  # the default --out
    code, _, err = run_cli(capsys, "train", "--resume", str(tmp_path / "c.pt"), "--seed", "3")
    assert code == 2 and "drop --seed" in err
    code, _, err = run_cli(capsys, "train", "--resume", str(tmp_path / "c.pt"), "--steps", "10", "--no-progress")
    assert (
        code == 2 and err == f"dlrm-study: error: --steps 10 is the total to reach; {tmp_path / 'c.pt'} is at step 20\n"
    )


def test_set_train_steps_is_not_overridden_by_the_default(capsys, tmp_path):
    out = tmp_path / "train.csv"
    argv = ["train", "--set", "train.steps=3", "--set", "train.eval_batches=1", "--no-progress", "--out", str(out)]
    assert run_cli(capsys, *argv)[0] == 0
    assert run_cli(capsys, *argv, "--steps", "4")[0] == 0  # --steps, when given, wins
    assert list(store.load(out)["steps"]) == [3, 4]


def test_bench_prints_breakdown_and_appends(capsys, tmp_path):
    out = tmp_path / "bench.csv"
    argv = ["bench", "--steps", "3", "--warmup", "1", "--profile-steps", "1", "--roofline", "quick", "--repeats", "2"]
    argv += ["--no-progress", "--out", str(out)]
    code, stdout, _ = run_cli(capsys, *argv)
    assert code == 0 and "embedding_backward_update" in stdout and "roofline bound" in stdout
    assert "repeat 0:" in stdout and "repeat 1:" in stdout and "samples/s, median of repeats" in stdout
    run_cli(capsys, *argv)  # bench measures anew every time: two more records
    frame = store.load(out)
    assert len(frame) == 4 and (frame["roofline_fraction"] > 0).all() and list(frame["repeat"]) == [0, 1, 0, 1]
    assert set(frame["variant"]) == {"reference"} and frame["machine"].nunique() == 1
    assert (frame["roofline_gemm_fp32_gflops"] > 0).all() and (frame["roofline_update_fp32_gbps"] > 0).all()


def test_roofline_command_prints_the_bound_and_records_it(capsys, tmp_path):
    out = tmp_path / "roof.csv"
    code, stdout, _ = run_cli(capsys, "roofline", "--config", "dlrm-benchmark", "--quick", "--out", str(out))
    assert code == 0 and "bound:" in stdout and "GEMM fp32" in stdout and "at the layers' shapes" in stdout
    record = store.load(out).iloc[0]
    assert record["roofline_ms"] > 0 and record["roofline_gemm_fp32_gflops"] > 0
    assert record["roofline_gather_bf16_gbps"] > 0 and record["gemm_fp32_gflops_2048x1024x1024_grad_weight"] > 0


def test_module_entry_point_has_no_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "dlrm_study", "train", "--set", "train.batch_size=0"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr == "dlrm-study: error: train.batch_size must be positive, got 0\n"


def test_a_reader_that_stops_reading_is_no_error():
    """`dlrm-study fingerprint | head -1`: the pipe closes after one line; the command stops quietly with the
    shell's SIGPIPE status, not an error line."""
    read, write = os.pipe()
    os.close(read)  # a reader gone before the first line
    done = subprocess.run([sys.executable, "-m", "dlrm_study", "fingerprint"], stdout=write, stderr=subprocess.PIPE,
                          text=True, timeout=120)  # fmt: skip
    os.close(write)
    assert (done.returncode, done.stderr) == (141, "")
