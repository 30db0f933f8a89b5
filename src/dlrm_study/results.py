"""Tidy records: the one record builder, provenance, the machine key, the resume key, atomic CSV.

A record is one flat dict, one measurement. `record` builds every one of them: the study and
its labels, the measured fields, the flattened config, provenance and the machine key.
`append` rewrites the CSV through a temporary file and `os.replace`, under a lock, so a run
killed midway leaves either the old file or the new one, never a half-written row, and a
record with new fields widens the header instead of breaking it.

The machine key (`machine_key`, `records.Machine`) names the host a record was measured on:
its CPU (model string, family/model/stepping), the instruction-set flags that change these
timings (AVX-512, AVX512-BF16, AMX-BF16), its logical CPUs, and its GPU if it has one; the
threads a run used are a column of their own. Records of several machines live side by side
in one file; figures and findings select one machine (`select`). The resume key
(`resume_key`) says "already measured": config hash, variant, machine, threads, the versions
of the libraries that change timing, and the repeat. Every record also carries its `run_id`
(pairs are formed within one run) and the `rules_hash` of the verdict rules in force.
"""

import csv
import dataclasses
import datetime
import fcntl
import functools
import hashlib
import importlib.metadata
import os
import platform
import subprocess
import sys
import typing
from pathlib import Path

import torch

import dlrm_study
from dlrm_study.errors import UsageError
from dlrm_study.records import columns as col
from dlrm_study.records import machine as machines
from dlrm_study.records.machine import BF16_FLAGS, UNRECORDED_ISA, Machine, is_legacy_key
from dlrm_study.records.record import Record

if typing.TYPE_CHECKING:
    from dlrm_study.config import Config

PACKAGES = ("torch", "torchrec", "fbgemm-gpu", "fbgemm-gpu-cpu", "triton")
# The provenance columns whose change makes an old timing stale (part of the resume key).
TIMING_VERSIONS = tuple(f"{name.replace('-', '_')}_version" for name in PACKAGES)
# Columns read as text whatever they look like (a hash of digits only is not a number).
TEXT_COLUMNS = (
    col.CONFIG_HASH, col.SWEEP_POINT, col.GIT_COMMIT, col.VARIANT, col.MACHINE, col.POINT, col.FLAGS, col.ERROR,
    col.RUN_ID, col.RULES_HASH,
)  # fmt: skip
__all__ = ["BF16_FLAGS", "UNRECORDED_ISA", "Machine", "is_legacy_key"]


def git_commit() -> str:
    """Commit of the source tree this package runs from, `-dirty` if it has local changes.

    DLRM_STUDY_COMMIT, where the launcher sets it, wins: a copy of the tree on another machine
    (the GPU's) may sit in a different git checkout, or none, and only the launcher knows what
    it copied.
    """
    return os.environ.get("DLRM_STUDY_COMMIT") or checkout_commit()


@functools.cache
def checkout_commit() -> str:
    """What git says of the checkout this package runs from (asked once per process)."""
    src = Path(dlrm_study.__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=src, capture_output=True, text=True, check=True
        ).stdout.strip()
        # Records under results/ and the README's generated section are outputs, not code: they do
        # not make a tree dirty (`make reproduce` writes both).
        code = ["--", ":(top)", ":(top,exclude)results", ":(top,exclude)README.md"]
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", *code], cwd=src, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("-dirty" if dirty else "")


def cpu_model() -> str:
    return machines.cpu_model()


def cpu_flags() -> frozenset[str]:
    """The CPU's instruction-set flags (Linux /proc/cpuinfo); empty where unknown."""
    return machines.cpu_flags()


def native_bf16() -> bool:
    """Whether the CPU computes in bf16 in hardware (AVX512-BF16 or AMX-BF16); else bf16 is emulated."""
    return any(flag in cpu_flags() for flag in BF16_FLAGS)


def this_machine() -> Machine:
    """This host as records measured now name it (`records.Machine`)."""
    m = Machine.this()
    return dataclasses.replace(m, isa=machines.isa(cpu_flags()))  # through cpu_flags: tests fake it


slug = machines.slug  # a name made safe for keys and paths


def machine_key() -> str:
    """This host's key, `<cpu>/<isa>/<N>cpu[/<gpu>]` (`records.Machine`); threads are a column of their own."""
    return this_machine().key


def select(frame, which: str | None = "this"):  # frame: pandas.DataFrame
    """The records of one machine: `this` (this host's key), a key, or None for every machine."""
    if which is None or frame.empty or col.MACHINE not in frame:
        return frame
    return frame[frame[col.MACHINE] == (machine_key() if which == "this" else which)]


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
        col.PACKAGE_VERSION: dlrm_study.__version__,
        col.GIT_COMMIT: git_commit(),
        "python_version": platform.python_version(),
        **{f"{name.replace('-', '_')}_version": package_version(name) for name in PACKAGES},
        col.CPU_MODEL: cpu_model(),
        "cpuid": machines.cpuid(),
        col.CPU_COUNT: os.cpu_count(),
        col.THREADS: torch.get_num_threads(),
        col.DEVICE_NAME: gpu or cpu_model(),
        col.GPU_MODEL: gpu,
        "host": platform.node(),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        col.TIMESTAMP: datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def record(
    study: str,
    fields: dict[str, object],
    cfg: "Config | None" = None,
    device: torch.device | str = "cpu",
    machine: str | None = None,
    run_id: str | None = None,
    **labels: object,
) -> dict[str, object]:
    """The one record builder: study and labels, measured fields, the config, provenance, machine.

    `fields` may name the `threads` they ran with (a rank's, not this process's). `run_id` names
    the run of a study this record belongs to (`runner.run` makes one per run; else this
    process's), so pairs are formed only within one run. `rules_hash` is the hash of the verdict
    rules in force when it was measured. Labels (variant, repeat, point, ...) come first.
    """
    prov = provenance(device)
    if fields.get(col.THREADS):
        prov[col.THREADS] = fields[col.THREADS]
    described = {col.CONFIG_NAME: cfg.name, col.CONFIG_HASH: cfg.hash()} if cfg is not None else {}
    return Record(
        study,
        labels={**labels, **described},
        fields=dict(fields),
        config=cfg.flat() if cfg is not None else {},
        provenance={key: value for key, value in prov.items() if key not in fields},
        identity={
            col.MACHINE: machine or machine_key(),
            col.RUN_ID: run_id or process_run_id(),
            col.RULES_HASH: rules_hash(),
        },
    ).to_row()


def new_run_id() -> str:
    """A fresh run id: when it started (UTC), this process, and a random part."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}-{os.getpid()}-{os.urandom(2).hex()}"


@functools.cache
def process_run_id() -> str:
    """The run id of records made outside `runner.run` (one per process)."""
    return new_run_id()


RULES = Path(dlrm_study.__file__).resolve().parents[2] / "docs" / "claims.md"
RULES_BEGIN, RULES_END = "<!-- rules: begin -->", "<!-- rules: end -->"


@functools.cache
def rules_hash(path: Path = RULES) -> str:
    """12 hex digits of sha256 over the verdict rules (docs/claims.md between its rules markers).

    Every record carries it, so the ledger can tell records measured under the rules in force
    from records the rules were written after. "" where the rules file is not beside the package.
    """
    try:
        text = path.read_text()
    except OSError:
        return ""
    if RULES_BEGIN not in text or RULES_END not in text:
        return ""
    rules = text.split(RULES_BEGIN, 1)[1].split(RULES_END, 1)[0]
    return hashlib.sha256(rules.strip().encode()).hexdigest()[:12]


def versions() -> dict[str, str]:
    """This process's TIMING_VERSIONS (what a stored record's must equal to be reused)."""
    return {key: package_version(key.removesuffix("_version").replace("_", "-")) for key in TIMING_VERSIONS}


def resume_key(
    config_hash: str, variant: str, machine: str, threads: object, repeat: object, versions: dict[str, object]
) -> str:
    """What makes a stored record the measurement a run would make now."""
    stamp = ",".join(f"{key}={text(versions.get(key))}" for key in TIMING_VERSIONS)
    return f"{config_hash}|{variant}|{machine}|{text(threads)}t|{stamp}|{text(repeat)}"


def key_here(cfg: "Config", variant: str, repeat: object = 0, threads: int | None = None) -> str:
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
