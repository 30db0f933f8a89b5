"""The notebooks run under papermill with injected parameters (nbval runs them all in `make test`)."""

import json

import papermill
from tests.conftest import ROOT

NOTEBOOKS = ROOT / "notebooks"


def test_papermill_injects_parameters_and_the_figure_is_saved(tmp_path):
    output = tmp_path / "out.ipynb"
    papermill.execute_notebook(
        str(NOTEBOOKS / "01_cpu_reference_breakdown.ipynb"),
        str(output),
        parameters={"profile": "smoke", "results_dir": str(tmp_path / "res")},
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
    assert "this run measured 8 record(s) and reused 0" in printed  # the provenance cell counts them
    assert "tiny: embedding forward + backward/update take" in printed or "tiny: no finding: every repeat" in printed
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
