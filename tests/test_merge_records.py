"""scripts/merge_records.py: a GPU session's records join the study's, once, and bad input changes nothing."""

import runpy
import subprocess
import sys

from tests.conftest import ROOT

from dlrm_study import config
from dlrm_study.records import store
from dlrm_study.records.record import make_record

SCRIPT = ROOT / "scripts" / "merge_records.py"


def write(folder, name: str, repeats: range, rate: float = 1.0) -> None:
    cfg = config.load("tiny")
    for repeat in repeats:
        store.append(folder / name, make_record("s", {"samples_per_s": rate + repeat}, cfg, repeat=repeat))


def test_records_are_added_once_with_their_new_columns(tmp_path):
    session, study = tmp_path / "gpu-run", tmp_path / "results"
    write(study, "sweeps.csv", range(2))
    write(session, "sweeps.csv", range(1, 4), rate=10.0)  # its repeat 1 is another measurement: kept
    store.append(
        session / "gpu_sweeps.csv", {**store.load(session / "sweeps.csv").iloc[0].to_dict(), "capture": "graph"}
    )
    merge = runpy.run_path(str(SCRIPT))["merge"]
    assert merge(session, study) == {"gpu_sweeps.csv": 1, "sweeps.csv": 3}
    assert merge(session, study) == {"gpu_sweeps.csv": 0, "sweeps.csv": 0}
    assert len(store.load(study / "sweeps.csv")) == 5
    assert store.load(study / "gpu_sweeps.csv")["capture"].tolist() == ["graph"]


def test_a_folder_without_records_is_one_line_and_exit_2(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "nope")], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "is not a folder of records" in done.stderr
