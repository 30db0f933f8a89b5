"""Hide the tests' scaffolding from rendered notebooks (`make reproduce` runs it on results/notebooks/).

    python scripts/hide_scaffolding.py results/notebooks/*.ipynb

The source notebooks keep the cells nbval checks; a reader of the rendered copy sees none of
that: cells tagged `remove-cell` (checks that the findings are well formed) are dropped, and
cells tagged `remove-input` (fixed facts) keep their output without their code. nbconvert's
TagRemovePreprocessor removes inputs only in its HTML/Markdown templates, not in a notebook,
hence this script.
"""

import sys

import nbformat

REMOVE_CELL, REMOVE_INPUT = "remove-cell", "remove-input"


def hide(book: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook without its `remove-cell` cells and with the code of `remove-input` cells hidden."""
    book.cells = [cell for cell in book.cells if REMOVE_CELL not in cell.metadata.get("tags", [])]
    for cell in book.cells:
        if REMOVE_INPUT in cell.metadata.get("tags", []):
            cell.source = ""
            cell.metadata.setdefault("jupyter", {})["source_hidden"] = True
    return book


if __name__ == "__main__":
    for name in sys.argv[1:]:
        nbformat.write(hide(nbformat.read(name, as_version=4)), name)
        print(f"hid the scaffolding of {name}")
