"""Add the records of a GPU session (or any other results folder) to the study's own.

    python scripts/merge_records.py results/gpu-run [results]

Every `*.csv` in the source folder is appended to the file of the same name in the destination
(created where missing; new columns are added to its header), skipping the rows it already
holds (the same values in every filled column), so running it twice adds nothing. The rows are checked
first (`records.store.load`: machine keys of today's form); a bad folder or file changes nothing.
"""

import sys
from pathlib import Path

from dlrm_study.errors import UsageError
from dlrm_study.records import store


def merge(source: Path, destination: Path) -> dict[str, int]:
    """Rows added to each file of `destination` from the same-named file of `source`."""
    if not source.is_dir():
        raise UsageError(f"{source} is not a folder of records")
    files = sorted(source.glob("*.csv"))
    if not files:
        raise UsageError(f"{source} holds no records (*.csv)")
    for path in files:
        store.load(path)  # refuses rows a reader would refuse, before anything is written
    added = {}
    for path in files:
        target = destination / path.name
        held = {identity(row) for row in store.read_rows(target)[1]}
        new = [row for row in store.read_rows(path)[1] if identity(row) not in held]
        if new:
            store.append_many(target, new)
        added[path.name] = len(new)
    return added


def identity(row: dict[str, str]) -> frozenset[tuple[str, str]]:
    """A row by its filled columns: the same record has the same values, whatever its file's header."""
    return frozenset((key, value) for key, value in row.items() if value not in ("", None))


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: python scripts/merge_records.py SOURCE_DIR [DESTINATION_DIR]", file=sys.stderr)
        return 2
    source, destination = Path(argv[0]), Path(argv[1] if len(argv) == 2 else "results")
    try:
        added = merge(source, destination)
    except UsageError as err:
        print(f"merge_records: {err}", file=sys.stderr)
        return 2
    for name, count in added.items():
        print(f"{destination / name}: {count} record(s) added")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
