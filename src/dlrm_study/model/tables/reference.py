"""The reference sparse arch: facebookresearch/dlrm's `dlrm_s_pytorch.py` semantics.

One `nn.EmbeddingBag(mode="sum", sparse=True)` per table, looked up one after the
other; backward builds a sparse (COO) gradient per table and `torch.optim.SGD`
applies it. This is the baseline every speedup is measured against.
"""

import torch
from torch import nn

from dlrm_study.model.tables.base import SparseArch, TableSpec, uniform_table


class ReferenceSparseArch(SparseArch):
    name = "reference"

    def __init__(self, spec: TableSpec, generator: torch.Generator) -> None:
        super().__init__(spec)
        dim = spec.dim
        self.bags = nn.ModuleList(
            nn.EmbeddingBag(rows, dim, mode="sum", sparse=True, _weight=uniform_table(rows, dim, generator))
            for rows in spec.rows
        )
        if spec.optimizer == "rowwise_adagrad":
            self.optimizer = RowWiseSparseAdagrad(self.parameters(), lr=spec.lr)
        else:
            self.optimizer = torch.optim.SGD(self.parameters(), lr=spec.lr)

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

    @torch.no_grad()
    def set_tables(self, weights: list[torch.Tensor]) -> None:
        for bag, weight in zip(self.bags, weights, strict=True):
            bag.weight.copy_(weight)

    def accumulators(self) -> list[torch.Tensor] | None:
        if not isinstance(self.optimizer, RowWiseSparseAdagrad):
            return None
        # The optimizer makes a table's accumulator at its first update: none yet is all zeros.
        state = self.optimizer.state
        return [state[bag.weight].get("momentum", torch.zeros(bag.weight.shape[0])).clone() for bag in self.bags]

    @torch.no_grad()
    def set_accumulators(self, values: list[torch.Tensor]) -> None:
        if not isinstance(self.optimizer, RowWiseSparseAdagrad):
            super().set_accumulators(values)
        for bag, value in zip(self.bags, values, strict=True):
            self.optimizer.state[bag.weight]["momentum"] = value.clone()


class RowWiseSparseAdagrad(torch.optim.Optimizer):
    """Row-wise Adagrad on sparse gradients, as facebookresearch/dlrm's optim/rwsadagrad.py.

    Per touched row r with summed gradient g: m[r] += mean(g^2); w[r] -= lr * g / (sqrt(m[r]) + eps).
    """

    def __init__(self, params, lr: float, eps: float = 1e-8) -> None:
        super().__init__(params, {"lr": lr, "eps": eps})

    @torch.no_grad()
    def step(self) -> None:  # type: ignore[override]
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "momentum" not in state:
                    state["momentum"] = torch.zeros(p.shape[0])
                grad = p.grad.coalesce()  # the update is non-linear: one row, one summed gradient
                rows, values = grad.indices()[0], grad.values()
                state["momentum"][rows] += values.square().mean(1)
                scale = group["lr"] / (state["momentum"][rows].sqrt() + group["eps"])
                p[rows] -= scale.unsqueeze(1) * values
