"""The record's columns: the one place their names are spelled, and the typed parts they come in.

A record is one flat row (`records.record.make_record` builds it, `records.store.append` stores it). Its core
columns are named here; a measurement's timing (`Timing`) and per-operator breakdown
(`Breakdown`) are written and read back through these types, so no other module spells
`op_<name>_ms` or parses it.
"""

import dataclasses
import statistics

# Labels and identity.
STUDY, VARIANT, REPEAT, POINT, ORDER = "study", "variant", "repeat", "point", "order"
CONFIG_NAME, CONFIG_HASH = "config_name", "config_hash"
MACHINE, THREADS, RUN_ID, RULES_HASH = "machine", "threads", "run_id", "rules_hash"
# The code that measured a record (`provenance.code_fingerprint`) and which of a study's runs it belongs to
# (1..RUNS, `runner.schedule`): both part of the resume key.
CODE_FINGERPRINT, RUN_SLOT = "code_fingerprint", "run_slot"
# How a record was measured (`PROTOCOL_VERSION` in new records; none: protocol 1) and by which process: protocol 2
# measures each run of a study in a process of its own (`studies.runs`), each variant warmed up untimed until its
# step time settles (`measure.settle`), so every timed repeat counts. Protocol 1 measured a study's runs one after
# the other in one process, repeat 0 of each run a warm-up the analysis dropped.
PROTOCOL, PROCESS_ID = "protocol", "process_id"
PROTOCOL_VERSION = 2
# The invocation of a multi-process comparison (`make compare-upstream`): its records pair only with each other.
INVOCATION = "invocation"
TIMESTAMP, GIT_COMMIT, DEVICE = "timestamp", "git_commit", "device"
FLAGS, ERROR = "flags", "error"
# Timing.
MS_MEDIAN, MS_P10, MS_P90, SAMPLES_PER_S = "ms_median", "ms_p10", "ms_p90", "samples_per_s"
INPUT_MS_MEDIAN, COMPUTE_MS_MEDIAN, ROOFLINE_MS = "input_ms_median", "compute_ms_median", "roofline_ms"
# What ran: the loop and its settings, as the measurement recorded them (not the config's columns).
LOOP, PRECISION, PRECISION_LABEL, NATIVE_BF16 = "loop", "precision", "precision_label", "native_bf16"
TOP_KERNELS = "top_kernels"  # a GPU profile's slowest kernels: JSON [name, launches, µs] per step
TRAIN_LOOP = "train.loop"  # the config's loop: what a record's code fingerprint is of (`records.code_identity`)
SPARSE_ARCH, PLACEMENT, KERNEL_PATH, CAPTURE = "sparse_arch", "placement", "kernel_path", "capture"
# A lending's numerics check (`lending.numerics`): per shape and kernel, whether the GPU's kernel matched its stand-in.
NUMERICS_PASSED = "numerics_passed"
BATCH_SIZE, STEPS, WARMUP, BUILDS = "batch_size", "steps", "warmup", "builds"
# Distributed runs: how many ranks, and how the tables' rows reached them.
WORLD_SIZE, ROUTE = "world_size", "route"
# Training quality: the convergence records (one row per logged step or eval) and a run's last loss.
KIND, STEP, LOSS, EVAL_AUC, FINAL_LOSS = "kind", "step", "loss", "eval_auc", "final_loss"
# Sweeps: the grid point a record belongs to.
GRID, SWEEP_POINT = "grid", "sweep_point"
# Provenance that readers filter or caption by (the rest: `record.PROVENANCE`).
PACKAGE_VERSION, CPU_MODEL, CPU_COUNT = "package_version", "cpu_model", "cpu_count"
DEVICE_NAME, GPU_MODEL = "device_name", "gpu_model"

# Operators of the per-operator breakdown, in the order a step runs them.
OPERATORS = (
    "bottom_mlp",
    "embedding_forward",
    "interaction",
    "top_mlp",
    "loss",
    "dense_backward",
    "embedding_backward_update",
    "optimizer_step",
    "other",
)
_OP_PREFIX, _OP_SUFFIX = "op_", "_ms"


def op_column(name: str) -> str:
    """`embedding_forward` -> `op_embedding_forward_ms`."""
    return f"{_OP_PREFIX}{name}{_OP_SUFFIX}"


def bound_column(name: str) -> str:
    """`embedding_forward` -> `roofline_op_embedding_forward_ms`: the operator's share of the roofline bound."""
    return f"roofline_{op_column(name)}"


def op_name(column: str) -> str | None:
    """`op_embedding_forward_ms` -> `embedding_forward`; None for a column that is no operator's."""
    if column.startswith(_OP_PREFIX) and column.endswith(_OP_SUFFIX):
        return column[len(_OP_PREFIX) : -len(_OP_SUFFIX)]
    return None


def op_label(column: str) -> str:
    """`op_embedding_forward_ms` -> `embedding forward` (for captions and sentences)."""
    return (op_name(column) or column).replace("_", " ")


OP_COLUMNS = tuple(op_column(name) for name in OPERATORS)


@dataclasses.dataclass(frozen=True)
class Timing:
    """A measurement's timed steps: median, p10 and p90 (ms), and samples/s at the median."""

    ms_median: float
    ms_p10: float
    ms_p90: float
    samples_per_s: float

    @classmethod
    def of_steps(cls, step_ms: list[float], batch_size: int) -> "Timing":
        median = statistics.median(step_ms)
        return cls(median, quantile(step_ms, 0.1), quantile(step_ms, 0.9), samples_per_s(batch_size, median / 1e3))

    def fields(self) -> dict[str, float]:
        return {MS_MEDIAN: self.ms_median, MS_P10: self.ms_p10, MS_P90: self.ms_p90, SAMPLES_PER_S: self.samples_per_s}


@dataclasses.dataclass(frozen=True)
class Breakdown:
    """Mean ms per step of each operator (empty: no breakdown was profiled)."""

    ms: dict[str, float]

    def fields(self) -> dict[str, float]:
        return {op_column(name): value for name, value in self.ms.items()}

    @classmethod
    def from_row(cls, row: dict[str, object]) -> "Breakdown":
        """The operators a row carries (cells left empty by a record without a breakdown are skipped)."""
        found = {}
        for column, value in row.items():
            name = op_name(column)
            if name is not None and value is not None and value == value and value != "":
                found[name] = float(value)  # type: ignore[arg-type]
        return cls(found)


def samples_per_s(samples: float, seconds: float) -> float:
    """The `samples_per_s` column: samples trained over the seconds they took (NaN for no time)."""
    return samples / seconds if seconds > 0 else float("nan")


def quantile(values: list[float], q: float) -> float:
    """The q-quantile by linear interpolation (what numpy calls 'linear')."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
