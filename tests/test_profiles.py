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
