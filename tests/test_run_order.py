"""Runs are clusters: a study measures its runs one after the other, each under its own run id and in an order
drawn from it, so first-use costs do not fall on the same variant in every run; repeat 0 is recorded."""

import collections

import pytest
from tests.test_runner import fake_measure, point

from dlrm_study.errors import UsageError
from dlrm_study.measure import runner
from dlrm_study.records import columns as col
from dlrm_study.records import provenance, store

VARIANTS = ("a", "b", "c", "d")


def slot_tasks(repeats: int = 4) -> list[runner.Task]:
    return runner.schedule([point("p", *VARIANTS), point("q", *VARIANTS)], repeats, lambda _: "m")


def test_two_runs_two_run_ids_two_orders_repeat_0_kept(tmp_path, monkeypatch):
    ids = iter(["20260101T000000-1-aaaa", "20260101T000000-1-bbbb"])
    monkeypatch.setattr(provenance, "new_run_id", lambda: next(ids))
    log: list = []
    tasks = runner.schedule([point("p", *VARIANTS), point("q", *VARIANTS)], 3, lambda _: "m", runs=2)
    counts = runner.run(tasks, fake_measure(log), tmp_path / "r.csv", "s", progress=False)
    assert (counts.ran, counts.runs) == (48, 2) and "48 measurements in 2 runs" in str(counts)
    frame = store.load(tmp_path / "r.csv")
    assert frame.groupby(col.RUN_SLOT)[col.RUN_ID].agg(set).to_dict() == {
        1: {"20260101T000000-1-aaaa"},
        2: {"20260101T000000-1-bbbb"},
    }
    assert sorted(frame[col.REPEAT].unique()) == [0, 1, 2]  # the warm-up repeat is recorded
    first, second = log[:24], log[24:]
    assert sorted(first) == sorted(second) and first != second  # the same tasks, each run in its own order
    for _, run in frame.groupby(col.RUN_ID):  # `order`: the variant's position within its point's repeat
        for _, cell in run.groupby([col.REPEAT, col.POINT]):
            assert sorted(cell[col.ORDER]) == [0, 1, 2, 3]
            assert list(cell[col.ORDER]) == [0, 1, 2, 3]  # as measured (the file's order)


def test_a_run_order_is_drawn_from_its_run_id():
    tasks = slot_tasks()
    same = runner.arranged(tasks, "run-x")
    assert same == runner.arranged(tasks, "run-x")  # the record's run id says what order it ran in
    assert [(t.point, t.variant) for t in same] != [(t.point, t.variant) for t in runner.arranged(tasks, "run-y")]
    assert sorted(t.key for t in same) == sorted(t.key for t in tasks)  # every task, once
    assert [t.repeat for t in same] == sorted(t.repeat for t in tasks)  # still repeat-major


def test_the_first_variant_is_balanced_across_runs_and_within_a_run():
    """(Before, every run started from the schedule's order: variant a of point p first in all of them.)"""
    tasks = slot_tasks()
    firsts = collections.Counter(runner.arranged(tasks, f"run-{i}")[0].variant for i in range(400))
    assert set(firsts) == set(VARIANTS)
    assert all(70 <= n <= 130 for n in firsts.values()), firsts  # 100 each expected (binomial sd 8.7)
    points = collections.Counter(runner.arranged(tasks, f"run-{i}")[0].point for i in range(400))
    assert all(160 <= n <= 240 for n in points.values()), points
    ordered = runner.arranged(tasks, "run-0")
    for label in ("p", "q"):  # within a run of 4 repeats, each variant runs first in its point exactly once
        heads = [next(t.variant for t in ordered if t.point == label and t.repeat == r) for r in range(4)]
        assert sorted(heads) == sorted(VARIANTS)


def test_each_run_builds_its_own(tmp_path):
    built = []
    points = [point("p", "a", "b")]

    def measure_run(run: object, task: runner.Task) -> dict[str, object]:
        return fake_measure()(task)

    measure, kept = runner.with_kept_runs(points, built.append, lambda run: None, measure_run)
    tasks = runner.schedule(points, 3, lambda _: "m", runs=2)
    runner.run(tasks, measure, tmp_path / "r.csv", "s", progress=False)
    kept.clear()
    assert len(built) == (4 if kept.keep else 12)  # kept across repeats, never across runs


def test_runs_must_be_at_least_one():
    with pytest.raises(UsageError, match="runs must be at least 1"):
        runner.schedule([point("p", "a")], 1, lambda _: "m", runs=0)
    keys = {t.key for t in runner.schedule([point("p", "a")], 2, lambda _: "m", runs=3)}
    assert len(keys) == 6  # the slot is part of the resume key
    assert {t.slot for t in runner.schedule([point("p", "a")], 1, lambda _: "m", runs=3)} == {1, 2, 3}
