"""Give every stored record a machine key of today's form, once, from the record's own fields.

    python scripts/migrate_records.py results/*.csv

Records written before the machine key carried the CPU's logical count and dropped the threads
(`cpu/isa/2t` -> `cpu/isa/2cpu`), or before it existed at all (`cpu/isa-unrecorded/2cpu`), get
the key `records.Machine.from_legacy_row` gives them; a loss row without provenance takes the key
of the run it belongs to (`env_key`). Nothing else in a row changes; a file with nothing to
migrate is left untouched. Idempotent: a second run changes nothing.
"""

import csv
import os
import sys
from pathlib import Path

from dlrm_study import results
from dlrm_study.records import Machine


def migrate(path: Path) -> int:
    """Rewrite `path`'s machine column where it is not of today's form; the number of rows changed."""
    header, rows = results.read_rows(path)
    if "study" not in header:
        return 0
    by_run = {r["env_key"]: r["machine"] for r in rows if r.get("env_key") and r.get("machine")}
    changed = 0
    for row in rows:
        old = row.get("machine", "")
        if not old and row.get("env_key") in by_run:
            old = row["machine"] = by_run[row["env_key"]]
        if not results.is_legacy_key(old):
            continue
        source = row if old or row.get("cpu_model") else {**row, **first_with_provenance(rows, row)}
        row["machine"] = Machine.from_legacy_row(source).key
        changed += 1
    if changed:
        header += [] if "machine" in header else ["machine"]
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=header)
            writer.writeheader()
            writer.writerows(rows)
        os.replace(tmp, path)
    return changed


def first_with_provenance(rows: list[dict[str, str]], row: dict[str, str]) -> dict[str, str]:
    """The provenance of the first row of the same run (`env_key`) that has it, else nothing."""
    for other in rows:
        if other.get("env_key") == row.get("env_key") and other.get("cpu_model"):
            return {k: other[k] for k in ("cpu_model", "cpu_count", "gpu_model") if k in other}
    return {}


def main(paths: list[str]) -> int:
    for name in paths:
        print(f"{name}: {migrate(Path(name))} row(s) given today's machine key")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
