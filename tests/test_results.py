import csv
import os
import signal
import subprocess
import sys
import time

from dlrm_study.records import provenance, store
from dlrm_study.records.record import make_record


def test_append_creates_widens_and_loads(tmp_path):
    path = tmp_path / "out" / "records.csv"
    store.append(path, {"a": 1, "b": "x"})
    store.append(path, {"a": 2, "c": 3.5})  # a new field widens the header
    header, rows = store.read_rows(path)
    assert header == ["a", "b", "c"]
    assert rows == [{"a": "1", "b": "x", "c": ""}, {"a": "2", "b": "", "c": "3.5"}]
    frame = store.load(path)
    assert list(frame["a"]) == [1, 2]
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_provenance_names_software_and_hardware():
    prov = provenance.provenance("cpu")
    for key in ("package_version", "git_commit", "torch_version", "cpu_model", "threads", "timestamp", "host"):
        assert prov[key] not in ("", None), key
    assert prov["gpu_model"] == ""


WRITER = """
import sys
from dlrm_study.records import store
for i in range(100000):
    store.append(sys.argv[1], {"i": i, "payload": "x" * 2000})
"""


def test_killed_writer_leaves_only_whole_rows(tmp_path):
    path = tmp_path / "r.csv"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)])
    guard = time.monotonic() + 600  # against a hang only: 30 fsynced rewrites take what a busy machine gives them
    while len(store.read_rows(path)[1]) < 30:
        assert proc.poll() is None and time.monotonic() < guard, "the writer ended or hung before 30 rows"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) >= 30
    assert [int(r["i"]) for r in rows] == list(range(len(rows)))
    assert all(r["payload"] == "x" * 2000 for r in rows)


TWO_WRITERS = """
import sys
from dlrm_study.records import store
for i in range(int(sys.argv[3])):
    store.append(sys.argv[1], {"writer": sys.argv[2], "i": i})
"""


def test_two_writers_on_one_csv_lose_nothing(tmp_path):
    path = tmp_path / "r.csv"
    writers = [subprocess.Popen([sys.executable, "-c", TWO_WRITERS, str(path), name, "40"]) for name in "ab"]
    assert [writer.wait(timeout=600) for writer in writers] == [0, 0]  # a hang guard
    rows = store.read_rows(path)[1]
    assert len(rows) == 80
    for name in "ab":  # each writer's records whole and in its order, none lost to the other's rewrite
        assert [int(row["i"]) for row in rows if row["writer"] == name] == list(range(40))


def test_the_launchers_commit_wins(monkeypatch):
    # A GPU machine's copy of the tree may sit in another checkout: the launcher's word counts.
    assert provenance.git_commit() != "abc1234"
    monkeypatch.setenv("DLRM_STUDY_COMMIT", "abc1234")
    assert provenance.git_commit() == "abc1234"
    assert make_record("x", {"samples_per_s": 1.0})["git_commit"] == "abc1234"
