"""Where a notebook's records and figures live, and whose records it draws, whatever the working directory."""

from tests.conftest import ROOT

from dlrm_study.plans import profiles
from dlrm_study.records.machine import machine_key, slug
from dlrm_study.report import session


def test_results_dir_is_the_repositorys_wherever_it_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the root, not notebooks/
    assert profiles.results_dir("quick") == ROOT / "results"
    assert profiles.results_dir("quick", str(tmp_path)) == tmp_path
    assert profiles.results_dir("smoke") != ROOT / "results"  # a scratch folder


def test_only_publishing_writes_the_published_figures(tmp_path):
    assert session.figures_dir(tmp_path, measure=False) is None  # drawing only: inline, no file
    mine = session.figures_dir(tmp_path, measure=True)
    assert mine.parent == tmp_path / "figures" and mine.name == slug(machine_key())
    assert session.figures_dir(tmp_path, measure=True, publish=True) == tmp_path / "figures"
    assert session.measuring("smoke", None, False) and not session.measuring("quick", None, False)
    assert not session.measuring("smoke", str(tmp_path), False)  # a given folder has records to draw


def test_paths_are_shown_relative_to_the_repository(tmp_path):
    assert profiles.shown(ROOT / "results") == "results"
    assert profiles.shown(ROOT / ".venv-2020" / "bin" / "python") == ".venv-2020/bin/python"
    assert profiles.shown(tmp_path) == str(tmp_path)


def test_a_notebook_draws_the_published_machine_unless_it_measures(monkeypatch, tmp_path):
    from dlrm_study.report import session as session_module

    monkeypatch.setattr(session_module, "published_machine", lambda out, profile: "amd-epyc-f25m17s1/avx2/2cpu")
    assert session.whose("this", False, tmp_path, "quick") == "amd-epyc-f25m17s1/avx2/2cpu"  # whoever renders
    assert session.whose("this", True, tmp_path, "quick") == "this"  # measuring: this machine's own
    assert session.whose("k", False, tmp_path, "quick") == "k"
    monkeypatch.setattr(session_module, "published_machine", lambda out, profile: None)
    assert session.whose("this", False, tmp_path, "quick") == "this"  # no published records: this machine's


def test_the_published_machine_has_the_most_runs_of_today_s_code_not_the_last_to_measure():
    import pandas as pd

    from dlrm_study.analysis.evidence import most_measured
    from dlrm_study.records import code_identity
    from dlrm_study.records import columns as col

    today, old = code_identity.fingerprint_here("optimized"), "000000000000"
    full, few = "intel-xeon-f6m207s2/avx512f/2cpu", "amd-epyc-f25m17s1/avx512f/2cpu"
    stale = "amd-epyc-f23m1s2/avx2/2cpu"

    def runs(machine: str, count: int, day: str, code: str = today) -> list[dict[str, object]]:
        return [{col.MACHINE: machine, col.RUN_ID: f"{machine}-{day}-{r}", col.TIMESTAMP: f"2026-12-{day}T0{r}",
                 col.TRAIN_LOOP: "optimized", col.CODE_FINGERPRINT: code} for r in range(count)]  # fmt: skip

    frame = pd.DataFrame(runs(full, 3, "05") + runs(few, 1, "06") + runs(stale, 5, "07", old))
    assert most_measured(frame) == full  # not `stale` (most runs, of old code) nor `few` (the last today)
    assert most_measured(pd.DataFrame(runs(full, 2, "05") + runs(few, 2, "06"))) == few  # equals: the last
    assert most_measured(pd.DataFrame(runs(stale, 2, "07", old))) == stale  # none today: the last to measure
    assert most_measured(pd.DataFrame()) is None
