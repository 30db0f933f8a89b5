"""The published study is one render of this tree: what `make render` would write from the committed
records is what is committed (every printed number and word, not pixels), and the README says each
finding as the notebook that draws it says it."""

import copy
import json
import re
from pathlib import Path

import nbformat
import pytest
from PIL import Image
from tests.conftest import ROOT

from dlrm_study.report import gallery, ledger, manifest, render

RESULTS = ROOT / "results"
RENDERED = RESULTS / "notebooks"


def test_the_manifest_names_this_tree_and_every_published_artifact():
    assert manifest.problems(RESULTS, ROOT) == []


def test_the_committed_notebooks_are_what_this_tree_renders(tmp_path):
    """Every notebook executed again from the committed records (minutes), compared with the committed copy.
    The check's other parts have their own tests: the manifest's above, the README's generated section in
    tests/test_readme.py, the results page in tests/test_results_page.py (each computes the ledger: once is
    enough); `test_the_check_reports_each_of_its_parts` shows the check is made of the four."""
    fresh = render.execute(tmp_path, "quick", publish=False, repo=ROOT)
    assert render.notebook_problems(RENDERED, fresh, ROOT) == []


def edited_markdown(book: nbformat.NotebookNode) -> str | None:
    """The id of the first Markdown cell that holds a number, its first digit changed ("110x" -> "210x"); None
    where no Markdown cell holds one."""
    for cell in book.cells:
        digit = re.search(r"\d", cell.source) if cell.cell_type == "markdown" else None
        if digit:
            cell.source = cell.source[: digit.start()] + str((int(digit.group()) + 1) % 10) + cell.source[digit.end() :]
            return cell.id
    return None


def test_a_number_edited_in_a_markdown_cell_is_caught():
    edited_any = False
    for path in sorted(RENDERED.glob("*.ipynb")):
        committed = nbformat.read(path, as_version=4)
        edited = copy.deepcopy(committed)
        cid = edited_markdown(edited)
        if cid is None:
            continue
        found = render.differences(committed, edited, path.name)
        assert len(found) == 1 and f"cell {cid} (markdown), line " in found[0], (path.name, found)
        edited_any = True
    assert edited_any, "no rendered notebook has a number in its Markdown: the test proves nothing"


def copies(folder: Path, skip: str = "", edit: str = "") -> list[Path]:
    """The committed notebooks as a render would give them, into `folder`: one of them skipped, or one with a
    number of its Markdown edited."""
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for path in render.notebooks(ROOT):
        if path.name == skip:
            continue
        book = nbformat.read(RENDERED / path.name, as_version=4)
        if path.name == edit:
            assert edited_markdown(book), f"{edit} has no number in its Markdown"
        nbformat.write(book, folder / path.name)
        made.append(folder / path.name)
    return made


@pytest.fixture
def check_parts(monkeypatch):
    """render.check with each of its parts answered by a stand-in, the notebooks' render by `copies`."""
    monkeypatch.setattr(render.manifest, "problems", lambda results, repo: ["the manifest's problem"])
    monkeypatch.setattr(render, "readme_problems", lambda readme, results, profile: ["the README's problem"])
    monkeypatch.setattr(render.results_page, "problems", lambda repo, profile: ["the results page's problem"])
    wanted = {}
    monkeypatch.setattr(render, "execute", lambda folder, *args, **kwargs: copies(folder, **wanted))
    return wanted


PARTS = ["results/manifest.json: the manifest's problem", "the README's problem", "the results page's problem"]


def test_the_check_reports_each_of_its_parts(check_parts, tmp_path):
    assert render.check("quick", ROOT, tmp_path) == PARTS  # the committed notebooks, unchanged: no notebook problem


def summary() -> str:
    return render.notebooks(ROOT)[-1].name


def test_a_notebook_the_render_skipped_fails_the_check(check_parts, tmp_path):
    """Skipping the summary (00, rendered last) left the check with nothing to compare it with: it passed."""
    check_parts["skip"] = summary()
    assert render.check("quick", ROOT, tmp_path) == [*PARTS, f"{summary()}: not rendered now (the render skipped it)"]


def test_a_markdown_cell_that_differs_from_the_render_fails_the_check(check_parts, tmp_path):
    check_parts["edit"] = summary()
    found = render.check("quick", ROOT, tmp_path)
    assert found[: len(PARTS)] == PARTS and len(found) == len(PARTS) + 1, found
    assert found[-1].startswith(f"{summary()}: cell ") and "(markdown), line " in found[-1], found


def test_the_render_runs_every_notebook_the_summary_last():
    names = [path.name for path in render.notebooks(ROOT)]
    every = sorted(path.name for path in (ROOT / "notebooks").glob("*.ipynb"))
    assert sorted(names) == every and names[-1].startswith("00_") and names[:-1] == sorted(names[:-1])
    assert sorted(path.name for path in RENDERED.glob("*.ipynb")) == every  # and each has its committed render


def findings_output(notebook: str) -> str:
    book = nbformat.read(RENDERED / f"{notebook}.ipynb", as_version=4)
    cells = [c for c in book.cells if "findings" in c.metadata.get("tags", [])]
    return "\n".join(render.printed(nbformat.from_dict({**book, "cells": cells})).values())


def readme_findings() -> dict[str, list[str]]:
    """The gallery's findings per figure, as the README prints them."""
    readme = (ROOT / "README.md").read_text()
    found = {}
    for figure, (_, what) in gallery.FIGURES.items():
        row = next(line for line in readme.splitlines() if line.startswith("| ") and f"*{what}*" in line)
        cell = row.split(" | ")[1]
        found[figure] = [line for line in cell.split("<br>") if line != f"*{what}*"]
    return found


def test_the_readme_prints_each_finding_as_its_notebook_does():
    found = readme_findings()
    assert sum(len(lines) for lines in found.values()), "the README's gallery prints no finding: nothing to check"
    for figure, lines in found.items():
        notebook = gallery.FIGURES[figure][0]
        printed = findings_output(notebook)
        for line in lines:
            assert line.replace("**", "") in printed, f"{figure}: README says {line!r}, notebook {notebook} does not"


def test_a_number_edited_by_hand_is_caught():
    committed = nbformat.read(RENDERED / "02_cpu_optimizations.ipynb", as_version=4)
    edited = copy.deepcopy(committed)
    cell = next(c for c in edited.cells if "findings" in c.metadata.get("tags", []) and c.outputs)
    stream = next(o for o in cell.outputs if o.output_type == "stream")
    digit = re.search(r"\d", stream.text)
    assert digit, "a findings cell with no number"
    stream.text = stream.text[: digit.start()] + str((int(digit.group()) + 1) % 10) + stream.text[digit.end() :]
    found = render.differences(committed, edited, "02")
    assert len(found) == 1 and cell.id in found[0], found
    readme = (ROOT / "README.md").read_text()
    fresh = ledger.readme_section(RESULTS, "quick")  # (the ledger computed once: it takes a while)
    assert render.readme_problems(readme, RESULTS, fresh=fresh) == []
    at = re.search(r"\d+\.\d+x", readme[readme.index(ledger.MARK_BEGIN) :])
    at_start = readme.index(ledger.MARK_BEGIN) + at.start()
    tampered = readme[:at_start] + str((int(readme[at_start]) + 1) % 10) + readme[at_start + 1 :]
    assert render.readme_problems(tampered, RESULTS, fresh=fresh), "an edited ratio in the README passed the check"


def test_an_artifact_edited_or_left_behind_is_caught(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "figures").mkdir()
    doc = json.loads((RESULTS / manifest.MANIFEST).read_text())
    some = next(name for name in doc["artifacts"] if name.endswith(".ipynb"))
    (tmp_path / some).write_bytes((RESULTS / some).read_bytes())
    (tmp_path / manifest.MANIFEST).write_text(json.dumps({**doc, "artifacts": {some: doc["artifacts"][some]}}))
    for name in ("notebooks", "figures"):  # the records' digest and the code match only the real folder
        assert not [p for p in manifest.problems(tmp_path, ROOT) if p.startswith(name)]
    (tmp_path / some).write_bytes((RESULTS / some).read_bytes() + b" ")
    (tmp_path / "figures" / "01_old.png").write_bytes(b"png")
    found = manifest.problems(tmp_path, ROOT)
    assert f"{some}: changed since the render" in found
    assert "figures/01_old.png: published but not rendered (no code writes it)" in found


def test_every_figure_on_the_readme_comes_from_the_committed_render():
    doc = json.loads((RESULTS / manifest.MANIFEST).read_text())
    readme = (ROOT / "README.md").read_text()
    shown = re.findall(r"\]\((results/figures/[^)]+\.png)\)", readme)
    assert shown, "the README shows no figure"
    for path in shown:
        name = path.removeprefix("results/")
        assert name in doc["artifacts"], f"{path} is not of the committed render"
        said = Image.open(ROOT / path).info.get("Description", "")
        assert doc["commit"] in said and doc["records"] in said and doc["rules"] in said, path


@pytest.mark.parametrize("notebook", sorted(p.stem for p in RENDERED.glob("*.ipynb")))
def test_a_rendered_notebook_states_its_render(notebook):
    doc = json.loads((RESULTS / manifest.MANIFEST).read_text())
    book = nbformat.read(RENDERED / f"{notebook}.ipynb", as_version=4)
    said = "".join(o.get("text", "") for c in book.cells if c.cell_type == "code" for o in c.outputs)
    assert f"rendered from records {doc['records']} under rules {doc['rules']}" in said
    assert doc["commit"] in said


def test_papermills_injected_cell_has_the_same_id_in_every_render():
    """papermill gives the cell it injects a random id per run: two renders of one tree must still match."""
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("y = 2")])
    book.cells[1].metadata["tags"] = [render.INJECTED]
    first = book.cells[0].id
    assert render.steady(book).cells[1].id == render.INJECTED and book.cells[0].id == first


def test_a_rendered_notebook_names_no_folder_of_the_machine_that_rendered_it(tmp_path):
    """papermill stores the absolute paths it ran with: the render gives them from the repository."""
    book = nbformat.v4.new_notebook()
    book.metadata["papermill"] = {"input_path": str(ROOT / "notebooks" / "07.ipynb"),
                                  "output_path": str(tmp_path / "07.ipynb")}  # fmt: skip
    run = render.steady(book, ROOT).metadata["papermill"]
    assert run == {"input_path": "notebooks/07.ipynb", "output_path": "07.ipynb"}
    for rendered in RENDERED.glob("*.ipynb"):  # the committed render too
        paths = json.loads(rendered.read_text())["metadata"].get("papermill", {})
        assert not any(str(paths.get(k, "")).startswith("/") for k in ("input_path", "output_path")), rendered.name
