"""Tidy records: the one record builder, provenance, the machine key, the resume key, atomic CSV.

A record is one flat dict, one measurement. `record` builds every one of them: the study and
its labels, the measured fields, the flattened config, provenance and the machine key.
`append` rewrites the CSV through a temporary file and `os.replace`, under a lock, so a run
killed midway leaves either the old file or the new one, never a half-written row, and a
record with new fields widens the header instead of breaking it.

The machine key (`machine_key`) names the hardware a record was measured on: CPU model, the
instruction-set flags that change these timings (AVX-512, AVX512-BF16, AMX-BF16) and the
thread count, plus the GPU where one ran. Records of several machines live side by side in
one file; figures and findings select one machine. The resume key (`resume_key`) says
"already measured": config hash, variant, machine, the versions of the libraries that
change timing, and the repeat. Records written before machine keys existed are read with
`machine` = `<cpu>/isa-unrecorded/<threads>t` (`load`): kept, and kept apart.
"""

import csv
import datetime
import fcntl
import functools
import importlib.metadata
import os
import platform
import re
import subprocess
import sys
import typing
from pathlib import Path

import torch

import dlrm_study

if typing.TYPE_CHECKING:
    from dlrm_study.config import Config

PACKAGES = ("torch", "torchrec", "fbgemm-gpu", "fbgemm-gpu-cpu", "triton")
# The provenance columns whose change makes an old timing stale (part of the resume key).
TIMING_VERSIONS = tuple(f"{name.replace('-', '_')}_version" for name in PACKAGES)
# CPU flags that change what these timings mean: AVX-512 kernels, bf16 dot products, AMX tiles.
ISA_FLAGS = ("avx512f", "avx512_bf16", "amx_bf16")
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
UNRECORDED_ISA = "isa-unrecorded"
# Columns read as text whatever they look like (a hash of digits only is not a number).
TEXT_COLUMNS = ("config_hash", "sweep_point", "git_commit", "variant", "machine", "point", "flags", "error")


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


@functools.cache
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The CPU's instruction-set flags (Linux /proc/cpuinfo); empty where unknown."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def native_bf16() -> bool:
    """Whether the CPU computes in bf16 in hardware (AVX512-BF16 or AMX-BF16); else bf16 is emulated."""
    return any(flag in cpu_flags() for flag in BF16_FLAGS)


def isa() -> str:
    """The ISA_FLAGS this CPU has, joined by '+' (`avx2` or `baseline` when it has none of them)."""
    flags = cpu_flags()
    present = [flag for flag in ISA_FLAGS if flag in flags]
    return "+".join(present) or ("avx2" if "avx2" in flags else "baseline")


def slug(name: str) -> str:
    """`Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz` -> `intel-xeon-platinum-8481c`."""
    text = re.sub(r"\((r|tm)\)|@.*$|\bcpu\b|\bprocessor\b|\b\d+-core\b", " ", name.lower())
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-") or "unknown"


def machine_key(threads: int | None = None, gpu: str = "", cpu: str | None = None, isa_flags: str | None = None) -> str:
    """`<cpu>/<isa>/<threads>t[/<gpu>]`: this machine, or one described by the arguments."""
    key = f"{slug(cpu or cpu_model())}/{isa_flags or isa()}/{threads or torch.get_num_threads()}t"
    return f"{key}/{slug(gpu)}" if gpu else key


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


def record(
    study: str,
    fields: dict[str, object],
    cfg: "Config | None" = None,
    device: torch.device | str = "cpu",
    machine: str | None = None,
    **labels: object,
) -> dict[str, object]:
    """The one record builder: study and labels, measured fields, the config, provenance, machine.

    `fields` may name the `threads` they ran with (a rank's, not this process's); the machine
    key follows them. Labels (variant, repeat, point, ...) come first, for a readable CSV.
    """
    prov = provenance(device)
    if fields.get("threads"):
        prov["threads"] = fields["threads"]
    described = {"config_name": cfg.name, "config_hash": cfg.hash()} if cfg is not None else {}
    return {
        "study": study,
        **labels,
        **described,
        **fields,
        "machine": machine or machine_key(int(prov["threads"]), str(prov["gpu_model"])),
        **(cfg.flat() if cfg is not None else {}),
        **{key: value for key, value in prov.items() if key not in fields},
    }


def versions() -> dict[str, str]:
    """This process's TIMING_VERSIONS (what a stored record's must equal to be reused)."""
    return {key: package_version(key.removesuffix("_version").replace("_", "-")) for key in TIMING_VERSIONS}


def resume_key(config_hash: str, variant: str, machine: str, repeat: object, versions: dict[str, object]) -> str:
    """What makes a stored record the measurement a run would make now."""
    stamp = ",".join(f"{key}={text(versions.get(key))}" for key in TIMING_VERSIONS)
    return f"{config_hash}|{variant}|{machine}|{stamp}|{text(repeat)}"


def key_of(row: dict[str, object]) -> str:
    """The resume key of a stored record (a row of `read_rows`, or a record dict)."""
    return resume_key(
        text(row.get("config_hash")), text(row.get("variant")), text(row.get("machine")), row.get("repeat"), row
    )


def text(value: object) -> str:
    """A value as the CSV holds it: '' for None or NaN, integers without a trailing .0."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def stored_keys(path: Path, with_errors: bool = True) -> set[str]:
    """Resume keys of the records in `path` (those that failed too, unless `with_errors` is False)."""
    return {key_of(row) for row in read_rows(Path(path))[1] if with_errors or not row.get("error")}


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
    """All records of a CSV as a pandas DataFrame, older records given their machine and repeat."""
    import pandas as pd

    frame = pd.read_csv(path, low_memory=False, dtype=dict.fromkeys(TEXT_COLUMNS, str))
    if frame.empty or "cpu_model" not in frame:
        return frame
    if "machine" not in frame:
        frame["machine"] = pd.NA
    missing = frame["machine"].isna() & frame["cpu_model"].notna()
    if missing.any():  # measured before the key existed: the ISA flags were not recorded
        old = frame[missing]
        gpus = old["gpu_model"] if "gpu_model" in old else pd.Series("", index=old.index)
        frame.loc[missing, "machine"] = [
            machine_key(int(threads) if threads == threads else 0, gpu if isinstance(gpu, str) else "", cpu,
                        UNRECORDED_ISA)
            for cpu, threads, gpu in zip(old["cpu_model"], old["threads"], gpus, strict=True)
        ]  # fmt: skip
    if "env_key" in frame:  # rows without provenance (a study's loss curve) share their run's env_key
        known = frame.dropna(subset=["machine"]).drop_duplicates("env_key").set_index("env_key")["machine"]
        frame["machine"] = frame["machine"].fillna(frame["env_key"].map(known))
    rounds = frame.get("round", 0)  # `dlrm-study compare` called its repeats rounds
    frame["repeat"] = frame["repeat"].fillna(rounds) if "repeat" in frame else rounds
    return frame
