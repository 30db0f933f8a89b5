"""Tidy records: provenance, atomic append to CSV, loading.

A record is one flat dict, one measured point. `append` rewrites the CSV through a
temporary file and `os.replace`, under a lock, so a run killed midway leaves either
the old file or the new one, never a half-written row, and a record with new fields
widens the header instead of breaking it.
"""

import csv
import datetime
import fcntl
import functools
import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path

import torch

import dlrm_study

PACKAGES = ("torch", "torchrec", "fbgemm-gpu", "fbgemm-gpu-cpu", "triton")


@functools.cache
def git_commit() -> str:
    """Commit of the source tree this package runs from, `-dirty` if it has local changes."""
    src = Path(dlrm_study.__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=src, capture_output=True, text=True, check=True
        ).stdout.strip()
        # Records appended under results/ are outputs, not code: they do not make a tree dirty.
        code = ["--", ":(top)", ":(top,exclude)results"]
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", *code], cwd=src, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        # A copy of the tree without git (a GPU machine): the launcher names the commit.
        return os.environ.get("DLRM_STUDY_COMMIT", "unknown")
    return commit + ("-dirty" if dirty else "")


@functools.cache
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ""


def provenance(device: torch.device | str = "cpu") -> dict[str, object]:
    """Where, when and with what software a record was measured."""
    device = torch.device(device)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else ""
    return {
        "package_version": dlrm_study.__version__,
        "git_commit": git_commit(),
        "python_version": platform.python_version(),
        **{f"{name.replace('-', '_')}_version": package_version(name) for name in PACKAGES},
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "device_name": gpu or cpu_model(),
        "gpu_model": gpu,
        "host": platform.node(),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "timestamp": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


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
    """All records of a CSV as a pandas DataFrame."""
    import pandas as pd

    return pd.read_csv(path)
