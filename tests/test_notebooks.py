"""The notebooks run under papermill with injected parameters (nbval runs them all in `make test`)."""

import hashlib
import json
import re
import subprocess

import papermill
from tests.conftest import ROOT

from dlrm_study.records import store
from dlrm_study.records.machine import machine_key, slug

NOTEBOOKS = ROOT / "notebooks"
PUBLISHED = ROOT / "results"


def published() -> dict[str, str]:
    """The committed records and figures, by content."""
    files = [*PUBLISHED.glob("*.csv"), *(PUBLISHED / "figures").rglob("*")]
    return {str(f.relative_to(ROOT)): hashlib.sha256(f.read_bytes()).hexdigest() for f in files if f.is_file()}


def git_status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--", "results"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout  # fmt: skip


def printed(output) -> str:
    book = json.loads(output.read_text())
    cells = [cell for cell in book["cells"] if cell["cell_type"] == "code"]
    return "".join("".join(out.get("text", "")) for cell in cells for out in cell.get("outputs", []))


def test_papermill_from_the_repository_root_draws_the_committed_records_and_writes_nothing(tmp_path, monkeypatch):
    """The default parameters, from the root: the published records drawn, nothing in results/ touched."""
    monkeypatch.delenv("DLRM_STUDY_PROFILE", raising=False)  # the default profile, whose records are committed
    before, status = published(), git_status()
    output = tmp_path / "07.ipynb"
    papermill.execute_notebook(str(NOTEBOOKS / "07_convergence.ipynb"), str(output), kernel_name="python3",
                               cwd=str(ROOT), progress_bar=False)  # fmt: skip
    text = printed(output)
    assert "profile quick; records in results;" in text and "this copy measured nothing" in text
    assert str(ROOT) not in text  # no absolute path of the machine that rendered it
    book = json.loads(output.read_text())
    assert any("image/png" in out.get("data", {}) for cell in book["cells"] for out in cell.get("outputs", []))
    assert published() == before and git_status() == status


def test_papermill_measuring_elsewhere_keeps_the_published_figures(tmp_path):
    """`-p measure True -p results_dir DIR`, from another folder: records and figures there, under this machine."""
    before = published()
    output, out = tmp_path / "07.ipynb", tmp_path / "res"
    papermill.execute_notebook(
        str(NOTEBOOKS / "07_convergence.ipynb"),
        str(output),
        parameters={"profile": "smoke", "measure": True, "results_dir": str(out)},
        kernel_name="python3",
        cwd=str(tmp_path),
        progress_bar=False,
    )
    assert re.search(r"this run measured [1-9]\d* record", printed(output))
    assert (out / "convergence.csv").is_file()
    figures = out / "figures" / slug(machine_key())
    assert (figures / "07_convergence.png").is_file() and not (out / "figures" / "07_convergence.png").exists()
    assert published() == before


def test_papermill_injects_parameters_and_the_figure_is_saved(tmp_path):
    output = tmp_path / "out.ipynb"
    papermill.execute_notebook(
        str(NOTEBOOKS / "01_cpu_reference_breakdown.ipynb"),
        str(output),
        parameters={"profile": "smoke", "results_dir": str(tmp_path / "res"), "measure": True, "publish": True},
        kernel_name="python3",
        cwd=str(NOTEBOOKS),
        progress_bar=False,
    )
    book = json.loads(output.read_text())
    printed = "".join(
        "".join(out.get("text", ""))
        for cell in book["cells"]
        for out in cell.get("outputs", [])
        if cell["cell_type"] == "code"
    )
    assert f"profile smoke; records in {tmp_path / 'res'}" in printed and "2 repeats of 1 warm-up" in printed
    frame = store.load(tmp_path / "res" / "sweeps.csv")
    measured = len(frame)  # 2 runs of every loop and a third of the deciding ones, 2 repeats each
    by_slot = frame.groupby("run_slot")["process_id"].agg(set)
    assert len(by_slot) == 3 and all(len(ids) == 1 for ids in by_slot)  # a run is one process
    assert len(set.union(*by_slot)) == 3  # and each run its own
    assert measured and f"this run measured {measured} records and reused 0 records" in printed  # counted as made
    assert "tiny: embedding backward + update take" in printed
    images = [out for cell in book["cells"] for out in cell.get("outputs", []) if "image/png" in out.get("data", {})]
    assert images  # the figure is shown in the notebook, not only saved
    assert (tmp_path / "res" / "figures" / "01_cpu_reference_breakdown.png").stat().st_size > 10_000


def test_source_notebooks_hold_only_checked_outputs():
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        book = json.loads(path.read_text())
        assert any("parameters" in c["metadata"].get("tags", []) for c in book["cells"]), path.name
        for cell in book["cells"]:
            if cell["cell_type"] == "code" and cell["outputs"]:
                assert "".join(cell["source"]).startswith("# NBVAL_CHECK_OUTPUT"), path.name


def test_the_rendered_copies_hide_the_tests_scaffolding():
    """What `make reproduce` does to each rendered notebook: no nbval check, no test-only line left."""
    import nbformat

    from dlrm_study.report.scaffolding import hide

    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        book = hide(nbformat.read(path, as_version=4))
        sources = "\n".join(cell.source for cell in book.cells)
        assert "NBVAL" not in sources and "well_formed" not in sources and "said = said" not in sources, path.name
        assert "session.in_short" in sources or "session.tally" in sources, path.name  # it ends with a summary
        facts = [c for c in book.cells if c.metadata.get("jupyter", {}).get("source_hidden")]
        assert all(c.outputs for c in facts), path.name  # a fact hidden keeps its output
