"""Records know the code that measured them: their loop's fingerprint (`records.code_identity`), in every record
and in the resume key, so a change to that code is measured again and records of other code are never reused
(nor lost). What each fingerprint reads: tests/test_code_identity.py."""

import dataclasses
from pathlib import Path

from tests.test_runner import fake_measure, point

from dlrm_study import config
from dlrm_study.measure import runner
from dlrm_study.records import code_identity, provenance, store
from dlrm_study.records import columns as col
from dlrm_study.records.record import make_record
from dlrm_study.studies import convergence


def edit(path: Path) -> None:
    """A change to a source file's code, read again as a new process would (a fingerprint is computed once)."""
    path.write_bytes(path.read_bytes() + (b"\nstatic int edited;\n" if path.suffix == ".cpp" else b"\n_edited = 1\n"))
    code_identity.fingerprint_here.cache_clear()


def test_the_fingerprints_read_the_loops_code_and_nothing_else(package):
    here = code_identity.loop_fingerprints()
    assert provenance.code_fingerprint("optimized") == here["optimized"]  # the copy's: wherever they lie, git or not
    assert all(len(fp) == 12 and int(fp, 16) >= 0 for fp in here.values())
    for outside in ("claims/s3.py", "report/render.py", "plans/profiles.py", "cli/main.py"):
        edit(package / outside)
        assert code_identity.loop_fingerprints() == here, outside  # reading and rendering are not the loops' code
    seen = {provenance.code_fingerprint()}
    for timed in ("model/kernels/fused_cpu.cpp", "model/kernels/triton_ops.py", "model/dlrm.py", "train/cpu.py",
                  "data/synthetic.py", "config/schema.py", "distributed/run.py"):  # fmt: skip
        edit(package / timed)
        now = provenance.code_fingerprint()  # every loop's together
        assert now not in seen, timed
        seen.add(now)


def test_every_record_names_its_code_and_run_slot(package):
    cfg = config.load("tiny", ["train.loop=torchrec"])
    row = make_record("s", {"ms_median": 1.0}, cfg, variant="a", repeat=0)
    assert row[col.CODE_FINGERPRINT] == code_identity.loop_fingerprints()["torchrec"] and row[col.RUN_SLOT] == 1
    assert row[col.CODE_FINGERPRINT] != code_identity.loop_fingerprints()["optimized"]
    unlooped = make_record("s", {}, None, run_slot=2)  # of no config: every loop's code
    assert unlooped[col.RUN_SLOT] == 2 and unlooped[col.CODE_FINGERPRINT] == provenance.code_fingerprint()


def test_a_change_to_the_timed_code_is_measured_again_and_the_old_records_stay(package, tmp_path):
    """(The resume key had no code in it: the second code's run measured nothing.)"""
    out, points = tmp_path / "r.csv", [point("p", "a", "b")]
    first = runner.run(runner.schedule(points, 3, lambda _: "m", runs=2), fake_measure(), out, "s", progress=False)
    assert (first.ran, first.skipped) == (12, 0)
    assert runner.run(runner.schedule(points, 3, lambda _: "m", runs=2), fake_measure(), out, "s",
                      progress=False).ran == 0  # fmt: skip
    old = runner.schedule(points, 3, lambda _: "m")[0].code

    edit(package / "model" / "interaction.py")
    new = runner.schedule(points, 3, lambda _: "m")[0].code
    assert new != old
    tasks = runner.schedule(points, 3, lambda _: "m", runs=2)
    again = runner.run(tasks, fake_measure(), out, "s", progress=False)
    assert (again.ran, again.skipped) == (12, 0)  # every record of the old code refused
    frame = store.load(out)
    assert frame[col.CODE_FINGERPRINT].value_counts().to_dict() == {old: 12, new: 12}  # none deleted
    assert frame[frame[col.CODE_FINGERPRINT] == new][col.RUN_ID].nunique() == 2  # new run ids, one per run
    assert runner.run(tasks, fake_measure(), out, "s", progress=False).ran == 0  # the same code: nothing to do


def test_a_change_to_one_loops_code_measures_its_runs_again_whole(package, tmp_path):
    """A kernel of the optimized loop changed: the reference's records are still of today's code, but reused they
    would leave the optimized loop's new records in runs of their own, paired with nothing (a ratio pairs within a
    run). So each run is measured again whole, the reference beside the optimized loop."""
    out = tmp_path / "r.csv"
    cfgs = {v: config.load("tiny", [f"train.loop={loop}"]) for v, loop in (("ref", "reference"), ("opt", "optimized"))}
    points = [("p", cfgs)]
    assert runner.run(runner.schedule(points, 2, lambda _: "m", runs=2), fake_measure(), out, "s",
                      progress=False).ran == 8  # fmt: skip
    reference = provenance.code_fingerprint("reference")

    edit(package / "model" / "kernels" / "fused_cpu.cpp")
    assert provenance.code_fingerprint("reference") == reference  # the reference's records are still today's
    tasks = runner.schedule(points, 2, lambda _: "m", runs=2)
    assert len(runner.pending(tasks, out)) == 8  # yet every task is measured again, not only the optimized ones
    again = runner.run(tasks, fake_measure(), out, "s", progress=False)
    assert (again.ran, again.skipped) == (8, 0)
    frame = store.load(out)
    runs = frame.iloc[8:].groupby(col.RUN_ID)[col.VARIANT].apply(sorted).map(tuple)
    assert runs.tolist() == [("opt", "opt", "ref", "ref")] * 2  # each new run holds both loops, paired
    assert runner.run(tasks, fake_measure(), out, "s", progress=False).ran == 0  # whole runs of today's code: done


def test_a_stack_of_its_own_keeps_its_runs_whole_when_todays_libraries_change(tmp_path):
    """The 2020 stack's records name its own torch (`studies.baseline`), so an upgrade of today's torch leaves them
    current and the rest not: reused, they would pair with nothing. Each run is measured again whole."""
    out, points = tmp_path / "r.csv", [point("p", "old", "today")]

    def tasks(torch_today: str) -> list[runner.Task]:
        made = runner.schedule(points, 2, lambda _: "m", runs=2)
        torch_of = {"old": "1.5.1", "today": torch_today}
        return [dataclasses.replace(t, versions={**t.versions, "torch_version": torch_of[t.variant]}) for t in made]

    measure = fake_measure()

    def on_its_stack(task: runner.Task) -> dict[str, object]:
        return {**measure(task), "torch_version": task.versions["torch_version"]}

    assert runner.run(tasks("2.13.0"), on_its_stack, out, "s", progress=False).ran == 8
    assert runner.pending(tasks("2.13.0"), out) == []
    assert len(runner.pending(tasks("2.99.0"), out)) == 8  # the old stack's records too, beside today's new torch


def test_a_change_to_one_loops_code_trains_its_runs_again_whole(package, tmp_path, monkeypatch):
    """Convergence pairs each loop with the reference within one run (a process): after a change to the optimized
    loop, the reference is trained again beside it."""
    trained: list[tuple[str, int, str]] = []
    process = {"run": "first"}

    def fake_rows(cfg, study, window, curve, bar, variant, repeat) -> list[dict[str, object]]:
        trained.append((variant, repeat, process["run"]))
        return [make_record(study, {"loss": 0.5}, cfg, run_id=process["run"], variant=variant, repeat=repeat)]

    monkeypatch.setattr(convergence, "trained_rows", fake_rows)
    loops = (("ref", "reference"), ("opt", "optimized"))
    configs = [(v, seed, config.load("tiny", [f"train.loop={loop}", f"train.seed={seed}"])) for v, loop in loops
               for seed in (0, 1)]  # fmt: skip
    path = tmp_path / "c.csv"
    convergence.train_and_record(configs, path, "c", 10)
    process["run"] = "second"
    convergence.train_and_record(configs, path, "c", 10)
    assert len(trained) == 4  # today's code: nothing to train

    edit(package / "model" / "kernels" / "fused_cpu.cpp")
    process["run"] = "third"
    convergence.train_and_record(configs, path, "c", 10)
    assert sorted(trained[4:]) == sorted((v, s, "third") for v, s, _ in trained[:4])  # the reference too
    process["run"] = "fourth"
    convergence.train_and_record(configs, path, "c", 10)
    assert len(trained) == 8


def test_records_without_a_fingerprint_are_never_reused(package, tmp_path):
    out, points = tmp_path / "r.csv", [point("p", "a")]
    runner.run(runner.schedule(points, 2, lambda _: "m"), fake_measure(), out, "s", progress=False)
    rows = store.read_rows(out)[1]
    older = tmp_path / "older.csv"
    for row in rows:  # as written before records carried a fingerprint or a run slot
        store.append(older, {k: v for k, v in row.items() if k not in (col.CODE_FINGERPRINT, col.RUN_SLOT)})
    tasks = runner.schedule(points, 2, lambda _: "m")
    assert len(runner.pending(tasks, older)) == 2
    assert runner.run(tasks, fake_measure(), older, "s", progress=False).ran == 2
    assert len(store.read_rows(older)[1]) == 4


def test_a_failure_of_other_code_rules_nothing_out(package, tmp_path):
    out, points = tmp_path / "r.csv", [point("p", "ok", "broken")]
    runner.run(runner.schedule(points, 2, lambda _: "m"), fake_measure(fail="broken"), out, "s", progress=False)
    edit(package / "model" / "dlrm.py")  # the fix
    counts = runner.run(runner.schedule(points, 2, lambda _: "m"), fake_measure(), out, "s", progress=False)
    assert (counts.ran, counts.failed) == (4, 0)
