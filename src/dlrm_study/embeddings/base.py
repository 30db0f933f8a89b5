"""The sparse-arch seam: how embedding tables are stored, looked up and updated.

Every variant (reference, fused CPU, torchrec, GPU placements) implements this one
interface, so the model and the training loop never change when it is swapped:

- `forward(indices, offsets)` returns the pooled embeddings, (batch, tables, dim);
- the update happens either inside backward (fused variants) or in `update()`,
  which the loop calls after `loss.backward()` every step.
"""

import torch
from torch import nn


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

    def __init__(self, table_rows: list[int], dim: int) -> None:
        super().__init__()
        self.table_rows = list(table_rows)
        self.dim = dim

    def forward(self, indices: list[torch.Tensor], offsets: list[torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def update(self) -> None:
        """Apply this step's update to the tables (a no-op where backward already did)."""

    def clear_grad(self) -> None:
        """Forget the previous step's gradients before the next backward."""

    def tables(self) -> list[torch.Tensor]:
        """Each table's weights as fp32 (rows, dim), for checks and comparisons."""
        raise NotImplementedError


def uniform_table(rows: int, dim: int, generator: torch.Generator) -> torch.Tensor:
    """facebookresearch/dlrm's table init: U(-sqrt(1/rows), sqrt(1/rows))."""
    bound = (1.0 / rows) ** 0.5
    return torch.empty(rows, dim).uniform_(-bound, bound, generator=generator)
