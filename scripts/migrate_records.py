"""Give every stored record a machine key of today's form, once, from the record's own fields.

    python scripts/migrate_records.py results/*.csv

Records written before the machine key carried the CPU's logical count and dropped the threads
(`cpu/isa/2t` -> `cpu/isa/2cpu`), or before it existed at all (`cpu/isa-unrecorded/2cpu`), get
the key `records.Machine.from_legacy_row` gives them; a loss row without provenance takes the key
of the run it belongs to (`env_key`).

Records written before run ids get `legacy-<file>-<n>`: a run is a block of consecutive rows
(rows are appended in the order they were measured) written by one commit and one command for one
study. Those runs measured one point after another, so they pair variants of a point within a
repeat, never knob values (`stats.paired_ratios`). Nothing else in a row changes; a file with
nothing to migrate is left untouched. Idempotent: a second run changes nothing.
"""

import csv
import os
import sys
from pathlib import Path

from dlrm_study.analysis.stats import LEGACY
from dlrm_study.records import Machine, store
from dlrm_study.records import columns as col
from dlrm_study.records.machine import is_legacy_key


def migrate(path: Path) -> int:
    """Rewrite `path`'s machine column where it is not of today's form; the number of rows changed."""
    header, rows = store.read_rows(path)
    if col.STUDY not in header:
        return 0
    before = [dict(row) for row in rows]
    by_run = {r["env_key"]: r[col.MACHINE] for r in rows if r.get("env_key") and r.get(col.MACHINE)}
    legacy_runs(path, rows)
    for row in rows:
        old = row.get(col.MACHINE, "")
        if not old and row.get("env_key") in by_run:
            old = row[col.MACHINE] = by_run[row["env_key"]]
        if not is_legacy_key(old):
            continue
        source = row if old or row.get(col.CPU_MODEL) else {**row, **first_with_provenance(rows, row)}
        row[col.MACHINE] = Machine.from_legacy_row(source).key
    changed = sum(old != new for old, new in zip(before, rows, strict=True))
    if changed:
        header += [c for c in (col.MACHINE, col.RUN_ID) if c not in header]
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=header)
            writer.writeheader()
            writer.writerows(rows)
        os.replace(tmp, path)
    return changed


def legacy_runs(path: Path, rows: list[dict[str, str]]) -> None:
    """Give rows without a run id the id of their block (see the module docstring)."""
    block, last = 0, None
    for row in rows:
        if row.get(col.RUN_ID):
            last = None
            continue
        key = (row.get(col.STUDY), row.get(col.GIT_COMMIT), row.get("command"))
        if key != last:
            block, last = block + 1, key
        row[col.RUN_ID] = f"{LEGACY}{path.stem}-{block}"


def first_with_provenance(rows: list[dict[str, str]], row: dict[str, str]) -> dict[str, str]:
    """The provenance of the first row of the same run (`env_key`) that has it, else nothing."""
    for other in rows:
        if other.get("env_key") == row.get("env_key") and other.get(col.CPU_MODEL):
            return {k: other[k] for k in (col.CPU_MODEL, col.CPU_COUNT, col.GPU_MODEL) if k in other}
    return {}


def main(paths: list[str]) -> int:
    for name in paths:
        print(f"{name}: {migrate(Path(name))} row(s) given a machine key or run id of today's form")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
