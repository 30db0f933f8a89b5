"""The records CSV: atomic appends under a lock, reading back, and the resume key that says "already measured".

`append` rewrites the CSV through a temporary file and `os.replace`, under a lock, so a run killed
midway leaves either the old file or the new one, never a half-written row, and a record with new
fields widens the header instead of breaking it. The resume key (`resume_key`) is config hash,
variant, machine, threads, the versions of the libraries that change timing, and the repeat.
"""

import csv
import fcntl
import os
from pathlib import Path

import torch

from dlrm_study.config import Config
from dlrm_study.errors import UsageError
from dlrm_study.records import columns as col
from dlrm_study.records.machine import is_legacy_key, machine_key
from dlrm_study.records.provenance import TIMING_VERSIONS, versions

# Columns read as text whatever they look like (a hash of digits only is not a number).
TEXT_COLUMNS = (
    col.CONFIG_HASH, col.SWEEP_POINT, col.GIT_COMMIT, col.VARIANT, col.MACHINE, col.POINT, col.FLAGS, col.ERROR,
    col.RUN_ID, col.RULES_HASH,
)  # fmt: skip


def resume_key(
    config_hash: str, variant: str, machine: str, threads: object, repeat: object, versions: dict[str, object]
) -> str:
    """What makes a stored record the measurement a run would make now."""
    stamp = ",".join(f"{key}={text(versions.get(key))}" for key in TIMING_VERSIONS)
    return f"{config_hash}|{variant}|{machine}|{text(threads)}t|{stamp}|{text(repeat)}"


def key_here(cfg: Config, variant: str, repeat: object = 0, threads: int | None = None) -> str:
    """The resume key a measurement of `cfg` would get on this machine now."""
    return resume_key(cfg.hash(), variant, machine_key(), threads or cfg.train.threads or torch.get_num_threads(),
                      repeat, versions())  # fmt: skip


def key_of(row: dict[str, object]) -> str:
    """The resume key of a stored record (a row of `read_rows`, or a record dict)."""
    return resume_key(
        text(row.get(col.CONFIG_HASH)), text(row.get(col.VARIANT)), text(row.get(col.MACHINE)), row.get(col.THREADS),
        row.get(col.REPEAT), row,
    )  # fmt: skip


def text(value: object) -> str:
    """A value as the CSV holds it: '' for None or NaN, integers without a trailing .0."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def stored_keys(path: Path, with_errors: bool = True) -> set[str]:
    """Resume keys of the records in `path` (those that failed too, unless `with_errors` is False)."""
    return {key_of(row) for row in read_rows(Path(path))[1] if with_errors or not row.get(col.ERROR)}


def append(path: Path, record: dict[str, object]) -> None:
    """Append one record to the CSV at `path` atomically (see the module docstring)."""
    append_many(path, [record])


def append_many(path: Path, records: list[dict[str, object]]) -> None:
    """Append records together: after a crash, all of them are in the file or none."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        header, rows = read_rows(path)
        for record in records:
            header += [key for key in record if key not in header]
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=header)
            writer.writeheader()
            writer.writerows(rows)
            for record in records:
                writer.writerow({key: "" if value is None else value for key, value in record.items()})
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)


def read_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """Header and rows of a records CSV; empty when it does not exist yet."""
    if not path.exists():
        return [], []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def load(path: Path):  # -> pandas.DataFrame (pandas imported only when records are read)
    """All records of a CSV as a pandas DataFrame, as stored: nothing is filled in when read.

    A record's machine key is written when it is measured; records written before keys of today's
    form existed were given theirs once, in the files, by `scripts/migrate_records.py`. A file that
    still holds such records is refused (one line naming the script), not completed here.
    """
    import pandas as pd

    frame = pd.read_csv(path, low_memory=False, dtype=dict.fromkeys(TEXT_COLUMNS, str))
    if frame.empty or col.STUDY not in frame:
        return frame
    keys = frame[col.MACHINE] if col.MACHINE in frame else pd.Series(pd.NA, index=frame.index)
    if keys.map(is_legacy_key).any():
        raise UsageError(
            f"{path}: records without a machine key of today's form: run scripts/migrate_records.py {path}"
        )
    rounds = frame.get("round", 0)  # `dlrm-study compare` called its repeats rounds
    frame[col.REPEAT] = frame[col.REPEAT].fillna(rounds) if col.REPEAT in frame else rounds
    frame[col.RUN_ID] = frame[col.RUN_ID].fillna("") if col.RUN_ID in frame else ""
    return frame
