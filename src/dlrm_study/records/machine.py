"""The machine a record was measured on: one typed identity, its key, and nothing invented.

A machine is a host: its CPU (the model string, and the vendor's family/model/stepping where
/proc/cpuinfo gives them, since cloud VMs often report only "AMD EPYC" or "Intel Xeon
Processor"), the instruction-set flags that change these timings (AVX-512, AVX512-BF16,
AMX-BF16), its logical CPU count, and its GPU if it has one. The thread count a run used is
not part of it: it is a column of its own, so every study of one host shares one key.

    amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu
    intel-xeon/avx512f+avx512_bf16+amx_bf16/16cpu/nvidia-h200

The key is written when a record is measured (`Machine.this`) and parsed when read; it is never
completed from the reading machine. Records written before the key existed are given one
explicitly, once (`scripts/migrate_records.py`), from what they recorded themselves, with
`isa-unrecorded` where their instruction set was not recorded (`Machine.from_legacy_row`):
such records are listed, and kept out of verdicts (`recorded` is False).
"""

import dataclasses
import os
import re

from dlrm_study import platform
from dlrm_study.platform import BF16_FLAGS
from dlrm_study.records import columns as col

# CPU flags that change what these timings mean: AVX-512 kernels, bf16 dot products, AMX tiles.
ISA_FLAGS = ("avx512f", "avx512_bf16", "amx_bf16")
UNRECORDED_ISA = "isa-unrecorded"
# The keys of records written before the key existed, and of keys that ended in threads (`/2t`).
LEGACY_THREADS = re.compile(r"^\d+t$")


@dataclasses.dataclass(frozen=True)
class Machine:
    """A host, as its records name it."""

    cpu: str  # slug of the CPU's model string, `amd-epyc`
    cpuid: str  # `f25m17s1` (family, model, stepping), or "" where not recorded
    isa: str  # `avx512f+avx512_bf16`, `avx2`, `baseline`, or UNRECORDED_ISA
    cpus: int  # logical CPUs; 0 where not recorded
    gpu: str = ""  # slug of the GPU's name, "" for none

    @property
    def key(self) -> str:
        cpu = f"{self.cpu}-{self.cpuid}" if self.cpuid else self.cpu
        key = f"{cpu}/{self.isa}/{self.cpus or '?'}cpu"
        return f"{key}/{self.gpu}" if self.gpu else key

    def __str__(self) -> str:
        return self.key

    @classmethod
    def parse(cls, key: str) -> "Machine":
        """The machine a key names (the inverse of `key`); ValueError for a key of another shape."""
        parts = str(key).split("/")
        if len(parts) not in (3, 4) or not parts[2].endswith("cpu"):
            raise ValueError(f"not a machine key: {key!r} (expected cpu/isa/Ncpu[/gpu])")
        match = re.fullmatch(r"(.+?)(?:-(f\d+m\d+s\d+))?", parts[0])
        cpu, cpuid = match.group(1), match.group(2) or ""
        count = parts[2].removesuffix("cpu")
        return cls(cpu, cpuid, parts[1], int(count) if count.isdigit() else 0, parts[3] if len(parts) == 4 else "")

    @classmethod
    def this(cls) -> "Machine":
        """This host, as a record measured now names it."""
        gpu = slug(platform.gpu_name()) if platform.gpu_name() else ""
        return cls(slug(platform.cpu_model()), platform.cpuid(), isa(platform.cpu_flags()), os.cpu_count() or 0, gpu)

    @classmethod
    def from_legacy_row(cls, row: dict) -> "Machine":
        """The machine of a record written before this key: only what the record itself says.

        Its old `machine` (`cpu/isa/<threads>t[/gpu]`) gave the CPU and the ISA flags; without
        one, the ISA is `isa-unrecorded`. The logical CPUs come from its `cpu_count`.
        """
        cpus = _whole(row.get("cpu_count"))
        old = row.get("machine")
        if isinstance(old, str) and old:
            parts = old.split("/")
            if len(parts) >= 3 and LEGACY_THREADS.match(parts[2]):
                return cls(parts[0], "", parts[1], cpus, parts[3] if len(parts) > 3 else "")
            return cls.parse(old)
        model, gpu = row.get("cpu_model"), row.get("gpu_model")
        cpu = slug(model) if isinstance(model, str) and model else "unknown-cpu"
        return cls(cpu, "", UNRECORDED_ISA, cpus, slug(gpu) if isinstance(gpu, str) and gpu else "")

    @property
    def recorded(self) -> bool:
        """Whether the records said what ISA this host has (only such machines are judged)."""
        return self.isa != UNRECORDED_ISA

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpu)

    @property
    def native_bf16(self) -> bool | None:
        """Whether the CPU computes in bf16 in hardware; None where the records did not say."""
        if not self.recorded:
            return None
        return any(flag in self.isa.split("+") for flag in BF16_FLAGS)

    @property
    def bf16_class(self) -> str:
        """The hardware class S3 is judged per: what the CPU does with bf16."""
        if self.native_bf16 is None:
            return "ISA unrecorded"
        if "amx_bf16" in self.isa.split("+"):
            return "native bf16 with AMX"
        return "native bf16 without AMX" if self.native_bf16 else "no native bf16 (emulated)"


def is_legacy_key(key: object) -> bool:
    """Whether a stored machine key predates today's form: missing, or ending in threads (`cpu/isa/2t`)."""
    if not isinstance(key, str) or not key:
        return True
    parts = key.split("/")
    return len(parts) in (3, 4) and LEGACY_THREADS.match(parts[2]) is not None


def _whole(value: object) -> int:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0
    return int(number) if number == number else 0


def slug(name: str) -> str:
    """`Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz` -> `intel-xeon-platinum-8481c`."""
    text = re.sub(r"\((r|tm)\)|@.*$|\bcpu\b|\bprocessor\b|\b\d+-core\b", " ", name.lower())
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-") or "unknown"


def isa(flags: frozenset[str]) -> str:
    """The ISA_FLAGS present, joined by '+' (`avx2` or `baseline` when none of them are)."""
    present = [flag for flag in ISA_FLAGS if flag in flags]
    return "+".join(present) or ("avx2" if "avx2" in flags else "baseline")


def machine_key() -> str:
    """This host's key, `<cpu>/<isa>/<N>cpu[/<gpu>]` (`records.Machine`); threads are a column of their own."""
    return Machine.this().key


def select(frame, which: str | None = "this"):  # frame: pandas.DataFrame
    """The records of one machine: `this` (this host's key), a key, or None for every machine."""
    if which is None or frame.empty or col.MACHINE not in frame:
        return frame
    return frame[frame[col.MACHINE] == (machine_key() if which == "this" else which)]
