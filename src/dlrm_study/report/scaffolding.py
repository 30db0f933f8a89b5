"""Hide the tests' scaffolding from rendered notebooks (`make render` runs it on results/notebooks/).

    python -m dlrm_study.report.scaffolding results/notebooks/*.ipynb

The source notebooks keep the cells nbval checks; a reader of the rendered copy sees none of
that: cells tagged `remove-cell` (checks that the findings are well formed) are dropped, cells
tagged `remove-input` (fixed facts) keep their output without their code, and what a cell wrote to
stderr (progress lines while measuring, library warnings) is left to the console it was shown on.
nbconvert's TagRemovePreprocessor removes inputs only in its HTML/Markdown templates, not in a
notebook, hence this module.
"""

import sys

import nbformat

REMOVE_CELL, REMOVE_INPUT = "remove-cell", "remove-input"


def hide(book: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook without its `remove-cell` cells, its stderr, and the code of `remove-input` cells."""
    book.cells = [cell for cell in book.cells if REMOVE_CELL not in cell.metadata.get("tags", [])]
    for cell in book.cells:
        if REMOVE_INPUT in cell.metadata.get("tags", []):
            cell.source = ""
            cell.metadata.setdefault("jupyter", {})["source_hidden"] = True
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if not (o.output_type == "stream" and o.name == "stderr")]
    return book


if __name__ == "__main__":
    for name in sys.argv[1:]:
        nbformat.write(hide(nbformat.read(name, as_version=4)), name)
        print(f"hid the scaffolding of {name}")
