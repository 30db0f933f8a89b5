"""The sparse-arch seam: how embedding tables are stored, looked up and updated.

Every variant (reference, fused CPU, torchrec, GPU placements) implements this one
interface, so the model and the training loop never change when it is swapped:

- `forward(indices, offsets)` returns the pooled embeddings, (batch, tables, dim);
  every call checks the ids first (`check_ids`), so no kernel ever sees one outside its table;
- the update happens either inside backward (fused variants) or in `update()`,
  which the loop calls after `loss.backward()` every step.
"""

import torch
from torch import nn

from dlrm_study.errors import UsageError


class SparseArch(nn.Module):
    """Pooled embedding lookups for all tables, and their update."""

    name: str = "abstract"
    #: Where the tables live: "device" (the training device's memory) unless a
    #: placement says otherwise (host, uvm, cached, remote).
    placement: str = "device"
    #: Which implementation ran the hot kernels (recorded with every measurement).
    kernel_path: str = "aten"
    #: Substring of the autograd node names of this arch's backward, so the
    #: per-operator breakdown can tell embedding backward from dense backward.
    backward_node: str = "Embedding"
    #: Where the loop should put the batch's ids (None: the training device).
    ids_device: torch.device | None = None

    def __init__(self, table_rows: list[int], dim: int) -> None:
        super().__init__()
        self.table_rows = list(table_rows)
        self.dim = dim

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
        max per table and one host sync per batch (on a GPU, it waits for the ids' copy).
        """
        tables = [t for t, ids in enumerate(indices) if ids.numel()]
        if not tables:
            return
        bounds = torch.stack([torch.stack(torch.aminmax(indices[t])) for t in tables]).tolist()
        for t, (low, high) in zip(tables, bounds, strict=True):
            if low < 0 or high >= self.table_rows[t]:
                raise UsageError(out_of_range(t, low if low < 0 else high, self.table_rows[t]))

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

    def stats(self) -> dict[str, float]:
        """Counters worth a column in the record (a cache's hit rate, say); reset by the call."""
        return {}

    def close(self) -> None:
        """Release what the arch holds outside this process (a parameter server's shards)."""


def out_of_range(table: int, bad_id: int, rows: int) -> str:
    """The one-line refusal of an id outside its table."""
    return f"id {bad_id} in table {table} is out of range: the table has {rows} rows (ids 0 to {rows - 1})"


def batched_ids(
    indices: list[torch.Tensor], offsets: list[torch.Tensor], table_starts: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-table bags -> ids into the stacked tables and the T*B+1 bag starts (table-major)."""
    ids = torch.cat([ids + start for ids, start in zip(indices, table_starts, strict=True)])
    sizes = [0]
    for table_ids in indices[:-1]:
        sizes.append(sizes[-1] + len(table_ids))
    ends = ids.new_tensor([len(ids)])
    bag_starts = torch.cat([offs + size for offs, size in zip(offsets, sizes, strict=True)] + [ends])
    return ids, bag_starts


class FusedLookup(torch.autograd.Function):
    """Forward: `arch.pooled(...)`. Backward: `arch.apply_update(...)`, the update itself.

    No gradient flows further, and none is stored: the pooled-output gradient goes straight
    into the weights. `anchor` is a scalar that requires grad, so backward reaches this node.
    """

    @staticmethod
    def forward(ctx, anchor, arch, ids, bag_starts, batch: int):
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
