"""The records CSV: atomic appends under a lock, reading back, and the resume key that says "already measured".

`append` rewrites the CSV through a temporary file and `os.replace`, under a lock, so a run killed
midway leaves either the old file or the new one, never a half-written row, and a record with new
fields widens the header instead of breaking it. A write that fails (a full disk, a folder frozen or
gone) is a `Fault` that names the file and the cause, and leaves the file as it was. The resume key
(`resume_key`) is config hash, variant, machine, threads, the versions of the libraries that change
timing, the code (`provenance.today_code`: its loop's fingerprint, read through `code_identity.LOOP_LOCK`), the run
slot (which of a study's runs) and the repeat. A record of other code, or one written before records
carried a fingerprint, is never the measurement a run would make now: it is not reused, and it stays in
its file (nothing here deletes a record).

A record read back whose line is cut short, or that holds no number where one belongs (`NUMBERS`; timings,
`TIMINGS`, must be positive too), cannot be used (`problem`): `load` leaves it out, names its file and line
on stderr once, and counts it in the frame's `attrs[LEFT_OUT]` as the readers count what they leave out;
`stored_keys` does not count it as measured, so a resumed study measures its cell again; and appends keep
its line as it was found.
"""

import contextlib
import csv
import fcntl
import glob
import io
import math
import os
import sys
from collections import Counter
from pathlib import Path

import torch

from dlrm_study.config import Config
from dlrm_study.errors import Fault, UsageError
from dlrm_study.records import columns as col
from dlrm_study.records.code_identity import code_of_record
from dlrm_study.records.machine import is_legacy_key, machine_key
from dlrm_study.records.provenance import TIMING_VERSIONS, today_code, versions

# Columns read as text whatever they look like (a hash of digits only is not a number).
TEXT_COLUMNS = (
    col.CONFIG_HASH, col.SWEEP_POINT, col.GIT_COMMIT, col.VARIANT, col.MACHINE, col.POINT, col.FLAGS, col.ERROR,
    col.RUN_ID, col.RULES_HASH, col.CODE_FINGERPRINT, col.INVOCATION,
)  # fmt: skip
# Columns that hold a number where a record has them; timings must also be positive and finite.
TIMINGS = (col.MS_MEDIAN, col.MS_P10, col.MS_P90, col.SAMPLES_PER_S)
NUMBERS = (
    col.REPEAT, col.ORDER, col.RUN_SLOT, col.THREADS, col.BATCH_SIZE, col.STEPS, col.WARMUP, col.WORLD_SIZE, col.STEP,
    col.LOSS, col.EVAL_AUC, col.FINAL_LOSS, col.INPUT_MS_MEDIAN, col.COMPUTE_MS_MEDIAN, col.ROOFLINE_MS,
    *col.OP_COLUMNS, *TIMINGS,
)  # fmt: skip
LEFT_OUT = "left_out"  # frame.attrs[LEFT_OUT]: {(machine, reason): records}, as analysis.readers counts them
UNREADABLE = "unreadable (its line is cut short or holds no number where one belongs)"
SHOWN = 5  # unreadable lines named in the one line that says so
# Records files appended to by this process: one gone since vanished mid-run, and is not made again.
WRITTEN: set[str] = set()
# What `load` found unreadable, per file as it was (path, size, mtime): checked and said once.
CHECKED: dict[tuple[str, int, int], list[tuple[int, str, str]]] = {}


# The load guard's rows (`studies.guard`): one per run process, beside the records, not records themselves.
GUARD_ROWS = "guard/runs.csv"


def resume_key(
    config_hash: str,
    variant: str,
    machine: str,
    threads: object,
    repeat: object,
    versions: dict[str, object],
    code: object,
    slot: object,
) -> str:
    """What makes a stored record the measurement a run would make now: the same point, variant, machine,
    threads, library versions, code (`code_identity.code_of` its fingerprint; "" for a record older than
    fingerprints, which so matches no run), run slot and repeat."""
    stamp = ",".join(f"{key}={text(versions.get(key))}" for key in TIMING_VERSIONS)
    return f"{config_hash}|{variant}|{machine}|{text(threads)}t|{stamp}|{text(code)}|run{text(slot)}|{text(repeat)}"


def key_here(cfg: Config, variant: str, repeat: object = 0, threads: int | None = None, slot: int = 1) -> str:
    """The resume key a measurement of `cfg` would get on this machine, at this code, now."""
    return resume_key(cfg.hash(), variant, machine_key(), threads or cfg.train.threads or torch.get_num_threads(),
                      repeat, versions(), today_code(cfg.train.loop), slot)  # fmt: skip


def key_of(row: dict[str, object]) -> str:
    """The resume key of a stored record (a row of `read_rows`, or a record dict)."""
    return resume_key(
        text(row.get(col.CONFIG_HASH)), text(row.get(col.VARIANT)), text(row.get(col.MACHINE)), row.get(col.THREADS),
        row.get(col.REPEAT), row, code_of_record(row.get(col.TRAIN_LOOP), row.get(col.CODE_FINGERPRINT)),
        row.get(col.RUN_SLOT),
    )  # fmt: skip


def text(value: object) -> str:
    """A value as the CSV holds it: '' for None or NaN, integers without a trailing .0."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def stored_keys(path: Path, with_errors: bool = True, today: set[str] | None = None) -> set[str]:
    """Resume keys of the usable records in `path` (those that failed too, unless `with_errors` is False).
    `today`: the keys a run would make now; every record of a run that also holds a record of one of their cells
    made by other code or libraries is left out (see `mixed_runs`)."""
    header, rows = read_rows(Path(path))
    keyed = [(key_of(row), row) for row in rows if problem(row, len(header)) is None]
    mixed = mixed_runs(keyed, today) if today is not None else set()
    return {key for key, row in keyed if (with_errors or not row.get(col.ERROR)) and text(row.get(col.RUN_ID))
            not in mixed}  # fmt: skip


def cell(key: str) -> str:
    """What a resume key measures, less the code and libraries that measured it: point, variant, machine, threads,
    run slot and repeat (the parts `resume_key` joins, less its 5th and 6th: the library stamp and the code)."""
    parts = key.split("|")
    return "|".join(parts[:4] + parts[6:])


def mixed_runs(keyed: list[tuple[str, dict[str, object]]], today: set[str]) -> set[str]:
    """The runs (run ids) that hold a record a run would make now (its key is one of `today`) beside a record of
    the same cells made by other code or libraries (its cell is one of theirs, its key is not).

    Why: a ratio pairs records of one run. After a change to one loop's code (the optimized loop's kernels), such a
    run's records of the other loops (the reference) are still today's, but whatever paired them with the changed
    loop is history: reused, they would leave this code's half of each pair in a run of its own, paired with
    nothing. So a runner measures such a run's slot again whole (`runner.pending`). The keys a run would make name
    each task's own libraries (the 2020 stack's torch is its own by design, `studies.baseline`)."""
    cells = {cell(key) for key in today}
    stale: set[str] = set()
    current: set[str] = set()
    for key, row in keyed:  # each stored record's resume key beside it (`key_of`, computed once by the caller)
        if key in today:
            current.add(text(row.get(col.RUN_ID)))
        elif cell(key) in cells:
            stale.add(text(row.get(col.RUN_ID)))
    return stale & current


def append(path: Path, record: dict[str, object]) -> None:
    """Append one record to the CSV at `path` atomically (see the module docstring)."""
    append_many(path, [record])


def append_many(path: Path, records: list[dict[str, object]]) -> None:
    """Append records together: after a crash, all of them are in the file or none; a write fault is a `Fault`."""
    path = Path(path)
    where = os.path.abspath(path)
    if where in WRITTEN and not path.exists():
        gone = "with its folder" if not path.parent.exists() else "from its folder"
        raise Fault(f"{path} vanished {gone} during this run: not made again (it would hold this run's later records "
                    "only)")  # fmt: skip
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_name(path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            rewrite(path, records)
    except OSError as err:
        kept = "its records are as they were" if path.exists() else "nothing was written"
        raise Fault(f"cannot write {path}: {err.strerror or err}; {kept}") from None
    except (UnicodeDecodeError, csv.Error) as err:
        raise UsageError(f"{path}: not a records CSV that can be rewritten ({err}); not touched") from None
    WRITTEN.add(where)


def rewrite(path: Path, records: list[dict[str, object]]) -> None:
    """The file with `records` appended, through a temporary file (under the lock); rows kept as found."""
    for stale in glob.glob(glob.escape(str(path.with_name(f".{path.name}."))) + "*.tmp"):
        os.unlink(stale)  # left by a writer killed mid-write: a live one holds the lock while its file exists
    header, rows = raw_rows(path)
    width = len(header)
    for record in records:
        header += [key for key in record if key not in header]
    # A whole row widens with the header; a row cut short stays as it is, to be seen as such when read.
    kept = [row + [""] * (len(header) - width) if len(row) == width else row for row in rows]
    added = [["" if record.get(key) is None else record[key] for key in header] for record in records]
    write_rows(path, header, kept + added)


def write_rows(path: Path, header: list[str], rows: list[list[object]]) -> None:
    """The file made anew from `header` and `rows`, through a temporary file: all of it or none."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerow(header)
            writer.writerows(rows)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)  # a write that failed or was interrupted leaves nothing behind


def relabel(path: Path, column: str, kept_as: str, new: dict[str, str]) -> Counter:
    """Each whole row measured under a key of `new` (its `kept_as` where set, else its `column`) gets that key's
    value in `column`, the value it was measured under kept in `kept_as` (a column added last where missing),
    under the file's lock, all rows or none: how many changed, by the value measured under."""
    done: Counter = Counter()
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        header, rows = raw_rows(path)
        if column not in header:
            return done
        if kept_as not in header:
            rows = [[*row, ""] if len(row) == len(header) else row for row in rows]
            header = [*header, kept_as]
        at, kept = header.index(column), header.index(kept_as)
        for row in rows:
            if len(row) != len(header):
                continue  # a line cut short stays as found
            measured = row[kept] or row[at]
            if measured in new and row[at] != new[measured]:
                done[measured] += 1
                row[kept], row[at] = measured, new[measured]
        if done:
            write_rows(path, header, rows)
    return done


def raw_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a records CSV as lists of fields, as found (blank lines dropped)."""
    if not path.exists():
        return [], []
    with open(path, newline="", encoding="utf-8") as f:
        found = [row for row in csv.reader(f) if row]
    return (found[0], found[1:]) if found else ([], [])


def read_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """Header and rows of a records CSV; empty when it does not exist yet. Rows as found (see `problem`)."""
    if not path.exists():
        return [], []
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def problem(row: dict, fields: int) -> str | None:
    """Why a row of `read_rows` (of a header of `fields` columns) cannot be used as a record; None if it can."""
    if None in row:  # csv.DictReader's key for fields past the header's
        return f"{fields + len(row[None])} fields where the header has {fields}"
    missing = sum(value is None for value in row.values())
    if missing:
        return f"cut short: {fields - missing} of {fields} fields"
    for column in NUMBERS:
        value = row.get(column)
        if not value:
            continue
        try:
            number = float(value)
        except ValueError:
            return f"{column} {value!r} is not a number"
        if column in TIMINGS and not (math.isfinite(number) and number > 0):
            return f"{column} {value!r} is not a positive number"
    return None


def unreadable(path: Path) -> list[tuple[int, str, str]]:
    """(line, machine, why) of each record of `path` that cannot be used; said on stderr once per file content."""
    stat = path.stat()
    identity = (os.path.abspath(path), stat.st_size, stat.st_mtime_ns)
    if identity not in CHECKED:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            fields = len(reader.fieldnames or [])
            found = []
            for row in reader:
                why = problem(row, fields)
                if why:
                    found.append((reader.line_num, machine_of(row, reader.fieldnames or []), why))
        CHECKED[identity] = found
        if found:
            named = "; ".join(f"line {line}: {why}" for line, _, why in found[:SHOWN])
            more = f"; {len(found) - SHOWN} more" if len(found) > SHOWN else ""
            print(f"dlrm-study: {path}: {len(found)} record(s) left out, {UNREADABLE}: {named}{more}", file=sys.stderr)
    return CHECKED[identity]


def machine_of(row: dict, header: list[str]) -> str:
    """The machine key of an unusable row, where its line holds it whole (a field after it is there too)."""
    if col.MACHINE not in header or row.get(col.MACHINE) is None:
        return ""
    after = header[header.index(col.MACHINE) + 1 :]
    return row[col.MACHINE] if None in row or any(row.get(h) is not None for h in after) else ""


def load(path: Path):  # -> pandas.DataFrame (pandas imported only when records are read)
    """All usable records of a CSV as a pandas DataFrame, as stored: nothing is filled in when read.

    Unusable records are left out, said and counted (see the module docstring). A record's machine key is
    written when it is measured; records written before keys of today's form existed were given theirs once,
    in the files, by `scripts/migrate_records.py`. A file that still holds such records is refused (one line
    naming the script), not completed here.
    """
    import pandas as pd

    path = Path(path)
    try:
        left_out = unreadable(path)
    except (UnicodeDecodeError, csv.Error) as err:
        raise UsageError(f"{path}: not a records CSV ({err})") from None
    if path.stat().st_size == 0:
        return pd.DataFrame()
    frame = pd.read_csv(usable(path, left_out), low_memory=False, dtype=dict.fromkeys(TEXT_COLUMNS, str))
    if left_out:
        counts: dict[tuple[str, str], int] = {}
        for _, machine, _ in left_out:
            counts[(machine, UNREADABLE)] = counts.get((machine, UNREADABLE), 0) + 1
        frame.attrs[LEFT_OUT] = counts
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


def usable(path: Path, left_out: list[tuple[int, str, str]]) -> Path | io.StringIO:
    """The file, or where it holds unusable records, its text without them."""
    if not left_out:
        return path
    skip = {line for line, _, _ in left_out}
    text = io.StringIO()
    writer = csv.writer(text)
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        for row in reader:
            if row and reader.line_num not in skip:
                writer.writerow(row)
    text.seek(0)
    return text
