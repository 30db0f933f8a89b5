"""The `host` placement: tables in CPU memory, looked up and updated by the fused CPU kernels.

Only pooled embeddings cross to the training device, and only their gradient comes back.
The overlap comes from the order of work: the model launches the bottom MLP on the GPU
before it asks for embeddings, so the CPU lookup runs while the GPU computes; in backward,
autograd runs the CPU update on its CPU thread while its GPU thread goes on with the
bottom MLP's backward.
"""

import torch

from dlrm_study.model.tables.base import SparseArch
from dlrm_study.model.tables.fused_cpu import FusedCPUSparseArch


class HostSparseArch(SparseArch):
    name = "host-fused-cpu"
    placement = "host"
    backward_node = "FusedLookup"
    ids_device = torch.device("cpu")

    def __init__(
        self, table_rows: list[int], dim: int, lr: float, generator: torch.Generator, optimizer: str,
        device: torch.device,
    ) -> None:  # fmt: skip
        super().__init__(table_rows, dim)
        self.device = device
        self.fused = FusedCPUSparseArch(table_rows, dim, lr, generator, optimizer, precision="fp32")

    @property
    def kernel_path(self) -> str:
        return self.fused.kernel_path

    def forward(self, indices: list[torch.Tensor], offsets: list[torch.Tensor]) -> torch.Tensor:
        pooled = self.fused([ids.cpu() for ids in indices], [offs.cpu() for offs in offsets])
        # Autograd's copy backward brings the gradient home before the fused CPU update runs.
        return pooled.to(self.device, non_blocking=True)

    def tables(self) -> list[torch.Tensor]:
        return self.fused.tables()
