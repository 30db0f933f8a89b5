"""The `cached` placement: a cache of hot rows in device memory over tables in host memory.

Every step, before the lookup, the rows the batch needs are made resident: misses take the
slots of the least recently (LRU) or least frequently (LFU) used rows the batch does not
need; the evicted rows are written back to the host tables (with their Adagrad state), and
the missing rows are copied in. Lookup and fused update then run on the cache exactly as
the `hbm` placement runs on whole tables, so both train the same parameters.

Book-keeping is on the device: `row_slot` (8 bytes per table row: the slot holding the row,
or -1) and, per slot, the row it holds and its LRU/LFU score. On a GPU the row copies are
Triton kernels reading and writing pinned host memory directly; elsewhere PyTorch indexing.
The hit rate counts looked-up ids found in the cache before this step's fill; evicted rows
count the rows written back.
"""

import math

import torch

from dlrm_study.errors import UsageError
from dlrm_study.model.tables.base import TableSpec
from dlrm_study.model.tables.device_tables import ADAGRAD_EPS, KernelTablesArch, stacked_tables

POLICIES = ("lru", "lfu")


class CachedSparseArch(KernelTablesArch):
    name = "cached"
    placement = "cached"
    capture_blocker = (
        "cached: which rows miss, and so how many rows move and which slots they take, is learnt "
        "from the batch on the host each step (torch.unique, nonzero); a fixed-size version "
        "(sort-based unique and top-k over the batch's worst case) would be capturable"
    )

    def __init__(
        self, spec: TableSpec, generator: torch.Generator, fraction: float, policy: str = "lru", bag_size: int = 0
    ) -> None:
        super().__init__(spec, bag_size)
        table_rows, dim, optimizer, device = list(spec.rows), spec.dim, spec.optimizer, spec.device
        self.lr, self.optimizer, self.policy = spec.lr, optimizer, policy
        total = sum(table_rows)
        self.capacity = cache_slots(total, fraction)
        host = {"pin_memory": True} if device.type == "cuda" else {}
        on_device = {"device": device}
        self.register_buffer("host_weight", stacked_tables(table_rows, dim, generator, **host))
        self.register_buffer("cache_weight", torch.zeros(self.capacity, dim, **on_device))
        if optimizer == "rowwise_adagrad":
            self.register_buffer("host_momentum", torch.zeros(total, 1, **host))
            self.register_buffer("cache_momentum", torch.zeros(self.capacity, 1, **on_device))
        self.register_buffer("row_slot", torch.full((total,), -1, dtype=torch.int64, **on_device))
        self.register_buffer("slot_row", torch.full((self.capacity,), -1, dtype=torch.int64, **on_device))
        # Empty slots score -1 so they are taken first; a used slot scores its last step (LRU)
        # or its use count (LFU).
        self.register_buffer("score", torch.full((self.capacity,), -1, dtype=torch.int64, **on_device))
        self.register_buffer("clock", torch.zeros((), dtype=torch.int64, **on_device))
        self.register_buffer("lookups", torch.zeros((), dtype=torch.int64, **on_device))
        self.register_buffer("hits", torch.zeros((), dtype=torch.int64, **on_device))
        self.register_buffer("evictions", torch.zeros((), dtype=torch.int64, **on_device))

    def rows_of(self, ids: torch.Tensor, bag_starts: torch.Tensor) -> torch.Tensor:
        # A staged batch's padding is no lookup (a host read: see capture_blocker); slots are int64.
        ids = ids[: int(bag_starts[-1])].long()
        if self.training:
            return self.make_resident(ids)
        return self.read_in_place(ids)

    def read_in_place(self, ids: torch.Tensor) -> torch.Tensor:
        """Evaluation: each row read where it lives (cache or host), the cache and its counters untouched.

        The batch's distinct rows are gathered into `eval_weight`; returns each id's row in it.
        """
        rows, inverse = torch.unique(ids, return_inverse=True)
        slots = self.row_slot[rows]
        weight = self.host_weight[rows.to(self.host_weight.device)].to(self.cache_weight.device)
        held = slots >= 0
        weight[held] = self.cache_weight[slots[held]]
        self.eval_weight = weight
        return inverse

    def make_resident(self, ids: torch.Tensor) -> torch.Tensor:
        """Bring every row `ids` names into the cache; return each id's slot."""
        rows, inverse, counts = torch.unique(ids, return_inverse=True, return_counts=True)
        if len(rows) > self.capacity:
            raise UsageError(
                f"a batch touches {len(rows)} distinct rows but the cache holds {self.capacity}: "
                "raise train.cache_fraction"
            )
        slots = self.row_slot[rows]
        self.lookups += len(ids)
        self.hits += (counts * (slots >= 0)).sum()
        missing = (slots < 0).nonzero().squeeze(1)
        if len(missing):
            slots[missing] = self.evict(slots, len(missing))
            self.fill(rows[missing], slots[missing])
        self.clock += 1
        if self.policy == "lru":
            self.score[slots] = self.clock
        else:
            self.score[slots] += counts
        return slots[inverse]

    def evict(self, slots: torch.Tensor, count: int) -> torch.Tensor:
        """`count` victim slots (not needed by this batch), their rows written back home."""
        score = self.score.clone()
        score[slots[slots >= 0]] = torch.iinfo(torch.int64).max  # this batch's rows stay
        victims = torch.topk(score, count, largest=False).indices
        old = self.slot_row[victims]
        held = old >= 0
        self.evictions += held.sum()
        self.ops.copy_rows(self.cache_weight, victims[held], self.host_weight, old[held])
        if self.optimizer == "rowwise_adagrad":
            self.ops.copy_rows(self.cache_momentum, victims[held], self.host_momentum, old[held])
        self.row_slot[old[held]] = -1
        self.slot_row[victims] = -1
        self.score[victims] = 0 if self.policy == "lfu" else -1
        return victims

    def fill(self, rows: torch.Tensor, slots: torch.Tensor) -> None:
        self.ops.copy_rows(self.host_weight, rows, self.cache_weight, slots)
        if self.optimizer == "rowwise_adagrad":
            self.ops.copy_rows(self.host_momentum, rows, self.cache_momentum, slots)
        self.slot_row[slots] = rows
        self.row_slot[rows] = slots

    def pooled(self, slots: torch.Tensor, bag_starts: torch.Tensor, batch: int) -> torch.Tensor:
        weight = self.cache_weight if self.training else self.eval_weight
        return self.ops.forward_fp32(weight, slots, bag_starts, batch, len(self.table_rows))

    def apply_update(self, slots: torch.Tensor, bag_starts: torch.Tensor, grad: torch.Tensor, batch: int) -> None:
        momentum = getattr(self, "cache_momentum", None)
        momentum = None if momentum is None else momentum.view(-1)
        tables = len(self.table_rows)
        self.ops.update_fp32(
            self.cache_weight, momentum, slots, bag_starts, grad, self.lr, ADAGRAD_EPS, batch, tables, self.bag_size
        )

    def tables(self) -> list[torch.Tensor]:
        """The host tables with the cached rows (the newer copies) laid over them."""
        weight = self.host_weight.detach().cpu().clone()
        held = (self.slot_row >= 0).nonzero().squeeze(1)
        weight[self.slot_row[held].cpu()] = self.cache_weight[held].cpu()
        return list(weight.split(self.table_rows))

    def counters(self) -> dict[str, float]:
        lookups, hits, evictions = int(self.lookups), int(self.hits), int(self.evictions)
        for counter in (self.lookups, self.hits, self.evictions):
            counter.zero_()
        return {
            "cache_slots": self.capacity,
            "cache_hit_rate": hits / lookups if lookups else math.nan,
            "cache_evicted_rows": evictions,
        }


def cache_slots(total_rows: int, fraction: float) -> int:
    """Slots for `fraction` of all rows (at least one)."""
    return max(1, math.ceil(fraction * total_rows))
