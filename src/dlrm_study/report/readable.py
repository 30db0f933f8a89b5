"""What a reader may be shown: a verdict cell's length cap, machines in words, and the scan for internal names.

The cap and the scan are functions so that tests (and any page that renders text) call the same rule.
"""

import re

import pandas as pd

from dlrm_study.analysis.wording import MAX_CELL, VARIANTS, variant_words  # noqa: F401 (the report's names)
from dlrm_study.config.variants import REGISTRY
from dlrm_study.records import Machine
from dlrm_study.records import columns as col

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
    """A variant's or a study's id (`gpu-...`, `cpu-...`, a host table's kind, a registered variant, a `-quick`/`-full`
    id); `host-memory` is English (H4's words), so `host-` alone does not make an id."""
    return (
        word in REGISTRY or word in HOST_IDS or word.startswith(("gpu-", "cpu-")) or word.endswith(("-quick", "-full"))
    )


HOST_IDS = {"host-fused-cpu"}  # the host table's kind (model/tables/host.py), the one `host-` id


VENDOR_WORDS = {"amd": "AMD", "epyc": "EPYC", "intel": "Intel", "xeon": "Xeon", "nvidia": "NVIDIA"}


KERNEL_WORDS = {"aten": "ATen", "cpp": "fused C++", "fbgemm": "FBGEMM", "triton": "Triton", "torch": "PyTorch twin"}


def kernel_words(records: pd.DataFrame) -> str:
    """The kernels one variant's records ran, in words ("" where they name none or several)."""
    column = col.KERNEL_PATH
    paths = set(records[column].dropna().astype(str)) - {""} if column in records else set()
    return f"{KERNEL_WORDS.get(paths.pop(), 'its own')} kernels" if len(paths) == 1 else ""


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


# Record fields, operators and ISA flags as a reader names them (tables' columns, printed lines).
FIELD_WORDS = {
    col.SAMPLES_PER_S: "samples/s", "bound_samples_per_s": "bound samples/s",
    "published_samples_per_s": "paper samples/s", "dense_ms": "dense ms", "embedding_ms": "embedding ms",
    col.CONFIG_NAME: "preset", "bottom_mlp": "bottom MLP", "top_mlp": "top MLP",
    "embedding_forward": "embedding forward", "dense_backward": "dense backward",
    "embedding_backward_update": "embedding backward update", "optimizer_step": "optimizer step",
    "over_hbm": "over GPU memory", "batch_size": "batch size",
    "world_size": "ranks", "step_ms": "step ms", "compute_ms": "compute ms", col.MS_MEDIAN: "ms, median",
    "compute_ms_median": "compute ms, median", "model_step_ms": "model's step ms",
    "model_compute_ms": "model's compute ms", "step_error": "step error", "compute_error": "compute error",
    "allreduce_ms": "all-reduce ms", "alltoall_ms": "all-to-all ms", "accuracy_reduction": "accuracy reduction",
    "amx_bf16": "AMX bf16", "avx512_bf16": "AVX-512 bf16", "dense_features": "dense features",
    "embedding_dim": "embedding dim", "mlp_width": "MLP width",
}  # fmt: skip
# Studies (what a figure or a table was measured in) as a reader names them.
STUDY_WORDS = {
    "cpu-loops-quick": "the CPU loops (quick)", "cpu-loops-full": "the CPU loops (full)",
    "cpu-compare": "the CPU comparison", "gpu-dense-sparse-grid": "the GPU dense/sparse grid",
    "gpu-placements": "the GPU placements", "gpu-placement-size": "GPU placements against table size",
    "gpu-placement-skew": "GPU placements against id skew", "gpu-presets": "the GPU presets",
}  # fmt: skip
SENSITIVITY = "gpu-sensitivity-"
# Any name the scan finds, with link targets matched first so that they are passed over.
NAME = re.compile(f"(?P<keep>{LINK_TARGET.pattern})|(?P<name>{CALL.pattern}|{SNAKE.pattern}|{KEBAB.pattern})")


def name_words(name: str) -> str | None:
    """An internal name in a reader's words, or None where no words are written for it."""
    if name in FIELD_WORDS:
        return FIELD_WORDS[name]
    if name in STUDY_WORDS:
        return STUDY_WORDS[name]
    if name.startswith(SENSITIVITY):
        return "GPU sensitivity to " + name.removeprefix(SENSITIVITY).replace("-", " ")
    if name in REGISTRY:
        return variant_words(name)
    return None


def words(text: str) -> str:
    """`text` with each internal name the scan would find put in words; a name in a column of a printed table
    (two spaces beside it) keeps its width where its words are shorter, so the columns stay aligned."""

    def swap(m: re.Match) -> str:
        name = m["name"]
        said = name and name_words(name)
        if not said:
            return m[0]
        before, after = text[max(0, m.start() - 2) : m.start()], text[m.end() : m.end() + 2]
        if after == "  " or m.end() == len(text) or text[m.end()] == "\n":
            return said.ljust(len(name)) if before == "  " or after == "  " else said
        return said.rjust(len(name)) if before == "  " else said

    return NAME.sub(swap, text)


def for_readers(frame: pd.DataFrame) -> pd.DataFrame:
    """A table with its column and index names, and the ids among its text values, in a reader's words."""
    say = lambda v: (name_words(v) or v) if isinstance(v, str) else v  # noqa: E731 (one use, below)
    shown = frame.rename(columns=say, index=say)
    shown.columns = shown.columns.set_names([say(n) for n in shown.columns.names])
    shown.index = shown.index.set_names([say(n) for n in shown.index.names])
    for column in shown.columns:
        if not pd.api.types.is_numeric_dtype(shown[column]):  # text held as object or as pandas' str
            shown[column] = shown[column].map(say)
    return shown
