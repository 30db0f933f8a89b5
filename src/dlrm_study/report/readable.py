"""What a reader may be shown: a verdict cell's length cap, machines in words, and the scan for internal names.

The cap and the scan are functions so that tests (and any page that renders text) call the same rule.
"""

import re

from dlrm_study.analysis.wording import MAX_CELL, VARIANTS, variant_words  # noqa: F401 (the report's names)
from dlrm_study.config.variants import REGISTRY
from dlrm_study.records import Machine

# Internal names: snake_case (`embedding_backward_update`), call-like names (`needed(host)`), and the
# kebab-case ids of variants and studies (`gpu-hbm`, `cpu-loops-quick`, `optimized-bf16`); preset names
# (`dlrm-benchmark`) are the paper-facing names of the models and stay.
SNAKE = re.compile(r"(?<![\w./-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w/.(-])")
CALL = re.compile(r"(?<![\w.])[a-z][a-z0-9_]*\([a-z][a-z0-9_]+\)")  # `needed(host)`, not `thread(s)`
KEBAB = re.compile(r"(?<![\w./-])(?:(?:gpu|cpu|host)-[a-z0-9+-]*[a-z0-9]|[a-z0-9+]+(?:-[a-z0-9+]+)+)(?![\w/.-])")
# Where a path, a command or a machine key (what `-p machine KEY` takes) is named on purpose.
LINK_TARGET = re.compile(r"\]\([^)]*\)|https?://\S+|`make [^`]*`|[a-z0-9-]+/[a-z0-9_+-]+/\d+cpu(?:/[a-z0-9-]+)?")


def too_long(cell: str, cap: int = MAX_CELL) -> bool:
    """Whether a verdict cell runs past the cap (Markdown emphasis not counted)."""
    return len(cell.replace("**", "")) > cap


def identifiers(text: str) -> list[str]:
    """The internal names a reader would meet in `text` (link targets, URLs and `make` commands aside)."""
    shown = LINK_TARGET.sub(" ", text)
    found = SNAKE.findall(shown) + CALL.findall(shown)
    found += [word for word in KEBAB.findall(shown) if is_internal_id(word)]
    return sorted(set(found))


def is_internal_id(word: str) -> bool:
    """A variant's or a study's id (`gpu-...`, `cpu-...`, `host-...`, a registered variant, a `-quick`/`-full` id)."""
    return word in REGISTRY or word.startswith(("gpu-", "cpu-", "host-")) or word.endswith(("-quick", "-full"))


VENDOR_WORDS = {"amd": "AMD", "epyc": "EPYC", "intel": "Intel", "xeon": "Xeon", "nvidia": "NVIDIA"}


def machine_words(key: str) -> str:
    """A machine key in words: `amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu` -> `AMD EPYC f25m17s1, 2 CPUs,
    native bf16`."""
    m = Machine.parse(key)
    name = " ".join(VENDOR_WORDS.get(w, w.upper() if len(w) <= 4 else w) for w in m.cpu.split("-"))
    parts = [f"{name} {m.cpuid}".strip(), f"{m.cpus} CPUs" if m.cpus else "CPUs unrecorded"]
    if "amx_bf16" in m.isa:
        parts.append("bf16 with AMX")
    elif "avx512_bf16" in m.isa:
        parts.append("native bf16")
    elif m.recorded:
        parts.append("no native bf16")
    if m.gpu:
        parts.append(" ".join(VENDOR_WORDS.get(w, w.upper()) for w in m.gpu.split("-")))
    return ", ".join(parts)
