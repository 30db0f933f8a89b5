"""What this host is: its CPU (model string, family/model/stepping, instruction-set flags), whether it
computes bf16 in hardware, and its GPU. Read from the operating system, never from records."""

import functools
import platform
from pathlib import Path

BF16_FLAGS = ("avx512_bf16", "amx_bf16")


@functools.cache
def cpuinfo() -> dict[str, str]:
    """The first processor's fields in /proc/cpuinfo (empty where there is none)."""
    fields: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return fields
    for line in text.split("\n\n")[0].splitlines():
        if ":" in line:
            name, value = line.split(":", 1)
            fields.setdefault(name.strip(), value.strip())
    return fields


def cpu_model() -> str:
    return cpuinfo().get("model name") or platform.processor() or platform.machine()


def cpu_flags() -> frozenset[str]:
    """The CPU's instruction-set flags (Linux /proc/cpuinfo); empty where unknown."""
    return frozenset(cpuinfo().get("flags", "").split())


def cpuid() -> str:
    """`f25m17s1`: family, model and stepping, which tell CPU generations apart behind one model string."""
    info = cpuinfo()
    parts = [info.get(name, "") for name in ("cpu family", "model", "stepping")]
    return "f{}m{}s{}".format(*parts) if all(p.isdigit() for p in parts) else ""


@functools.cache
def gpu_name() -> str:
    """The first CUDA GPU's name, "" where there is none."""
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else ""


def native_bf16() -> bool:
    """Whether the CPU computes in bf16 in hardware (AVX512-BF16 or AMX-BF16); else bf16 is emulated."""
    return any(flag in cpu_flags() for flag in BF16_FLAGS)
