"""Keep source notebooks free of outputs, except the facts nbval checks.

    python scripts/notebook_outputs.py notebooks/*.ipynb

Executes each notebook in the smoke profile, then keeps only the outputs of cells marked
`# NBVAL_CHECK_OUTPUT` (deterministic facts nbval compares on every run) and clears the
rest — figures and measurements belong in the rendered copies under results/notebooks/.
"""

import os
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

CHECK = "# NBVAL_CHECK_OUTPUT"


def refresh(path: Path) -> None:
    book = nbformat.read(path, as_version=4)
    os.environ["DLRM_STUDY_PROFILE"] = "smoke"
    NotebookClient(
        book, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    for cell in book.cells:
        if cell.cell_type != "code":
            continue
        cell.metadata.pop("execution", None)
        if not cell.source.startswith(CHECK):  # nbval wants the checked cells to look run
            cell.outputs = []
            cell.execution_count = None
    nbformat.write(book, path)
    print(f"refreshed {path}")


if __name__ == "__main__":
    for name in sys.argv[1:]:
        refresh(Path(name))
