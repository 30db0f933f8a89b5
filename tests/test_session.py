"""What a notebook draws and what a render names as its origin: each machine's newest code only, a figure over
more than one session saying which commit measured which points, and a manifest naming the tree the render found."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
from tests.conftest import ROOT

from dlrm_study.analysis import current
from dlrm_study.records import columns as col
from dlrm_study.report import manifest, reading, render, session


def records(*rows: tuple[str, str, str, str, str]) -> pd.DataFrame:
    names = [col.MACHINE, col.CODE_FINGERPRINT, col.TIMESTAMP, col.GIT_COMMIT, col.POINT]
    return pd.DataFrame(rows, columns=names)


def test_a_figure_draws_each_machines_newest_code_only():
    frame = records(
        ("a", "old", "2026-12-01", "1111111aaa", "rows=1"),
        ("a", "new", "2026-12-02", "2222222bbb", "rows=1"),
        ("b", "old", "2026-12-03", "3333333ccc", "rows=1"),  # b's newest is its only code
    )
    kept = session.current_code(frame)
    assert list(zip(kept[col.MACHINE], kept[col.CODE_FINGERPRINT], strict=True)) == [("a", "new"), ("b", "old")]


def test_a_run_s_records_of_a_loop_at_an_older_code_are_history_whole_per_loop():
    """The reference's code unchanged, the optimized loop's changed: the old run's reference records are of the newest
    reference code and stay (a reference-only claim counts them); its optimized records are history. A run that
    holds one loop at two codes loses that loop's records whole, so no pair within a loop joins two codes."""
    frame = pd.DataFrame({
        col.MACHINE: ["a"] * 7,
        col.TRAIN_LOOP: ["reference", "optimized", "reference", "optimized", "reference", "optimized", "optimized"],
        col.CODE_FINGERPRINT: ["ref1", "opt1", "ref1", "opt2", "ref1", "opt1", "opt2"],
        col.TIMESTAMP: ["2026-12-01", "2026-12-01", "2026-12-02", "2026-12-02", "2026-12-03", "2026-12-03",
                        "2026-12-03"],
        col.RUN_ID: ["old", "old", "new", "new", "mixed", "mixed", "mixed"],
    })  # fmt: skip
    kept = current.newest_code_only(frame)
    assert list(zip(kept[col.RUN_ID], kept[col.TRAIN_LOOP], strict=True)) == [
        ("old", "reference"), ("new", "reference"), ("new", "optimized"), ("mixed", "reference")
    ]  # fmt: skip
    assert current.newest_code_only(frame.drop(columns=col.RUN_ID))[col.CODE_FINGERPRINT].tolist() == [
        "ref1", "ref1", "opt2", "ref1", "opt2"
    ]  # fmt: skip
    no_loop = frame.drop(columns=col.TRAIN_LOOP)  # records of no one loop: a run of two codes is history whole
    assert set(current.at_head(no_loop, {("a", ""): "opt2"})[col.RUN_ID]) == set()


def test_a_timed_figure_draws_the_repeats_its_verdict_judges():
    """Newest code only, and each run's warm-up (repeat 0) out where the run has more: what `current` reads."""
    frame = records(
        ("a", "old", "2026-12-01", "1111111aaa", "rows=1"),
        ("a", "new", "2026-12-02", "2222222bbb", "rows=1"),
        ("a", "new", "2026-12-02", "2222222bbb", "rows=1"),
        ("a", "new", "2026-12-02", "2222222bbb", "rows=1"),
        ("b", "new", "2026-12-03", "3333333ccc", "rows=1"),  # a run of one repeat keeps it
    ).assign(**{col.REPEAT: [0, 0, 1, 2, 0], col.RUN_ID: ["r0", "r1", "r1", "r1", "r2"], col.THREADS: 2})
    kept = session.timed(frame)
    assert list(zip(kept[col.MACHINE], kept[col.REPEAT], strict=True)) == [("a", 1), ("a", 2), ("b", 0)]
    assert list(session.current_code(frame)[col.REPEAT]) == [0, 1, 2, 0]  # trained seeds: every one kept


def test_one_session_goes_unsaid_and_two_are_named_point_by_point():
    one = records(("a", "", "t", "577ad01xyz", "rows=100"), ("a", "", "t", "577ad01xyz", "rows=400"))
    assert session.measured_in(one, "Size") == ""
    two = pd.concat([one, records(("a", "", "t", "e5c64cdxyz", "rows=400"))], ignore_index=True)
    said = session.measured_in(two, "Size")
    assert said.startswith("Size: records of 2 sessions")
    assert "at 577ad01, 2 records: 100 (1), 400 (1)" in said and "at e5c64cd, 1 record: 400 (1)" in said


def test_the_manifest_names_the_commit_the_render_found_before_writing_its_page(tmp_path, monkeypatch):
    """The render writes docs/results.md before its manifest; asked then, git would call the tree dirty."""
    (tmp_path / "results").mkdir()
    written = []
    monkeypatch.setattr(render.provenance, "git_commit", lambda: "abc1234" + ("-dirty" if written else ""))
    monkeypatch.setattr(render, "execute", lambda *args, **kwargs: None)
    monkeypatch.setattr(render.ledger, "write_readme", lambda *args: False)
    monkeypatch.setattr(render.results_page, "write", lambda repo, profile: written.append(True) or [])
    render.publish("smoke", repo=tmp_path)
    assert written
    assert json.loads((tmp_path / "results" / manifest.MANIFEST).read_text())["commit"] == "abc1234"


def test_verdicts_are_judged_once_per_records_and_anew_when_they_change(tmp_path):
    first, table = reading.judged(tmp_path, "quick")
    assert reading.judged(tmp_path, "quick")[0] is first and reading.verdicts_of(first) is table
    assert reading.of(first, "m") is reading.of(first, "m")
    (tmp_path / "sweeps.csv").write_text((ROOT / "results" / "sweeps.csv").read_text())  # new records: a new key
    again, _ = reading.judged(tmp_path, "quick")
    assert again is not first and not again.cpu_loops.empty and first.cpu_loops.empty


def test_a_figure_draws_one_machine_the_one_that_measured_last():
    frame = pd.DataFrame({
        col.MACHINE: ["old-gpu-host", "new-gpu-host", "old-gpu-host"],
        col.TIMESTAMP: ["2026-12-01T00:00:00", "2026-12-04T00:00:00", "2026-12-01T00:01:00"],
    })  # fmt: skip
    assert list(session.newest_machine(frame)[col.MACHINE]) == ["new-gpu-host"]
    assert session.newest_machine(frame.iloc[0:0]).empty


def test_a_smoke_notebooks_scratch_records_go_with_its_process_and_a_given_folder_stays(tmp_path):
    code = "import sys; from dlrm_study.report import session; print(session.start('smoke', sys.argv[1] or None)[1])"
    scratch = subprocess.run([sys.executable, "-c", code, ""], capture_output=True, text=True, check=True)
    folder = Path(scratch.stdout.strip().splitlines()[-1])
    assert folder.name.startswith("dlrm-study-smoke-") and not folder.exists()
    given = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    assert Path(given.stdout.strip().splitlines()[-1]) == tmp_path and tmp_path.is_dir()


def test_a_killed_notebooks_scratch_folder_goes_when_the_next_one_starts(tmp_path, monkeypatch):
    monkeypatch.setattr(session.profiles.tempfile, "tempdir", str(tmp_path))  # scratch folders made here
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    killed, running, unowned = (tmp_path / f"{session.profiles.SCRATCH}{name}" for name in ("a", "b", "c"))
    for folder, owner in ((killed, dead.stdout.strip()), (running, str(os.getpid())), (unowned, None)):
        folder.mkdir()
        if owner:
            (folder / session.OWNER).write_text(owner)
    out = session.start("smoke", None)[1]
    assert out.parent == tmp_path and (out / session.OWNER).read_text() == str(os.getpid())
    assert not killed.exists() and running.is_dir() and unowned.is_dir()  # a CLI run's folder has no owner: kept
