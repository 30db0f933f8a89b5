"""A run is a process: a study's runs are measured one process each (`studies.runs`), the points a claim's
rule reads get the claim's runs, and each variant warms up until its step time settles, so repeat 0 counts."""

import random
import statistics
import subprocess
import sys

import pytest
from tests.test_runner import point

from dlrm_study.errors import UsageError
from dlrm_study.measure import context, runner, settle
from dlrm_study.plans import cpu
from dlrm_study.report import session
from dlrm_study.studies import runs


def test_the_deciding_points_get_the_claim_runs_and_the_rest_the_study_runs():
    points = [point("p", "a", "b", "c"), point("q", "a", "b", "c")]
    tasks = runner.schedule(points, 2, lambda _: "m", runs=2, claim_runs=5, deciding=lambda p, v: (p, v) == ("p", "a"))
    by_slot = {slot: sorted({(t.point, t.variant) for t in tasks if t.slot == slot}) for slot in range(1, 6)}
    assert by_slot[1] == by_slot[2] == [("p", "a"), ("p", "b"), ("p", "c"), ("q", "a"), ("q", "b"), ("q", "c")]
    assert by_slot[3] == by_slot[4] == by_slot[5] == [("p", "a")]
    assert len([t for t in tasks if t.slot == 5]) == 2  # every repeat of the run


def test_a_process_started_for_one_run_schedules_only_that_run():
    points = [point("p", "a", "b")]
    assert context.current().slot is None
    with context.one_run(3):
        assert context.current().slot == 3
        tasks = runner.schedule(points, 2, lambda _: "m", runs=4)
    assert {t.slot for t in tasks} == {3} and len(tasks) == 4
    assert context.current().slot is None  # the block ends, every slot again
    with pytest.raises(UsageError), context.one_run(0):
        pass


def test_what_a_process_measured_and_reused_is_counted_in_its_context(monkeypatch, tmp_path):
    monkeypatch.setattr(context, "_PROCESS", context.RunContext())  # a new process
    tasks = runner.schedule([point("p", "a", "b")], 1, lambda _: "m")
    measure = lambda task: {"samples_per_s": 1.0, "ms_median": 1.0}  # noqa: E731
    runner.run(tasks, measure, tmp_path / "r.csv", "s", progress=False)
    assert (context.current().measured, context.current().reused) == (2, 0)
    runner.run(tasks, measure, tmp_path / "r.csv", "s", progress=False)  # every task recorded already
    assert (context.current().measured, context.current().reused) == (2, 2)
    assert session.footer() == "this run measured 2 records and reused 2 records already in the results folder"


def test_the_cpu_loops_decide_s2_at_every_preset_and_s3_at_its_two():
    spec = cpu.cpu_loops("quick", cpu.Path("/tmp"))
    assert spec.claim_runs == 32 and spec.runs == 1
    assert sorted(spec.deciding) == sorted(
        ["dlrm-benchmark/reference", "mlperf-scaled/reference", "kaggle/reference",
         "dlrm-benchmark/optimized-fp32", "dlrm-benchmark/optimized-bf16",
         "mlperf-scaled/optimized-fp32", "mlperf-scaled/optimized-bf16"]
    )  # fmt: skip


def test_runs_are_launched_slot_after_slot_across_the_studies():
    plan = runs.order(runs.chosen(["cpu-loops", "ablation", "cache"]), "quick")
    assert [(slot, s.name) for slot, s in plan[:4]] == [
        (1, "cpu-loops"),
        (1, "ablation"),
        (1, "cache"),
        (2, "cpu-loops"),
    ]
    assert [slot for slot, s in plan if s.name == "cpu-loops"] == list(range(1, 33))


def test_an_unknown_study_or_a_slot_out_of_range_is_one_line_and_exit_2(tmp_path):
    for args in (["--study", "nonsense"], ["--study", "ablation", "--slot", "7"], ["--slot", "1"]):
        done = subprocess.run([sys.executable, "-m", runs.MODULE, "--profile", "quick", "--out", str(tmp_path), *args],
                              capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 2, args
        assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("error: "), done.stderr
    assert not list(tmp_path.iterdir())  # nothing written


def test_warm_up_goes_on_until_the_step_time_stops_falling():
    slow_first = iter([90.0, 60.0, 40.0, 25.0, 15.0, 11.0, 10.0, 10.2, 9.9, 10.1, 10.0, 10.0, 10.0])
    assert settle.warm_up(lambda: next(slow_first), least=2) == 11  # 9.9, 10.1, 10.0 no faster than 11, 10, 10.2
    assert settle.warm_up(lambda: 10.0, least=8) == 8  # never fewer than asked
    assert settle.warm_up(lambda: 10.0 * random.random(), least=1, most=12) <= 12  # never more than `most`


def test_a_first_use_cost_stays_out_of_repeat_0():
    """Two variants, each paying a first-use cost over its first dozen steps in the process (the kind that made
    repeat 0's bf16/fp32 ratio 17% off): with a settling warm-up, repeat 0's ratio is within the noise of the
    others'; with the old fixed warm-up of 2 steps it is not."""
    rng = random.Random(1)

    def variant(base: float, first_use: float) -> "callable":
        made = iter(range(10**6))
        return lambda: base * (1 + first_use * 0.7 ** next(made)) * rng.lognormvariate(0, 0.02)

    def ratios(warm: "callable") -> list[float]:
        fast, slow = variant(10.0, 3.0), variant(18.0, 0.5)  # the fast one pays more at first (a kernel's build)
        out = []
        for _ in range(4):  # repeats, each: warm up, then 10 timed steps
            medians = []
            for step in (fast, slow):
                warm(step)
                medians.append(statistics.median(step() for _ in range(10)))
            out.append(medians[1] / medians[0])
        return out

    settled = ratios(lambda step: settle.warm_up(step, least=2))
    noise = statistics.stdev(settled[1:]) + 0.02
    assert abs(settled[0] - statistics.fmean(settled[1:])) < 3 * noise
    fixed = ratios(lambda step: [step() for _ in range(2)])
    assert abs(fixed[0] - statistics.fmean(fixed[1:])) > 3 * (statistics.stdev(fixed[1:]) + 0.02)  # it can fail
