"""The fused CPU sparse arch: SC20's embedding techniques.

- Table-batched: all tables in one matrix, one kernel call looks up every bag
  (`table_batching=False`: one call per table, for the ablation).
- Backward fused with the update (SGD or row-wise Adagrad): the pooled-output
  gradient goes straight into the weights, with no sparse or dense gradient tensor.
- Race-free threading: each thread owns a contiguous range of rows (see the C++).
- Precision fp32, or bf16 with Split-SGD: the fp32 master weight stored as its upper
  16 bits (the bf16 weight used by forward and backward) and its lower 16 bits, side by
  side in one row ([hi | lo], `weight_split`): forward reads the first half of a row, an
  update reads and writes one row, so each id is one random access, not two.

- Tables on transparent huge pages where the OS allows (`huge_pages=False`: 4 KiB pages).

The kernels are C++ when a compiler is present, PyTorch otherwise (`kernel_path` says which).
"""

import torch

from dlrm_study.config import Precision
from dlrm_study.data.batch import StagedBatch, batched_ids
from dlrm_study.model import kernels
from dlrm_study.model.kernels import torch_ops
from dlrm_study.model.tables import hugepages
from dlrm_study.model.tables.base import FusedLookup, SparseArch, TableSpec, uniform_table

ADAGRAD_EPS = 1e-8


class FusedCPUSparseArch(SparseArch):
    name = "fused-cpu"
    # State-dict layout 2: a bf16 table is one [hi | lo] matrix, `weight_split` (1: `weight_hi`, `weight_lo`).
    _version = 2

    def __init__(
        self, spec: TableSpec, generator: torch.Generator, table_batching: bool = True, huge_pages: bool = True
    ) -> None:
        super().__init__(spec)
        table_rows, dim, optimizer, precision = list(spec.rows), spec.dim, spec.optimizer, spec.precision
        self.lr, self.optimizer, self.precision = spec.lr, optimizer, precision
        self.table_batching = table_batching
        starts = torch.tensor([0, *table_rows[:-1]]).cumsum(0)
        self.register_buffer("table_starts", starts, persistent=False)
        total = sum(table_rows)
        empty = hugepages.empty if huge_pages else torch.empty
        if precision == Precision.BF16:
            self.register_buffer("weight_split", empty(total, 2 * dim, dtype=torch.int16))
        else:
            self.register_buffer("weight", empty(total, dim))
        for start, rows in zip(starts.tolist(), table_rows, strict=True):  # table by table: no full fp32 copy
            self.set_rows(start, uniform_table(rows, dim, generator))
        if optimizer == "rowwise_adagrad":
            self.register_buffer("momentum", empty(total).zero_())
        # Gives the autograd function an input that requires grad, so backward reaches it.
        self.anchor = torch.zeros((), requires_grad=True)
        self.ops = kernels.cpu_ops()

    @property
    def kernel_path(self) -> str:
        return self.ops.NAME

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, *args) -> None:
        """Read a bf16 table saved as two arrays (layout 1: `weight_hi`, `weight_lo`) into its [hi | lo] rows."""
        hi, lo = prefix + "weight_hi", prefix + "weight_lo"
        if self.precision == Precision.BF16 and hi in state_dict and lo in state_dict:
            state_dict[prefix + "weight_split"] = torch.cat([state_dict.pop(hi), state_dict.pop(lo)], dim=1)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, *args)

    def forward(self, indices: list[torch.Tensor], offsets: list[torch.Tensor]) -> torch.Tensor:
        ids, bag_starts = batched_ids(indices, offsets, self.table_starts.tolist())
        return FusedLookup.apply(self.anchor, self, ids, bag_starts, offsets[0].numel())

    def staged(self, batch: StagedBatch) -> torch.Tensor:
        """Pooled embeddings of a batch staged when it was made (a benchmark's ring): ids stacked and checked."""
        # The kernels read int64 ids; staging packs them as int32 where they fit (for the GPU's sort).
        # A benchmark's ring casts once when made, so here `long()` is no copy.
        return FusedLookup.apply(self.anchor, self, batch.ids.long(), batch.bag_starts, batch.size)

    def set_rows(self, start: int, weights: torch.Tensor) -> None:
        """Write fp32 master weights into rows start, start + 1, ..."""
        rows = slice(start, start + len(weights))
        if self.precision == Precision.BF16:
            self.weight_split[rows] = torch_ops.interleave(weights)
        else:
            self.weight[rows] = weights

    def pooled(self, ids: torch.Tensor, bag_starts: torch.Tensor, batch: int) -> torch.Tensor:
        if not self.table_batching:
            return torch.cat([self.pooled_tables(i, o, batch, 1) for i, o in each_table(ids, bag_starts, batch)], 1)
        return self.pooled_tables(ids, bag_starts, batch, len(self.table_rows))

    def pooled_tables(self, ids: torch.Tensor, bag_starts: torch.Tensor, batch: int, tables: int) -> torch.Tensor:
        if self.precision == Precision.BF16:
            return self.ops.forward_bf16(torch_ops.upper(self.weight_split), ids, bag_starts, batch, tables)
        return self.ops.forward_fp32(self.weight, ids, bag_starts, batch, tables)

    def apply_update(self, ids: torch.Tensor, bag_starts: torch.Tensor, grad: torch.Tensor, batch: int) -> None:
        """The fused backward: gradient of the pooled output -> updated rows."""
        grad = grad.float()
        if not self.table_batching:
            for t, (table_ids, starts) in enumerate(each_table(ids, bag_starts, batch)):
                self.update_tables(table_ids, starts, grad[:, t : t + 1].contiguous(), batch, 1)
            return
        self.update_tables(ids, bag_starts, grad.contiguous(), batch, len(self.table_rows))

    def update_tables(self, ids: torch.Tensor, bag_starts: torch.Tensor, grad: torch.Tensor, batch: int,
                      tables: int) -> None:  # fmt: skip
        ops = self.ops
        if self.optimizer == "rowwise_adagrad":
            eps = ADAGRAD_EPS
            if self.precision == Precision.BF16:
                ops.rowwise_adagrad_split_bf16(
                    self.weight_split, self.momentum, ids, bag_starts, grad, self.lr, eps, batch, tables
                )
            else:
                ops.rowwise_adagrad_fp32(self.weight, self.momentum, ids, bag_starts, grad, self.lr, eps, batch, tables)
        elif self.precision == Precision.BF16:
            ops.sgd_split_bf16(self.weight_split, ids, bag_starts, grad, self.lr, batch, tables)
        else:
            ops.sgd_fp32(self.weight, ids, bag_starts, grad, self.lr, batch, tables)

    def master_weight(self) -> torch.Tensor:
        """All tables' fp32 master weights, (total rows, dim)."""
        if self.precision == Precision.BF16:
            return torch_ops.master(self.weight_split)
        return self.weight

    def tables(self) -> list[torch.Tensor]:
        return list(self.master_weight().split(self.table_rows))

    @torch.no_grad()
    def set_tables(self, weights: list[torch.Tensor]) -> None:
        for start, weight in zip(self.table_starts.tolist(), weights, strict=True):
            self.set_rows(start, weight)

    def accumulators(self) -> list[torch.Tensor] | None:
        if self.optimizer != "rowwise_adagrad":
            return None
        return [part.clone() for part in self.momentum.split(self.table_rows)]

    @torch.no_grad()
    def set_accumulators(self, values: list[torch.Tensor]) -> None:
        if self.optimizer != "rowwise_adagrad":
            super().set_accumulators(values)
        self.momentum.copy_(torch.cat(values))  # in place: the buffer may sit on huge pages


def each_table(ids: torch.Tensor, bag_starts: torch.Tensor, batch: int):
    """Each table's ids and bag starts (from 0), out of the table-major batched ones."""
    for t in range((len(bag_starts) - 1) // batch):
        starts = bag_starts[t * batch : (t + 1) * batch + 1]
        first = int(starts[0])
        yield ids[first : int(starts[-1])], starts - first
