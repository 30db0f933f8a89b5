"""Output paths checked before any work starts, so a run is never lost to where its output goes.

A record or checkpoint is written at the end of a run; a folder, a missing parent that cannot
be made, or a file that is not a records CSV would only fail then, after the training.
"""

import csv
import os
import tempfile
from pathlib import Path

from dlrm_study.errors import UsageError
from dlrm_study.records import columns as col

# Every record names its study (records.record.make_record); a CSV without that column is not ours to rewrite.
RECORD_COLUMN = col.STUDY


def check_writable(path: Path, flag: str) -> None:
    """Refuse `path` unless a file can be written there (its parent folders made as needed)."""
    if path.is_dir():
        raise UsageError(f"{flag} {path} is a folder, not a file")
    if path.exists() and not path.is_file():  # a device or a pipe: read, it may never end; replaced, it is lost
        raise UsageError(f"{flag} {path} is not a regular file (a device, a pipe or a socket): not touched")
    existing = path.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{flag} {path}: {existing} is not a folder")
    if path.exists() and not os.access(path, os.W_OK):
        raise UsageError(f"{flag} {path}: not writable")
    try:  # not access(): it says yes to root anywhere (/proc, /sys); a file made and gone at once is proof
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as err:
        raise UsageError(f"{flag} {path}: no file can be made in {existing} ({err.strerror})") from None


def check_records_file(path: Path, flag: str = "--out") -> None:
    """Refuse a records path that cannot be written, or an existing file that is not a records CSV."""
    check_writable(path, flag)
    if not path.exists() or path.stat().st_size == 0:
        return
    try:
        with open(path, newline="", encoding="utf-8") as f:
            header = next(csv.reader(f), [])
    except (UnicodeDecodeError, csv.Error):
        header = []
    if RECORD_COLUMN not in header:
        raise UsageError(f"{flag} {path} exists and is not a records CSV (no {RECORD_COLUMN!r} column): not touched")
