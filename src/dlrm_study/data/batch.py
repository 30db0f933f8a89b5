"""The batch types: `Batch` (per-table bags, what every loop consumes) and `StagedBatch`
(the same batch laid out for the GPU kernel archs, validated where it is made)."""

import itertools
from collections.abc import Callable
from dataclasses import dataclass, fields

import torch

from dlrm_study.errors import UsageError


@dataclass
class Batch:
    """Dense features, per-table bags of ids (dlrm layout), and click labels.

    `indices[t]` holds the ids of table t for the whole batch, bag after bag;
    `offsets[t][i]` is where sample i's bag starts in it (no trailing offset).
    """

    dense: torch.Tensor  # (B, dense_features) float32
    indices: list[torch.Tensor]  # per table, int64
    offsets: list[torch.Tensor]  # per table, (B,) int64
    labels: torch.Tensor  # (B,) float32 in {0, 1}

    @property
    def size(self) -> int:
        return self.dense.shape[0]

    def tensors(self) -> list[torch.Tensor]:
        return [self.dense, *self.indices, *self.offsets, self.labels]

    def lengths(self, table: int) -> torch.Tensor:
        """Bag sizes of one table, (B,)."""
        return bag_lengths(self.indices[table], self.offsets[table])

    def map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> "Batch":
        """The same batch with `fn` applied to every tensor."""
        return Batch(fn(self.dense), [fn(i) for i in self.indices], [fn(o) for o in self.offsets], fn(self.labels))

    def to(
        self, device: torch.device | str, ids_device: torch.device | str | None = None, non_blocking: bool = False
    ) -> "Batch":
        """The batch on `device`, its ids and offsets on `ids_device` (default: `device`)."""
        ids_device = ids_device or device

        def move(t: torch.Tensor, where) -> torch.Tensor:
            return t.to(where, non_blocking=non_blocking)

        return Batch(
            move(self.dense, device),
            [move(i, ids_device) for i in self.indices],
            [move(o, ids_device) for o in self.offsets],
            move(self.labels, device),
        )

    def pin_memory(self) -> "Batch":
        return self.map(torch.Tensor.pin_memory)

    def to_kjt(self, keys: list[str] | None = None):
        """The sparse part as torchrec's KeyedJaggedTensor (keys `t0`, `t1`, ... by default)."""
        keys = keys or [f"t{t}" for t in range(len(self.indices))]
        return to_kjt(keys, self.indices, self.offsets)


def bag_lengths(ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Bag sizes from the bag starts (dlrm offsets, no trailing one)."""
    return torch.diff(offsets, append=offsets.new_tensor([ids.numel()]))


def to_kjt(keys: list[str], indices: list[torch.Tensor], offsets: list[torch.Tensor]):
    """Per-table bags as torchrec's KeyedJaggedTensor (key-major: all of table 0, then 1, ...)."""
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

    lengths = [bag_lengths(ids, offs) for ids, offs in zip(indices, offsets, strict=True)]
    return KeyedJaggedTensor(keys=keys, values=torch.cat(indices), lengths=torch.cat(lengths))


def out_of_range(table: int, bad_id: int, rows: int) -> str:
    """The one-line refusal of an id outside its table."""
    return f"id {bad_id} in table {table} is out of range: the table has {rows} rows (ids 0 to {rows - 1})"


def check_ids(indices: list[torch.Tensor], table_rows: list[int]) -> None:
    """Refuse ids outside [0, rows) of their table (UsageError naming id, table and rows).

    One min and max per table and one read of them: a host sync where the ids live on a GPU,
    none where they are still on the host (a batch being staged).
    """
    tables = [t for t, ids in enumerate(indices) if ids.numel()]
    if not tables:
        return
    bounds = torch.stack([torch.stack(torch.aminmax(indices[t])) for t in tables]).tolist()
    for t, (low, high) in zip(tables, bounds, strict=True):
        if low < 0 or high >= table_rows[t]:
            raise UsageError(out_of_range(t, low if low < 0 else high, table_rows[t]))


def table_starts(table_rows: list[int]) -> list[int]:
    """Each table's first row in the tables stacked one after another."""
    return [0, *itertools.accumulate(table_rows[:-1])]


def batched_ids(
    indices: list[torch.Tensor], offsets: list[torch.Tensor], starts: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-table bags -> ids into the stacked tables and the T*B+1 bag starts (table-major)."""
    ids = torch.cat([ids + start for ids, start in zip(indices, starts, strict=True)])
    sizes = [0]
    for table_ids in indices[:-1]:
        sizes.append(sizes[-1] + len(table_ids))
    ends = ids.new_tensor([len(ids)])
    bag_starts = torch.cat([offs + size for offs, size in zip(offsets, sizes, strict=True)] + [ends])
    return ids, bag_starts


@dataclass
class StagedBatch:
    """A batch as the GPU kernel archs (hbm, uvm, cached) read it, its ids already checked.

    `ids` holds every table's ids, table after table, each offset by its table's first row in
    the stacked tables, padded to a fixed `capacity` with `padding_id` (one past the last row:
    it sorts after every real id, so the update's sort leaves it out of every real row's
    segment): every batch of a run has the same shapes, which a CUDA graph needs. `bag_starts`
    holds the T*B+1 positions of the bags (table-major) in `ids`; the last is the count of real
    ids, so no bag reaches the padding. The ids are int32 where the stacked rows allow (the
    update sorts them: half the radix passes of int64).
    """

    dense: torch.Tensor  # (B, dense_features) float32
    ids: torch.Tensor  # (capacity,) int32 (int64 past 2**31 - 1 rows)
    bag_starts: torch.Tensor  # (T*B + 1,) int64
    labels: torch.Tensor  # (B,) float32

    @property
    def size(self) -> int:
        return self.dense.shape[0]

    def tensors(self) -> list[torch.Tensor]:
        return [getattr(self, f.name) for f in fields(self)]

    def map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> "StagedBatch":
        return StagedBatch(*map(fn, self.tensors()))

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "StagedBatch":
        return self.map(lambda t: t.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> "StagedBatch":
        return self.map(torch.Tensor.pin_memory)

    def copy_(self, other: "StagedBatch") -> "StagedBatch":
        """Overwrite these buffers with `other`'s values (same shapes): how static buffers take a batch."""
        for mine, theirs in zip(self.tensors(), other.tensors(), strict=True):
            mine.copy_(theirs, non_blocking=True)
        return self


def ids_capacity(batch_size: int, table_rows: list[int], lookups_per_table: int) -> int:
    """The most ids a batch can hold: every bag at its largest."""
    return batch_size * len(table_rows) * lookups_per_table


def padding_id(table_rows: list[int]) -> int:
    """The id that pads a staged batch: one past the stacked tables' last row (no row of any table)."""
    return sum(table_rows)


def ids_dtype(table_rows: list[int]) -> torch.dtype:
    """int32 where every stacked row and the padding id fit in it, else int64."""
    return torch.int32 if padding_id(table_rows) < 2**31 else torch.int64


def stage(batch: Batch, table_rows: list[int], capacity: int, bag_size: int = 0) -> StagedBatch:
    """The batch laid out for the kernel archs, on the host, its ids checked first.

    Here, where the batch is made and before it reaches the device, the check costs no device
    sync; the step that later reads the staged batch need not check again (the CPU loops'
    archs check in `SparseArch.__call__`, where their batches arrive). `bag_size` (fixed
    pooling): every bag must hold exactly that many ids, as the update assumes (a position's
    bag is position // bag_size); a batch whose bags differ is refused here.
    """
    check_ids(batch.indices, table_rows)
    ids, bag_starts = batched_ids(batch.indices, batch.offsets, table_starts(table_rows))
    if len(ids) > capacity:
        raise UsageError(f"a batch holds {len(ids)} ids, more than the {capacity} its bags allow")
    if bag_size and not torch.equal(bag_starts, torch.arange(len(bag_starts)) * bag_size):
        raise UsageError(f"data.pooling is fixed but a batch's bags do not all hold {bag_size} ids")
    padded = torch.full((capacity,), padding_id(table_rows), dtype=ids_dtype(table_rows))
    padded[: len(ids)] = ids
    return StagedBatch(batch.dense, padded, bag_starts, batch.labels)


def fixed_bag_size(pooling: str, lookups_per_table: int) -> int:
    """The ids of every bag where pooling is fixed (the update then finds a position's bag by division), else 0."""
    return lookups_per_table if pooling == "fixed" else 0
