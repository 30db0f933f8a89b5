"""The one batch type every loop consumes."""

from collections.abc import Callable
from dataclasses import dataclass

import torch


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
