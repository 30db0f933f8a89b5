"""What the records store and its readers must never do quietly (issue 38's mutants): drop failed records
without counting them, keep one of two records of a cell, forget a field added to the config later, or
count a resumed training run's earlier steps in its rate."""

import types
from pathlib import Path

import pytest
from tests.test_runner import fake_measure

from dlrm_study import config
from dlrm_study.analysis import stats
from dlrm_study.analysis.readers import FAILED, config_key, left_out, point_key, sweep_records
from dlrm_study.errors import UsageError
from dlrm_study.measure import runner, sweep, training
from dlrm_study.plans import sweep as sweep_plan
from dlrm_study.records import columns as col
from dlrm_study.records import store
from dlrm_study.train import build
from dlrm_study.train import checkpoint as ckpt


def measured_sweep(tmp_path: Path, fail: str = "") -> sweep_plan.Sweep:
    """A sweep of 2 points x 2 variants x 2 repeats, its records made by a fake measurement (no training)."""
    spec = sweep_plan.Sweep(name="s", config="tiny", set=["train.batch_size=16"],
                            grid={"data.lookups_per_table": [1, 2]}, variants=["reference", "optimized-fp32"],
                            repeats=2, steps=2, warmup=1, out=str(tmp_path / "sweeps.csv"))  # fmt: skip
    runner.run(sweep.tasks(spec), fake_measure(fail=fail), Path(spec.out), "s", progress=False)
    return spec


def test_error_records_are_kept_when_read_and_counted_when_left_out(tmp_path):
    spec = measured_sweep(tmp_path, fail="optimized-fp32")  # fails once per point, then is not tried again
    frame = store.load(Path(spec.out))
    failed = frame[col.ERROR].fillna("") != ""
    assert (len(frame), int(failed.sum())) == (6, 2)  # the store reads every record, failed ones too
    assert store.LEFT_OUT not in frame.attrs  # none of them left out as unreadable
    records = sweep_records(spec)
    assert len(records) == 4 and left_out(records) == {FAILED: 2}  # left out by the reader, and counted


def test_two_records_of_one_cell_are_refused(tmp_path):
    spec = measured_sweep(tmp_path)
    assert len(sweep_records(spec)) == 8
    rows = store.read_rows(Path(spec.out))[1]
    store.append(Path(spec.out), {**rows[0], col.SAMPLES_PER_S: "1.0"})  # the same cell of the same run, again
    with pytest.raises(UsageError, match="two records of one cell"):
        sweep_records(spec)
    frame = store.load(Path(spec.out)).assign(_all="")
    variant = rows[0][col.VARIANT]
    other = next(v for v in spec.variants if v != variant)
    with pytest.raises(ValueError, match="two records of one cell"):
        stats.pairs(frame, variant, other, col.SAMPLES_PER_S, col.VARIANT, ["_all"])


@pytest.mark.parametrize("field", sorted(config.LATER_FIELDS))
def test_a_field_added_later_is_keyed_where_it_differs_from_what_ran_before(field):
    base = config.load("tiny")
    other = config.load("tiny", [f"{field}={not config.LATER_FIELDS[field]}"])
    assert base.hash() != other.hash()
    assert config_key(base) != config_key(other)
    assert store.key_here(base, "v") != store.key_here(other, "v")
    flat = base.flat()
    older = {k: v for k, v in flat.items() if k != field}  # a record written before the field existed
    assert config_key(base) == point_key(older)  # at its default it is what ran before it existed


def test_a_resumed_training_run_counts_only_its_own_steps(tmp_path, monkeypatch):
    """samples/s of a run resumed at step 3 and trained to 7: 4 steps over its own seconds (a fake clock)."""
    cfg = config.load("tiny", ["train.steps=3", "train.eval_batches=1", "train.batch_size=8"])
    training.train_and_record(build(cfg), None, tmp_path / "ck.pt", progress=False)
    resumed = ckpt.load(tmp_path / "ck.pt")
    resumed.cfg.train.steps = 7
    ticks = iter([100.0, 110.0])  # start and end of the timed training: 10 s
    monkeypatch.setattr(training, "time", types.SimpleNamespace(perf_counter=lambda: next(ticks)))
    record = training.train_and_record(resumed, None, progress=False)
    assert record[col.STEPS] == 7
    assert record[col.SAMPLES_PER_S] == pytest.approx(4 * 8 / 10.0)


def test_a_record_of_code_declared_alike_is_not_measured_again_and_one_of_other_code_is(tmp_path, monkeypatch):
    """A resume skips what today's code would measure the same: the tasks a run of today's code makes have the
    keys of records whose fingerprint LOOP_LOCK declares to run their loop's step alike; of no other record."""
    from dlrm_study.records import code_identity

    spec = measured_sweep(tmp_path)
    rows = store.read_rows(Path(spec.out))[1]

    def left() -> set[str]:  # the keys a resume of today's code would measure
        return {task.key for task in sweep.tasks(spec)} - {store.key_of(row) for row in rows}

    lock = {row[col.TRAIN_LOOP]: row[col.CODE_FINGERPRINT] for row in rows}  # loop -> the code that measured it
    assert left() == set()  # today's code: nothing left to measure
    monkeypatch.setattr(code_identity, "fingerprint_here", lambda _: "new000000000")  # the code changed since
    monkeypatch.setattr(code_identity, "LOOP_LOCK", {
        loop: ("step", ((measured, "c1"), ("new000000000", "c2"))) for loop, measured in lock.items()})  # fmt: skip
    assert left() == set()  # declared alike: still nothing to measure
    monkeypatch.setattr(code_identity, "LOOP_LOCK", {loop: ("step", (("new000000000", "c2"),)) for loop in lock})
    assert len(left()) == len(rows)  # new code: every task measured again
