"""Hot CPU kernels: C++ compiled on first use, or the pure-PyTorch twins in `reference_ops`.

`load()` compiles `fused_cpu.cpp` with OpenMP (cached by torch under
TORCH_EXTENSIONS_DIR, so only the first run pays; `make` pays it when it makes the environment) and
returns the module, or None where no compiler works; `DLRM_STUDY_KERNELS=torch` forces the PyTorch path.
`cpu_ops()` is the one choice the CPU archs and optimizers make: the compiled kernels, else the twins.
Every kernel module names itself (`NAME`: `cpp`, `torch`, `triton`), and records say
which ran (`kernel_path`): the backend is a value, never a test of module identity.

No run waits on a dead run. torch guards a build with a lock file (`lock`, its FileBaton) that only the
build removes: a build killed mid-way (kill -9, out of memory) leaves it, and every later load would wait
on it forever. So a build here is held by `build_lock` too, an flock that the kernel drops when its holder
ends, however it ends. Holding it, a `lock` file found is a dead build's: it is removed, with one line
(once any compiler that build left running is done). A live build is waited on, with one line, for
DLRM_STUDY_KERNEL_WAIT_S seconds (default WAIT_S); after that the run ends in one line (a `Fault`)
rather than fall back to the PyTorch twins, whose timings a study would take for the compiled kernels'.
"""

import contextlib
import fcntl
import functools
import hashlib
import os
import platform
import socket
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import IO

from dlrm_study import settings
from dlrm_study.errors import Fault, UsageError
from dlrm_study.model.kernels import torch_ops

SOURCE = Path(__file__).with_name("fused_cpu.cpp")
WAIT_S = 600.0  # a first build takes about 25 s on a Xeon, 80 s on two busy cores: a holder past this is stuck
HOLDER = "dlrm-study.lock"  # beside torch's `lock`; never removed, its flock is the lock
# -ffp-contract=off: no FMA the compiler invents, so the embedding kernels round as PyTorch does (the
# interaction asks for its FMAs explicitly). -march=native already implies -mtune=native; a GCC that
# does not know the CPU (GCC 12 on Zen 4 and Zen 5: znver4 came in GCC 13) tunes for the closest it
# knows, whatever flag is given: a newer compiler (CXX=g++-13) is what tunes for them.
CFLAGS = ["-O3", "-march=native", "-fopenmp", "-ffp-contract=off"]


@functools.cache
def load() -> ModuleType | None:
    """The compiled kernels, or None (PyTorch fallback) if they cannot be built here."""
    if settings.current().kernels == "torch":
        return None
    print("dlrm-study: loading the fused CPU kernels (compiled once, then cached)", file=sys.stderr)
    try:
        module = build()
    except (Fault, UsageError):
        raise
    except Exception as err:  # no compiler, no headers: the PyTorch path gives the same results
        warnings.warn(f"fused CPU kernels unavailable ({type(err).__name__}); using the PyTorch path", stacklevel=2)
        return None
    module.NAME = "cpp"
    return module


def build() -> ModuleType:
    """Compile (or find compiled) and import the kernels, holding the build folder (see the module docstring)."""
    from torch.utils import cpp_extension

    folder = build_folder()
    seconds = wait_s()
    with build_lock(folder, seconds):
        clear_dead_build(folder, seconds)
        return cpp_extension.load(
            name=extension_name(),
            sources=[str(SOURCE)],
            extra_cflags=CFLAGS,
            extra_ldflags=["-fopenmp"],
            build_directory=str(folder),
            verbose=False,
        )


def extension_name() -> str:
    # -march=native: one build per CPU kind; and per checkout, or two checkouts sharing
    # torch's cache would rebuild each other's (the source path is part of the build).
    return f"dlrm_study_fused_cpu_{cpu_fingerprint()}_{checkout()}"


def build_folder() -> Path:
    """Where torch builds these kernels (under TORCH_EXTENSIONS_DIR, else its default root); made if missing."""
    from torch.utils import cpp_extension

    # torch's own choice of folder, so a build cached before this lock existed is found where it is.
    return Path(cpp_extension._get_build_directory(extension_name(), verbose=False))


def wait_s() -> float:
    """How long to wait for a live build: DLRM_STUDY_KERNEL_WAIT_S, else WAIT_S."""
    given = settings.current().kernel_wait_s
    return WAIT_S if given is None else given


@contextlib.contextmanager
def build_lock(folder: Path, wait_s: float) -> Iterator[None]:
    """Hold the right to build in `folder`, waiting at most `wait_s` for a live holder (a `Fault` after that)."""
    with open(folder / HOLDER, "a+") as lock:
        if not try_lock(lock):
            holder = holder_of(lock)
            print(f"dlrm-study: waiting for the fused CPU kernels' build by {holder} (up to {wait_s:.0f} s)",
                  file=sys.stderr)  # fmt: skip
            deadline = time.monotonic() + wait_s
            while not try_lock(lock):
                if time.monotonic() >= deadline:
                    raise Fault(
                        f"the fused CPU kernels' build in {folder} is still held by {holder} after {wait_s:.0f} s: "
                        "let it end, or end it (DLRM_STUDY_KERNEL_WAIT_S sets the wait)"
                    )
                time.sleep(0.2)
        lock.seek(0)
        lock.truncate()
        lock.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        lock.flush()
        yield


def try_lock(lock: IO[str]) -> bool:
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def holder_of(lock: IO[str]) -> str:
    """Who holds the build, as the holder wrote it ("pid N on HOST")."""
    lock.seek(0)
    return lock.read().strip() or "another process"


def clear_dead_build(folder: Path, wait_s: float) -> None:
    """Remove torch's lock file: with the flock held, no live run holds it (every build here holds the flock).

    The compiler of a run killed with kill -9 may outlive it, still writing into the folder: it is waited
    on first (at most `wait_s`), so two compilers never write one object file.
    """
    baton = folder / "lock"
    if not baton.exists():
        return
    deadline = time.monotonic() + wait_s
    if left := compilers_in(folder):
        print(f"dlrm-study: waiting for the compiler a killed build left running (pid {left[0]}, up to "
              f"{wait_s:.0f} s)", file=sys.stderr)  # fmt: skip
    while left := compilers_in(folder):
        if time.monotonic() >= deadline:
            raise Fault(f"a compiler left by a killed build (pid {left[0]}) still works in {folder} after "
                        f"{wait_s:.0f} s: let it end, or end it (DLRM_STUDY_KERNEL_WAIT_S sets the wait)")  # fmt: skip
        time.sleep(0.2)
    baton.unlink(missing_ok=True)
    print(f"dlrm-study: removed {baton}, left by a build killed mid-way", file=sys.stderr)


def compilers_in(folder: Path) -> list[int]:
    """Processes working in `folder`: a build's ninja and compilers run there (none found where /proc is not)."""
    where, found = os.path.realpath(folder), []
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                with contextlib.suppress(OSError):  # gone meanwhile, or another user's
                    if os.readlink(f"/proc/{entry.name}/cwd") == where:
                        found.append(int(entry.name))
    return found


def cpu_ops() -> ModuleType:
    """The CPU kernels: the compiled C++ where it builds, else their PyTorch twins."""

    return load() or torch_ops


def checkout() -> str:
    """Short hash of where the source lives."""
    return hashlib.sha256(str(SOURCE.resolve()).encode()).hexdigest()[:6]


def cpu_fingerprint() -> str:
    """Short hash of the CPU's model and instruction-set flags, so a cached build never runs elsewhere."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        info = platform.processor() + platform.machine()
    keep = [line for line in info.splitlines() if line.startswith(("model name", "flags"))][:2]
    return hashlib.sha256("\n".join(keep).encode()).hexdigest()[:8]
