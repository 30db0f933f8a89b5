"""Where, when and with what a record was measured: commit, library versions, CPU, host, command, run id,
and the hash of the verdict rules in force (docs/claims.md).

Every record carries its `run_id` (pairs are formed within one run; `runner.run` makes one per run,
else one per process) and the `rules_hash`, so the ledger can tell records measured under the rules in
force from records the rules were written after. `versions` names the libraries whose change makes an
old timing stale, and `code_fingerprint` the source a record's loop runs (`code_identity`; both part of the
resume key): a record of other code is never the measurement a run would make now.
"""

import ast
import datetime
import functools
import hashlib
import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path

import torch

import dlrm_study
from dlrm_study.platform import cpu_model, cpuid
from dlrm_study.records import code_identity
from dlrm_study.records import columns as col

PACKAGES = ("torch", "torchrec", "fbgemm-gpu", "fbgemm-gpu-cpu", "triton")


# The provenance columns whose change makes an old timing stale (part of the resume key).
TIMING_VERSIONS = tuple(f"{name.replace('-', '_')}_version" for name in PACKAGES)


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
        "cpuid": cpuid(),
        col.CPU_COUNT: os.cpu_count(),
        col.THREADS: torch.get_num_threads(),
        col.DEVICE_NAME: gpu or cpu_model(),
        col.GPU_MODEL: gpu,
        "host": platform.node(),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        col.TIMESTAMP: datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        **({col.INVOCATION: invocation()} if invocation() else {}),
    }


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
PACKAGE = Path(dlrm_study.__file__).resolve().parent
# The deciding code: the claims, and every module of the package they import, directly or not (the rules, the
# statistics, the readers, the evidence filters, the machine keys, the selfcheck thresholds, the studies' points).
RULES_ROOTS = ("analysis/claims.py",)


def module_files(name: str, package: Path) -> list[Path]:
    """The files of a dotted module name inside `package` (its module, or its package's __init__.py)."""
    parts = name.split(".")
    if parts[0] != package.name:
        return []
    base = package.joinpath(*parts[1:])
    return [f for f in (base.with_suffix(".py"), base / "__init__.py") if f.is_file()]


def imports_of(path: Path, package: Path) -> set[Path]:
    """The package's files `path` imports (at any depth of its body; `from a import b` where b is a module too)."""
    found: set[Path] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.update(module_files(alias.name, package))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update(module_files(node.module, package))
            for alias in node.names:
                found.update(module_files(f"{node.module}.{alias.name}", package))
    return found


def deciding_code(package: Path = PACKAGE, roots: tuple[str, ...] = RULES_ROOTS) -> list[Path]:
    """Every file the roots import within the package, directly or not (the import graph's closure), sorted."""
    seen: set[Path] = set()
    todo = [package / root for root in roots]
    while todo:
        path = todo.pop()
        if path not in seen:
            seen.add(path)
            todo.extend(imports_of(path, package) - seen)
    return sorted(seen)


@functools.cache
def rules_hash(path: Path = RULES, package: Path = PACKAGE, roots: tuple[str, ...] = RULES_ROOTS) -> str:
    """12 hex digits of sha256 over the verdict rules (docs/claims.md between its rules markers) and the
    source of every module the deciding code imports (`deciding_code`), each under its path in the package,
    so a change to either, or a new import, is a new hash.

    Every record carries it, so the ledger can tell records measured under the rules in force
    from records the rules were written after. "" where the rules or their code are not beside the package.
    """
    try:
        text = path.read_text()
        sources = [f"{part.relative_to(package)}\n{part.read_text()}" for part in deciding_code(package, roots)]
    except OSError:
        return ""
    if RULES_BEGIN not in text or RULES_END not in text:
        return ""
    rules = text.split(RULES_BEGIN, 1)[1].split(RULES_END, 1)[0].strip()
    return hashlib.sha256("\n".join([rules, *sources]).encode()).hexdigest()[:12]


def code_fingerprint(loop: object = code_identity.ANY) -> str:
    """12 hex digits naming the code a record of `loop` (a `train.loop`; none: every loop) was measured by:
    `code_identity.fingerprint` of that loop's files at today's protocol, computed once per process."""
    return code_identity.fingerprint_here(code_identity.loop_of(loop))


INVOCATION = "DLRM_STUDY_INVOCATION"  # set by a command that launches several processes (`make compare-upstream`)


def invocation() -> str:
    """The invocation a record's process belongs to where its launcher named one (else "")."""
    return os.environ.get(INVOCATION, "")


def versions() -> dict[str, str]:
    """This process's TIMING_VERSIONS (what a stored record's must equal to be reused)."""
    return {key: package_version(key.removesuffix("_version").replace("_", "-")) for key in TIMING_VERSIONS}
