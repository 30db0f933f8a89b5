"""Hot CPU kernels: C++ compiled on first use, or the pure-PyTorch twins in `reference_ops`.

`load()` compiles `fused_cpu.cpp` with OpenMP (cached by torch under
TORCH_EXTENSIONS_DIR, so only the first run pays) and returns the module, or None
where no compiler works; `DLRM_STUDY_KERNELS=torch` forces the PyTorch path. `cpu_ops()`
is the one choice the CPU archs and optimizers make: the compiled kernels, else the twins.
Every kernel module names itself (`NAME`: `cpp`, `torch`, `triton`), and records say
which ran (`kernel_path`): the backend is a value, never a test of module identity.
"""

import functools
import hashlib
import os
import platform
import sys
import warnings
from pathlib import Path
from types import ModuleType

from dlrm_study.model.kernels import torch_ops

SOURCE = Path(__file__).with_name("fused_cpu.cpp")


@functools.cache
def load() -> ModuleType | None:
    """The compiled kernels, or None (PyTorch fallback) if they cannot be built here."""
    if os.environ.get("DLRM_STUDY_KERNELS", "auto") == "torch":
        return None
    from torch.utils import cpp_extension

    try:
        print("dlrm-study: loading the fused CPU kernels (compiled once, then cached)", file=sys.stderr)
        module = cpp_extension.load(
            # -march=native: one build per CPU kind; and per checkout, or two checkouts sharing
            # torch's cache would rebuild each other's (the source path is part of the build).
            name=f"dlrm_study_fused_cpu_{cpu_fingerprint()}_{checkout()}",
            sources=[str(SOURCE)],
            extra_cflags=["-O3", "-march=native", "-fopenmp", "-ffp-contract=off"],  # no FMA: same rounding as PyTorch
            extra_ldflags=["-fopenmp"],
            verbose=False,
        )
    except Exception as err:  # no compiler, no headers: the PyTorch path gives the same results
        warnings.warn(f"fused CPU kernels unavailable ({type(err).__name__}); using the PyTorch path", stacklevel=2)
        return None
    module.NAME = "cpp"
    return module


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
