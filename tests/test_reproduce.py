"""`make reproduce` measures what the code changed: its training run once per code and machine, and one line
that says how many records of this code the render added, or that it needed none."""

from dlrm_study import config
from dlrm_study.cli import reproduce
from dlrm_study.records import code_identity, store
from dlrm_study.records import columns as col
from dlrm_study.records.record import make_record


def test_the_training_run_is_made_once_per_code(tmp_path, monkeypatch):
    monkeypatch.setattr(reproduce, "TRAIN", ("tiny", ["train.steps=3", "train.eval_batches=1"]))  # seconds, not minutes
    assert reproduce.train_once(tmp_path) is True
    assert reproduce.train_once(tmp_path) is False  # the same code: its record is there
    path = tmp_path / "train.csv"
    (row,) = store.read_rows(path)[1]
    path.unlink()
    monkeypatch.setattr(store, "WRITTEN", set())  # made again on purpose (a vanished file is refused)
    store.append(path, {**row, col.CODE_FINGERPRINT: "0123456789ab"})  # a record of other code
    assert reproduce.train_once(tmp_path) is True
    assert [r[col.CODE_FINGERPRINT] for r in store.read_rows(path)[1]] == ["0123456789ab", row[col.CODE_FINGERPRINT]]


def test_one_line_says_what_a_measuring_render_added(tmp_path):
    cfg = config.load("tiny")
    store.append(tmp_path / "a.csv", make_record("s", {"ms_median": 1.0}, cfg, variant="x", repeat=0))
    other = {**make_record("s", {"ms_median": 1.0}, cfg, variant="x", repeat=1), col.CODE_FINGERPRINT: "old"}
    store.append(tmp_path / "b.csv", other)  # of other code: not this code's
    store.append(tmp_path / "b.csv", {**make_record("s", {}, cfg, variant="x", repeat=2), col.MACHINE: "x/avx2/1cpu"})
    assert reproduce.records_of_this_code(tmp_path) == 1
    none = reproduce.measured_line(1, 1)
    code = ", ".join(
        f"{loop} {fp}" + (f" (as {code_identity.today(loop)})" if code_identity.today(loop) != fp else "")
        for loop, fp in code_identity.loop_fingerprints().items()
    )  # each loop's, and what it runs as
    assert none.startswith("measured nothing:") and f"({code}, 1 records)" in none and "\n" not in none
    assert reproduce.measured_line(1, 5).startswith(f"measured 4 new records of this code ({code})")
