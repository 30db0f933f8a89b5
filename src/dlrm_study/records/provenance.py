"""Where, when and with what a record was measured: commit, library versions, CPU, host, command, run id,
and the id of the verdict rules in force (`dlrm_study.rules`).

Every record carries its `run_id` (pairs are formed within one run; `runner.run` makes one per run,
else one per process) and the `rules_hash` (the rules' id), so the ledger can tell records measured under the rules in
force from records the rules were written after. `versions` names the libraries whose change makes an
old timing stale, and `code_fingerprint` the source a record's loop runs (`code_identity`; both part of the
resume key): a record of other code is never the measurement a run would make now.
"""

import datetime
import functools
import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path

import torch

import dlrm_study
from dlrm_study import rules, settings
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
    return settings.current().commit or checkout_commit()


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


def rules_hash() -> str:
    """The id of the verdict rules in force (`dlrm_study.rules.rules_id`: the declared literals and the judgements
    they give on the golden fixture), which every record carries so the ledger can tell records measured under
    today's rules from records the rules were written after. "" where the rules' files are not beside the package.

    Records written before the rules were declared carry the digest of docs/claims.md's rules block and the source
    the claims imported (12 hex digits, no dash); `scripts/rerule.py` gives records of another id today's, where
    the code that measured them gives the golden judgements."""
    return rules.rules_id()


def code_fingerprint(loop: object = code_identity.ANY) -> str:
    """12 hex digits naming the code a record of `loop` (a `train.loop`; none: every loop) was measured by:
    `code_identity.fingerprint` of that loop's files at today's protocol, computed once per process."""
    return code_identity.fingerprint_here(code_identity.loop_of(loop))


def today_code(loop: object = code_identity.ANY) -> str:
    """The code a record of `loop` measured now counts as (`code_identity.today`): its fingerprint, or the first of
    the fingerprints declared to run its step alike (`code_identity.LOOP_LOCK`). What records are compared by."""
    return code_identity.today(code_identity.loop_of(loop))


def invocation() -> str:
    """The invocation a record's process belongs to where its launcher named one (else "")."""
    return settings.current().invocation


def versions() -> dict[str, str]:
    """This process's TIMING_VERSIONS (what a stored record's must equal to be reused)."""
    return {key: package_version(key.removesuffix("_version").replace("_", "-")) for key in TIMING_VERSIONS}
