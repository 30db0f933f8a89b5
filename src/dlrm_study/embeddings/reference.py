"""The reference sparse arch: facebookresearch/dlrm's `dlrm_s_pytorch.py` semantics.

One `nn.EmbeddingBag(mode="sum", sparse=True)` per table, looked up one after the
other; backward builds a sparse (COO) gradient per table and `torch.optim.SGD`
applies it. This is the baseline every speedup is measured against.
"""

import torch
from torch import nn

from dlrm_study.embeddings.base import SparseArch, uniform_table


class ReferenceSparseArch(SparseArch):
    name = "reference"
    backward_node = "EmbeddingBag"

    def __init__(self, table_rows: list[int], dim: int, lr: float, generator: torch.Generator) -> None:
        super().__init__(table_rows, dim)
        self.bags = nn.ModuleList(
            nn.EmbeddingBag(rows, dim, mode="sum", sparse=True, _weight=uniform_table(rows, dim, generator))
            for rows in table_rows
        )
        self.optimizer = torch.optim.SGD(self.parameters(), lr=lr)

    def forward(self, indices: list[torch.Tensor], offsets: list[torch.Tensor]) -> torch.Tensor:
        pooled = [bag(ids, offs) for bag, ids, offs in zip(self.bags, indices, offsets, strict=True)]
        return torch.stack(pooled, dim=1)

    def update(self) -> None:
        self.optimizer.step()

    def clear_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def get_extra_state(self) -> dict:
        return self.optimizer.state_dict()  # saved in the model's state_dict for checkpoints

    def set_extra_state(self, state: dict) -> None:
        self.optimizer.load_state_dict(state)

    def tables(self) -> list[torch.Tensor]:
        return [bag.weight.detach() for bag in self.bags]
