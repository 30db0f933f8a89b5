"""The `host` placement: tables in CPU memory, looked up and updated by the fused CPU kernels.

Only pooled embeddings cross to the training device, and only their gradient comes back.
The overlap comes from the order of work: the model launches the bottom MLP on the GPU
before it asks for embeddings, so the CPU lookup runs while the GPU computes; in backward,
autograd runs the CPU update on its CPU thread while its GPU thread goes on with the
bottom MLP's backward.
"""

import torch

from dlrm_study.config import Precision
from dlrm_study.model.tables.base import CPU, SparseArch, TableSpec
from dlrm_study.model.tables.fused_cpu import FusedCPUSparseArch


class HostSparseArch(SparseArch):
    name = "host-fused-cpu"
    placement = "host"
    ids_device = CPU

    def __init__(self, spec: TableSpec, generator: torch.Generator) -> None:
        super().__init__(spec)
        self.device = spec.device
        self.fused = FusedCPUSparseArch(spec.but(precision=Precision.FP32, device=CPU), generator)

    @property
    def kernel_path(self) -> str:
        return self.fused.kernel_path

    def forward(self, indices: list[torch.Tensor], offsets: list[torch.Tensor]) -> torch.Tensor:
        pooled = self.fused([ids.cpu() for ids in indices], [offs.cpu() for offs in offsets])
        # Autograd's copy backward brings the gradient home before the fused CPU update runs.
        return pooled.to(self.device, non_blocking=True)

    def tables(self) -> list[torch.Tensor]:
        return self.fused.tables()
