"""Tables read and updated by the training device's kernels: the `hbm` and `uvm` placements.

- `hbm`: the stacked tables in the device's memory.
- `uvm`: the same tables in pinned host memory, which GPU kernels (Triton) read and update
  through unified virtual addressing: no CPU work per lookup, every row crosses PCIe.

Backward is fused with the update: the ids sorted, each distinct row's gradient summed over
its repeats and the row written once (SGD or row-wise Adagrad; no atomics, fixed-size
buffers, no host read, so the step can be captured as a CUDA graph). No gradient of a table,
dense or sparse, is ever made. Kernels are Triton
where it runs (a GPU, or the interpreter on the CPU), PyTorch elsewhere (`kernel_path`).
"""

import torch

from dlrm_study.config import Placement
from dlrm_study.data.batch import StagedBatch, batched_ids, table_starts
from dlrm_study.errors import UsageError
from dlrm_study.model.kernels import torch_ops, triton_ops
from dlrm_study.model.tables.base import FusedLookup, SparseArch, TableSpec, uniform_table

ADAGRAD_EPS = 1e-8


def kernels_for(device: torch.device):
    """Triton kernels where they run for `device`, else the PyTorch twins."""
    return triton_ops if triton_ops.available(device) else torch_ops


def stacked_tables(table_rows: list[int], dim: int, generator: torch.Generator, **where) -> torch.Tensor:
    """All tables in one (rows, dim) matrix allocated as `where` says, initialised table by table."""
    weight = torch.empty(sum(table_rows), dim, **where)
    start = 0
    for rows in table_rows:  # one table at a time: never a second full copy in host memory
        weight[start : start + rows] = uniform_table(rows, dim, generator).to(weight.device)
        start += rows
    return weight


class KernelTablesArch(SparseArch):
    """Stacked tables looked up and updated by the device's kernels (`ops`) through `FusedLookup`.

    Subclasses say where the weights live (`pooled`, `apply_update`) and may remap ids to
    rows of their storage first (`rows_of`: a cache maps ids to its slots). They read staged
    batches (`data.stage`: ids stacked, checked, padded) as well as per-table bags.
    """

    #: Why a step over staged batches cannot be captured as a CUDA graph (`train.gpu.Capturable`):
    #: "" here, since its shapes are fixed and it reads nothing back to the host.
    capture_blocker = ""

    def __init__(self, spec: TableSpec, bag_size: int = 0) -> None:
        super().__init__(spec)
        table_rows, device = spec.rows, spec.device
        self.device = device
        self.bag_size = bag_size  # ids in every bag where pooling is fixed (the update's bags by division), else 0
        self.ops = kernels_for(device)
        self.table_starts = table_starts(table_rows)
        self.anchor = torch.zeros((), requires_grad=True)

    @property
    def kernel_path(self) -> str:
        return self.ops.NAME

    def forward(self, indices: list[torch.Tensor], offsets: list[torch.Tensor]) -> torch.Tensor:
        indices = [ids.to(self.device, non_blocking=True) for ids in indices]
        offsets = [offs.to(self.device, non_blocking=True) for offs in offsets]
        ids, bag_starts = batched_ids(indices, offsets, self.table_starts)
        return self.lookup_rows(ids, bag_starts, offsets[0].numel())

    def staged(self, batch: StagedBatch) -> torch.Tensor:
        return self.lookup_rows(batch.ids, batch.bag_starts, batch.size)

    def lookup_rows(self, ids: torch.Tensor, bag_starts: torch.Tensor, batch: int) -> torch.Tensor:
        with torch.no_grad():
            rows = self.rows_of(ids, bag_starts)
        return FusedLookup.apply(self.anchor, self, rows, bag_starts, batch)

    def rows_of(self, ids: torch.Tensor, bag_starts: torch.Tensor) -> torch.Tensor:
        """The rows of this arch's storage that hold the tables' rows `ids` (padding included)."""
        return ids


class DeviceTablesSparseArch(KernelTablesArch):
    name = "device-tables"

    def __init__(
        self, spec: TableSpec, generator: torch.Generator, placement: Placement = Placement.HBM, bag_size: int = 0
    ) -> None:
        super().__init__(spec, bag_size)
        table_rows, dim, optimizer, device = list(spec.rows), spec.dim, spec.optimizer, spec.device
        self.lr, self.optimizer, self.placement = spec.lr, optimizer, placement
        uvm_on_gpu = placement == Placement.UVM and device.type == "cuda"
        if uvm_on_gpu and self.ops.NAME != triton_ops.NAME:
            raise UsageError("train.placement uvm needs Triton (pip install triton) to read host memory from the GPU")
        where = {"pin_memory": True} if uvm_on_gpu else {"device": device}
        self.register_buffer("weight", stacked_tables(table_rows, dim, generator, **where))
        if optimizer == "rowwise_adagrad":
            self.register_buffer("momentum", torch.zeros(sum(table_rows), **where))

    def pooled(self, ids: torch.Tensor, bag_starts: torch.Tensor, batch: int) -> torch.Tensor:
        return self.ops.forward_fp32(self.weight, ids, bag_starts, batch, len(self.table_rows))

    def apply_update(self, ids: torch.Tensor, bag_starts: torch.Tensor, grad: torch.Tensor, batch: int) -> None:
        momentum = getattr(self, "momentum", None)
        tables = len(self.table_rows)
        self.ops.update_fp32(
            self.weight, momentum, ids, bag_starts, grad, self.lr, ADAGRAD_EPS, batch, tables, self.bag_size
        )

    def tables(self) -> list[torch.Tensor]:
        return list(self.weight.detach().cpu().split(self.table_rows))
