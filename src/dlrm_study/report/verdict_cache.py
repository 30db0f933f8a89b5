"""Judged records kept between processes: the evidence and its verdicts, judged once per records, rules and code.

Why: judging the committed records takes 20-40 s on 2 cores, and a render judges them in each notebook's kernel
(eight processes), then again for the README and the results page; the tests and nbval do the same. The verdicts
are a function of the records, the rules and the package's code alone (nothing in analysis/ or claims/ reads the
clock, git or the environment), so a process may take them from one that judged the same inputs.

The key (`key`) is a digest of every input: the results folder, the profile, the records' digest, the rules' id,
a digest of every source file of the package, and the Python, pandas and numpy versions (a pickle's reader). A
change to any of them is another key, so nothing kept is older than what it was judged from. One file a key
(`path`), written whole or not at all; one that does not read is removed and judged again. The folder is
`DLRM_STUDY_VERDICT_CACHE` (`off`: none), else `~/.cache/dlrm-study/verdicts/`; the newest KEPT files stay.
"""

import functools
import hashlib
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path

import numpy
import pandas

from dlrm_study import settings

PACKAGE = Path(__file__).resolve().parents[1]
SOURCES = (".py", ".cpp", ".h", ".cu", ".toml", ".json", ".lock")  # what the package's behaviour is made of
KEPT = 8  # files kept: a render's quick and the tests' smoke, with room for a few scratch folders
LEFT_S = 600  # a partial file this old was left by a killed writer (writing one takes under a second)


def folder() -> Path | None:
    """Where judged records are kept, None where keeping is switched off."""
    return settings.cache_path(settings.current().verdict_cache, "verdicts")


@functools.cache
def code_digest() -> str:
    """A digest of every source file of the package, by path and bytes (once per process)."""
    hasher = hashlib.sha256()
    for path in sorted(p for p in PACKAGE.rglob("*") if p.suffix in SOURCES and "__pycache__" not in p.parts):
        hasher.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return hasher.hexdigest()


def key(out: str, profile: str, records: str, rules: str) -> str:
    """The digest naming one judgement's inputs: these and the code and libraries that judge them."""
    versions = f"python {sys.version_info[:3]} pandas {pandas.__version__} numpy {numpy.__version__}"
    return hashlib.sha256("\0".join([out, profile, records, rules, code_digest(), versions]).encode()).hexdigest()[:24]


def path(name: str) -> Path | None:
    where = folder()
    return None if where is None else where / f"{name}.pickle"


def load(name: str) -> object | None:
    """What `store` kept under `name`; None where nothing is, or the file does not read (it is removed)."""
    found = path(name)
    if found is None or not found.is_file():
        return None
    try:
        with found.open("rb") as f:
            return pickle.load(f)
    except Exception:  # truncated, corrupt or of another library: judge again
        found.unlink(missing_ok=True)
        return None


def store(name: str, value: object) -> None:
    """Keep `value` under `name`, whole or not at all; a folder that cannot be written keeps nothing (keeping is
    a saving, never a reason for a page to fail)."""
    target = path(name)
    if target is None:
        return
    partial = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp",
                                         delete=False) as f:  # fmt: skip
            partial = Path(f.name)
            pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(partial, target)
        prune(target.parent)
    except OSError:
        if partial is not None:
            partial.unlink(missing_ok=True)


def prune(where: Path) -> None:
    """Remove all but the KEPT newest files, and partial ones a killed writer left (older than LEFT_S)."""
    files = sorted(where.glob("*.pickle"), key=lambda p: p.stat().st_mtime, reverse=True)
    left = [p for p in where.glob(".*.tmp") if time.time() - p.stat().st_mtime > LEFT_S]
    for old in files[KEPT:] + left:
        old.unlink(missing_ok=True)
