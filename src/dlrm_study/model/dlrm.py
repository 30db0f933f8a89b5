"""DLRM in plain PyTorch: bottom MLP, sparse arch, dot interaction, top MLP.

The sparse arch is passed in (see `model.tables`), so every variant of the study shares
this dense part. Initialisation follows facebookresearch/dlrm: Linear weights
N(0, sqrt(2 / (fan_in + fan_out))), biases N(0, sqrt(1 / fan_out)).
"""

import torch
from torch import nn
from torch.autograd.profiler import record_function

from dlrm_study.config import ModelConfig
from dlrm_study.data import Batch, StagedBatch
from dlrm_study.model.interaction import DotInteraction
from dlrm_study.model.tables import SparseArch


def mlp(layers: list[tuple[int, int]], generator: torch.Generator, last_relu: bool) -> nn.Sequential:
    """Linear + ReLU layers; the last ReLU is left out for the top MLP (it emits a logit)."""
    modules: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(layers):
        linear = nn.Linear(fan_in, fan_out)
        with torch.no_grad():
            linear.weight.normal_(0.0, (2.0 / (fan_in + fan_out)) ** 0.5, generator=generator)
            linear.bias.normal_(0.0, (1.0 / fan_out) ** 0.5, generator=generator)
        modules.append(linear)
        if last_relu or i < len(layers) - 1:
            modules.append(nn.ReLU())
    return nn.Sequential(*modules)


class DLRM(nn.Module):
    """Click logit for a batch. `record_function` scopes name each part for profiling."""

    def __init__(
        self,
        cfg: ModelConfig,
        sparse_arch: SparseArch,
        generator: torch.Generator,
        interaction: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.bottom_mlp = mlp(cfg.bottom_layers, generator, last_relu=True)
        self.sparse_arch = sparse_arch
        self.interaction = interaction or DotInteraction(cfg.num_tables + 1)
        self.top_mlp = mlp(cfg.top_layers, generator, last_relu=False)

    def forward(self, batch: Batch | StagedBatch) -> torch.Tensor:
        with record_function("dlrm:bottom_mlp"):
            dense = self.bottom_mlp(batch.dense.to(self.bottom_mlp[0].weight.dtype))  # bf16 MLPs take bf16
        with record_function("dlrm:embedding_forward"):
            pooled = self.sparse_arch.lookup(batch)
        with record_function("dlrm:interaction"):
            interactions = self.interaction(dense, pooled)
        with record_function("dlrm:top_mlp"):
            return self.top_mlp(interactions.to(self.top_mlp[0].weight.dtype)).squeeze(1)

    def to_device(self, device: torch.device) -> "DLRM":
        """Move the dense part; the sparse arch put its tables where its placement says when built."""
        for child in self.children():
            if child is not self.sparse_arch:
                child.to(device)
        return self

    def dense_parameters(self) -> list[nn.Parameter]:
        """Parameters outside the sparse arch: trained by the loop's dense optimizer."""
        sparse = {id(p) for p in self.sparse_arch.parameters()}
        return [p for p in self.parameters() if id(p) not in sparse]
