"""The one runner: interleaved, rotated repeats; resumable without loss or duplicates; machines apart."""

import itertools

import pytest
from tests.conftest import ROOT

from dlrm_study import config, platform
from dlrm_study.analysis.readers import sweep_records
from dlrm_study.errors import UsageError
from dlrm_study.measure import runner, sweep
from dlrm_study.plans import sweep as sweep_plan
from dlrm_study.records import machine as records_machine
from dlrm_study.records import store


def point(label: str, *variants: str) -> runner.Point:
    """A point of the label's own config (batch size), each variant a different seed."""
    batch = 16 * (1 + ord(label[0]) % 8)
    return label, {
        v: config.load("tiny", [f"train.seed={i}", f"train.batch_size={batch}"]) for i, v in enumerate(variants)
    }


def fake_measure(log: list | None = None, fail: str = ""):
    """Fields as a measurement returns them, without training: fast, and deterministic."""
    counter = itertools.count(1)

    def measure(task: runner.Task) -> dict[str, object]:
        if log is not None:
            log.append((task.repeat, task.point, task.variant))
        if task.variant == fail:
            raise UsageError(f"{fail} cannot run here")
        ms = 10.0 + next(counter) % 3
        return {"device": "cpu", "ms_median": ms, "ms_p10": ms * 0.9, "ms_p90": ms * 1.1, "samples_per_s": 1e3 / ms}

    return measure


def test_repeats_run_every_point_and_variant_rotated_repeat_major():
    tasks = runner.schedule([point("p", "a", "b", "c"), point("q", "a", "b", "c")], 4, lambda _: "m")
    order = [(t.repeat, t.point, t.variant) for t in tasks]
    assert order[:6] == [(0, "p", "a"), (0, "p", "b"), (0, "p", "c"), (0, "q", "a"), (0, "q", "b"), (0, "q", "c")]
    assert order[6:9] == [(1, "q", "b"), (1, "q", "c"), (1, "q", "a")]  # points and variants both rotated
    assert [r for r, _, _ in order] == sorted(r for r, _, _ in order)  # repeat-major: the ends of a knob are
    # measured in every repeat, minutes apart at most, never all of one point before the other
    by_repeat = {r: [t.variant for t in tasks if t.repeat == r and t.point == "p"] for r in range(4)}
    assert by_repeat == {0: ["a", "b", "c"], 1: ["b", "c", "a"], 2: ["c", "a", "b"], 3: ["a", "b", "c"]}
    assert [t.order for t in tasks if t.repeat == 1 and t.point == "p"] == [0, 1, 2]
    assert len({t.key for t in tasks}) == 24  # every measurement has its own resume key
    with pytest.raises(UsageError, match="repeats must be at least 1"):
        runner.schedule([point("p", "a")], 0, lambda _: "m")


def test_each_measurement_is_one_record_with_its_repeat_and_machine(tmp_path):
    out = tmp_path / "r.csv"
    tasks = runner.schedule([point("p", "a", "b")], 3, lambda _: "cpu-x/avx2/2cpu")
    counts = runner.run(tasks, fake_measure(), out, "s", progress=False)
    assert (counts.ran, counts.skipped, counts.failed) == (6, 0, 0)
    frame = store.load(out)
    assert sorted(zip(frame["variant"], frame["repeat"], strict=True)) == [(v, r) for v in "ab" for r in range(3)]
    assert set(frame["machine"]) == {"cpu-x/avx2/2cpu"} and set(frame["study"]) == {"s"}
    assert frame["flags"].isna().all() and frame["error"].isna().all()


def test_a_stopped_run_resumes_and_loses_and_duplicates_nothing(tmp_path):
    out, log = tmp_path / "r.csv", []
    tasks = runner.schedule([point("p", "a", "b"), point("q", "a", "b")], 3, lambda _: "m")
    first = runner.run(tasks, fake_measure(log), out, "s", progress=False, limit=5)  # stands for a kill
    assert (first.ran, first.left) == (5, 7)
    second = runner.run(tasks, fake_measure(log), out, "s", progress=False)
    assert (second.skipped, second.ran) == (5, 7)
    assert sorted(log) == sorted((t.repeat, t.point, t.variant) for t in tasks)  # each measured once
    assert [r for r, _, _ in log] == sorted(r for r, _, _ in log)  # repeat-major, each run in its own order
    frame = store.load(out)
    assert len(frame) == 12 and not frame.duplicated(["config_hash", "variant", "repeat"]).any()
    assert runner.run(tasks, fake_measure(), out, "s", progress=False).ran == 0


def test_two_machines_records_stay_apart(tmp_path):
    out = tmp_path / "r.csv"
    tasks_a = runner.schedule([point("p", "a")], 2, lambda _: "xeon/avx512f/2cpu")
    tasks_b = runner.schedule([point("p", "a")], 2, lambda _: "epyc/avx2/2cpu")
    runner.run(tasks_a, fake_measure(), out, "s", progress=False)
    assert runner.run(tasks_b, fake_measure(), out, "s", progress=False).ran == 2  # not taken for A's
    frame = store.load(out)
    assert frame.groupby("machine").size().to_dict() == {"epyc/avx2/2cpu": 2, "xeon/avx512f/2cpu": 2}


def test_sweep_records_select_one_machine(tmp_path):
    spec = sweep_plan.Sweep(name="m", variants=["reference"], repeats=2, steps=1, warmup=0, out=str(tmp_path / "s.csv"))
    sweep.run(spec, progress=False)
    other = [{**row, "machine": "amd-epyc-7b13/avx2/2cpu"} for row in store.read_rows(tmp_path / "s.csv")[1]]
    store.append_many(tmp_path / "s.csv", other)
    assert len(sweep_records(spec)) == 2  # this machine's
    assert len(sweep_records(spec, "amd-epyc-7b13/avx2/2cpu")) == 2
    assert len(sweep_records(spec, None)) == 4


def test_a_failing_variant_is_recorded_once_and_the_rest_go_on(tmp_path):
    out, log = tmp_path / "r.csv", []
    tasks = runner.schedule([point("p", "ok", "broken")], 3, lambda _: "m")
    counts = runner.run(tasks, fake_measure(log, fail="broken"), out, "s", progress=False)
    assert counts.ran == 4 and counts.failed == 3  # 3 ok, 1 broken measured; its other repeats not tried
    assert [entry[2] for entry in log].count("broken") == 1
    frame = store.load(out)
    assert frame[frame["variant"] == "broken"]["error"].str.contains("cannot run here").all()
    assert runner.run(tasks, fake_measure(), out, "s", progress=False).ran == 0  # resumed: nothing to do
    assert runner.run(tasks, fake_measure(), out, "s", progress=False, retry_errors=True).ran == 3
    with pytest.raises(UsageError):
        runner.run(tasks, fake_measure(fail="ok"), None, "s", progress=False, resume=False, record_errors=False)


def test_old_records_get_a_machine_from_their_own_fields_whoever_reads_them(tmp_path, monkeypatch):
    """Reading never completes a key: old rows are refused until migrated, once, from their own fields."""
    import runpy

    path = tmp_path / "old.csv"
    store.append_many(path, [
        {"study": "x", "cpu_model": "Intel(R) Xeon(R) Processor", "cpu_count": 2, "threads": 2, "gpu_model": "",
         "round": 1},
        {"study": "x", "cpu_model": "AMD EPYC 7B13 64-Core Processor", "threads": "", "gpu_model": "", "round": 0},
        {"study": "x", "machine": "intel-xeon/avx512f+avx512_bf16/1t", "cpu_count": 2, "threads": 1},
        {"study": "x", "machine": "amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu", "cpu_count": 2, "threads": 2},
    ])  # fmt: skip
    with pytest.raises(UsageError, match=r"run scripts/migrate_records\.py"):
        store.load(path)
    runpy.run_path(str(ROOT / "scripts" / "migrate_records.py"))["migrate"](path)
    keys = []
    for flags in ({"avx2"}, {"avx512f", "amx_bf16"}):  # two readers: what they run on must not matter
        monkeypatch.setattr(platform, "cpu_flags", lambda flags=flags: frozenset(flags))
        keys.append(list(store.load(path)["machine"]))
    assert (
        keys[0]
        == keys[1]
        == [
            "intel-xeon/isa-unrecorded/2cpu",
            "amd-epyc-7b13/isa-unrecorded/?cpu",  # no thread count, no CPU count: nothing invented
            "intel-xeon/avx512f+avx512_bf16/2cpu",  # the ISA it recorded is kept; threads left the key
            "amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu",
        ]
    )
    assert list(store.load(path)["repeat"])[:2] == [1, 0]


def test_machine_key_names_cpu_generation_isa_cpus_and_gpu(monkeypatch):
    from dlrm_study.records import Machine, machine

    monkeypatch.setattr(platform, "cpuinfo", lambda: {"model name": "AMD EPYC", "cpu family": "25", "model": "17",
                                                     "stepping": "1", "flags": "avx2 avx512f avx512_bf16"})  # fmt: skip
    monkeypatch.setattr(platform, "gpu_name", lambda: "")
    monkeypatch.setattr(machine.os, "cpu_count", lambda: 2)
    assert records_machine.machine_key() == "amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu"
    monkeypatch.setattr(platform, "gpu_name", lambda: "NVIDIA H200")
    m = Machine.parse(records_machine.machine_key())
    assert m.key.endswith("/2cpu/nvidia-h200") and m.has_gpu and m.native_bf16 and m.cpuid == "f25m17s1"
    assert m.bf16_class == "native bf16 without AMX"
    for key in ("amd-epyc/avx2/2cpu", "intel-xeon/avx512f+avx512_bf16+amx_bf16/16cpu/nvidia-h200",
                "intel-xeon/isa-unrecorded/2cpu"):  # fmt: skip
        assert Machine.parse(key).key == key
    assert Machine.parse("intel-xeon/isa-unrecorded/2cpu").native_bf16 is None


@pytest.mark.parametrize("fits", [True, False])
def test_a_points_runs_are_built_once_where_they_fit_together(tmp_path, monkeypatch, fits):
    monkeypatch.setattr(runner, "fits_together", lambda configs: fits)
    built, released = [], []
    points = [point("p", "a", "b"), point("q", "a", "b")]

    def build(cfg):
        built.append(cfg.hash())
        return len(built)

    def measure_run(run, task):
        ms = 10.0
        return {"device": "cpu", "ms_median": ms, "ms_p10": ms, "ms_p90": ms, "samples_per_s": 100.0, "run": run}

    measure, kept = runner.with_kept_runs(points, build, released.append, measure_run)
    tasks = runner.schedule(points, 3, lambda _: "m")
    runner.run(tasks, measure, tmp_path / "r.csv", "s", progress=False)
    kept.clear()
    frame = store.load(tmp_path / "r.csv")
    if fits:  # 4 builds (2 points x 2 variants), each run measured in all 3 repeats
        assert len(built) == 4 and frame.groupby(["point", "variant"])["run"].nunique().eq(1).all()
        assert set(frame["builds"]) == {"once per run"}
    else:
        assert len(built) == 12 and frame["run"].nunique() == 12 and set(frame["builds"]) == {"every repeat"}
    assert sorted(released) == sorted(set(frame["run"]))  # every run released, none twice


def test_any_exception_of_a_point_becomes_its_record_and_the_run_goes_on(tmp_path):
    """Triton's compile and resource errors are no RuntimeError: they too stay with their point."""
    from triton.runtime.errors import OutOfResources

    def measure(task: runner.Task) -> dict[str, object]:
        if task.variant == "b":
            raise OutOfResources(262144, 232448, "shared memory")
        return fake_measure()(task)

    tasks = runner.schedule([point("p", "a", "b"), point("q", "a")], 2, lambda _: "m")
    counts = runner.run(tasks, measure, tmp_path / "r.csv", "s", progress=False)
    assert (counts.ran, counts.failed) == (5, 2)  # b failed once; its second repeat is not tried
    frame = store.load(tmp_path / "r.csv")
    error = frame[frame["variant"] == "b"]["error"].iloc[0]
    assert error.startswith("OutOfResources: out of resource: shared memory")
    assert frame[frame["variant"] == "a"]["error"].isna().all()


def test_a_failure_that_leaves_the_gpu_unusable_stops_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "device_lost", lambda cfg: True)
    monkeypatch.setattr(runner, "arranged", lambda tasks, seed: list(tasks))  # a before b, as scheduled
    tasks = runner.schedule([point("p", "a", "b")], 2, lambda _: "m")
    with pytest.raises(runner.DeviceLost, match="unusable after UsageError: b cannot run here"):
        runner.run(tasks, fake_measure(fail="b"), tmp_path / "r.csv", "s", progress=False)
    assert len(store.load(tmp_path / "r.csv")) == 2  # a, then b's error record, written before it stopped
