"""The sparse-arch seam: how embedding tables are stored, looked up and updated.

Every variant (reference, fused CPU, torchrec, GPU placements) implements `SparseArch`,
so the model and the training loop never change when it is swapped. What an arch provides:

- **lookup**: `forward(indices, offsets)` (through `__call__`, which checks the ids first, so
  no kernel ever sees one outside its table) or `lookup(batch)`, the pooled embeddings
  (batch, tables, dim); kernel archs also take a staged batch (`staged`);
- **update**: inside backward (fused archs) or in `update()`, which the loop calls after
  `loss.backward()` every step; `clear_grad()` before the next backward;
- **state**: `tables()` / `set_tables()`, and `accumulators()` / `set_accumulators()` for
  row-wise Adagrad (checkpoints and distributed runs move them by table);
- **what ran**: `name`, `placement`, `kernel_path` (the kernel module's `NAME`).

Everything else is the measurement's: archs that count something (a cache's hits) have `counters()`
(`measure.timing.counters`), the profiler tells embedding backward by autograd node name
(`measure.cpu.EMBEDDING_BACKWARD`), and an arch whose step a CUDA graph can capture says so
(`train.gpu.Capturable`).

Archs whose backward is their update implement `FusedTables` (`pooled`, `apply_update`)
and run through `FusedLookup`, the one autograd function that joins the two.
"""

import dataclasses
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import torch
from torch import nn

from dlrm_study.config import Config, Precision
from dlrm_study.data.batch import Batch, StagedBatch, check_ids

CPU = torch.device("cpu")


@dataclasses.dataclass(frozen=True)
class TableSpec:
    """What a sparse arch is built from, for all its tables at once (torchrec's `EmbeddingBagConfig`s):
    each table's rows, the common dimension, how the tables learn, their precision and device."""

    rows: tuple[int, ...]
    dim: int
    lr: float = 0.01
    optimizer: str = "sgd"  # sgd | rowwise_adagrad
    precision: Precision = Precision.FP32
    device: torch.device = CPU

    @classmethod
    def of(cls, cfg: Config, device: torch.device | None = None) -> "TableSpec":
        m, t = cfg.model, cfg.train
        return cls(tuple(m.table_rows), m.embedding_dim, t.learning_rate, t.optimizer, t.precision, device or CPU)

    def only(self, tables: Sequence[int]) -> "TableSpec":
        """The spec of some of the tables (a placement's group, a rank's shard), in the order given."""
        return dataclasses.replace(self, rows=tuple(self.rows[i] for i in tables))

    def but(self, **changes: object) -> "TableSpec":
        return dataclasses.replace(self, **changes)


class SparseArch(nn.Module):
    """Pooled embedding lookups for all tables, and their update."""

    name: str = "abstract"
    #: Where the tables live: "device" (the training device's memory) unless a
    #: placement says otherwise (host, uvm, cached, remote).
    placement: str = "device"
    #: Which implementation ran the hot kernels (recorded with every measurement).
    kernel_path: str = "aten"
    #: Where the loop should put the batch's ids (None: the training device).
    ids_device: torch.device | None = None

    def __init__(self, spec: TableSpec) -> None:
        super().__init__()
        self.spec = spec
        self.table_rows = list(spec.rows)
        self.dim = spec.dim

    def __call__(self, indices: list[torch.Tensor], offsets: list[torch.Tensor]) -> torch.Tensor:
        self.check_ids(indices)
        return super().__call__(indices, offsets)

    def forward(self, indices: list[torch.Tensor], offsets: list[torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def check_ids(self, indices: list[torch.Tensor]) -> None:
        """Refuse a batch with an id outside [0, rows) of its table (UsageError naming both).

        Here, before any lookup, because the archs' kernels disagree: the C++, Triton and
        fbgemm (torchrec) ones take such an id without a word (a neighbour table's row, memory
        past the end, or a skipped update), aten raises its own error. The cost: one min and
        max per table and one host sync per batch (on a GPU, it waits for the ids' copy), which
        is why the gpu loop's staged batches are checked when they are made (`data.stage`) instead.
        """
        check_ids(indices, self.table_rows)

    def lookup(self, batch: Batch | StagedBatch) -> torch.Tensor:
        """The pooled embeddings of a batch: per-table bags through `__call__` (checked there), or a
        staged batch (checked when it was staged) through `staged`."""
        if isinstance(batch, StagedBatch):
            return self.staged(batch)
        return self(batch.indices, batch.offsets)

    def staged(self, batch: StagedBatch) -> torch.Tensor:
        """Pooled embeddings of a staged batch (only the kernel archs read that layout)."""
        raise TypeError(f"the {type(self).__name__} takes per-table bags, not staged batches")

    def update(self) -> None:
        """Apply this step's update to the tables (a no-op where backward already did)."""

    def clear_grad(self) -> None:
        """Forget the previous step's gradients before the next backward."""

    def tables(self) -> list[torch.Tensor]:
        """Each table's weights as fp32 (rows, dim), for checks and comparisons."""
        raise NotImplementedError

    @torch.no_grad()
    def set_tables(self, weights: list[torch.Tensor]) -> None:
        """Overwrite each table with fp32 weights (rows, dim): a checkpoint's, or another arch's."""
        raise NotImplementedError(f"{type(self).__name__} cannot load tables")

    def accumulators(self) -> list[torch.Tensor] | None:
        """Each table's row-wise Adagrad accumulator, (rows,) in table order (copies); None under SGD.

        Distributed checkpoints gather them by table, as the tables, so a run split over ranks
        resumes exactly on any number of ranks or in one process.
        """
        return None

    @torch.no_grad()
    def set_accumulators(self, values: list[torch.Tensor]) -> None:
        """Overwrite each table's accumulator with `values` (as `accumulators` returns them)."""
        raise TypeError(f"the {type(self).__name__} keeps no row-wise Adagrad accumulators")

    def close(self) -> None:
        """Release what the arch holds outside this process (a parameter server's shards)."""


@runtime_checkable
class Counted(Protocol):
    """An arch that counts something worth a column in its records (a cache's hits and evictions)."""

    def counters(self) -> dict[str, float]:
        """The counts since the last call (reading resets them)."""
        ...


def counters(arch: nn.Module) -> dict[str, float]:
    """An arch's counters since they were last read; {} for the archs that count nothing."""
    return arch.counters() if isinstance(arch, Counted) else {}


class FusedTables(Protocol):
    """Tables whose backward is their update: the fused CPU and the GPU kernel archs.

    `ids` index the stacked tables and `bag_starts` holds the T*B+1 bag starts (table-major),
    as `data.batch.batched_ids` and staged batches lay them out.
    """

    def pooled(self, ids: torch.Tensor, bag_starts: torch.Tensor, batch: int) -> torch.Tensor:
        """The pooled embeddings, (batch, tables, dim)."""
        ...

    def apply_update(self, ids: torch.Tensor, bag_starts: torch.Tensor, grad: torch.Tensor, batch: int) -> None:
        """The optimizer's update of the looked-up rows from the pooled output's gradient."""
        ...


class FusedLookup(torch.autograd.Function):
    """Forward: `arch.pooled(...)`. Backward: `arch.apply_update(...)`, the update itself (`FusedTables`).

    No gradient flows further, and none is stored: the pooled-output gradient goes straight
    into the weights. `anchor` is a scalar that requires grad, so backward reaches this node.
    """

    @staticmethod
    def forward(ctx, anchor, arch: FusedTables, ids, bag_starts, batch: int):
        ctx.arch, ctx.batch = arch, batch
        ctx.save_for_backward(ids, bag_starts)
        return arch.pooled(ids, bag_starts, batch)

    @staticmethod
    def backward(ctx, grad):
        ids, bag_starts = ctx.saved_tensors
        ctx.arch.apply_update(ids, bag_starts, grad, ctx.batch)
        return None, None, None, None, None


def uniform_table(rows: int, dim: int, generator: torch.Generator) -> torch.Tensor:
    """facebookresearch/dlrm's table init: U(-sqrt(1/rows), sqrt(1/rows))."""
    bound = (1.0 / rows) ** 0.5
    return torch.empty(rows, dim).uniform_(-bound, bound, generator=generator)


def draw_tables(
    table_rows: list[int], dim: int, generator: torch.Generator, keep: set[int] | frozenset[int] = frozenset()
) -> list[torch.Tensor]:
    """Every table's init drawn from `generator` in table order, as one process draws them;
    the tables in `keep` are returned (in table order), the others dropped one at a time.

    Where the tables are split (ranks, parameter servers), this keeps each part's initial
    values, and the generator's state after them, equal to a single process's.
    """
    kept = []
    for table, rows in enumerate(table_rows):
        weights = uniform_table(rows, dim, generator)
        if table in keep:
            kept.append(weights)
    return kept
