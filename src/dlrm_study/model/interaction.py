"""DLRM's dot interaction: pairwise dots of the dense vector and the pooled embeddings.

Two implementations of one result: `DotInteraction` (`bmm` of the features with themselves, then
the lower triangle, as facebookresearch/dlrm) and the optimized loop's fused kernel
(`FusedDotInteraction`, SC20): one kernel, no (F, F) matrix; it computes only the lower-triangle
dots, in fp32, and its backward adds each pair's gradient into both features. In the bf16 loop it
takes the bottom MLP's bf16 output and gives the top MLP bf16 (and their gradients likewise), widened
and rounded inside the kernel: no cast before or after it, the same bits as the casts. The pooled
embeddings are fp32. `interaction_for` picks a config's.
"""

import torch
from torch import nn

from dlrm_study.config import Config, Loop
from dlrm_study.model import kernels


def interaction_for(cfg: Config) -> nn.Module:
    """The optimized loop's fused kernel (unless `train.fused_interaction` is off), else the bmm one."""
    if cfg.train.loop == Loop.OPTIMIZED and cfg.train.fused_interaction:
        return FusedDotInteraction()
    return DotInteraction(cfg.model.num_tables + 1)


class FusedDotInteraction(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ops = kernels.cpu_ops()

    def forward(self, dense: torch.Tensor, pooled: torch.Tensor) -> torch.Tensor:
        """[dense, pair dots], in the dense vector's dtype (fp32, or bf16 in the bf16 loop: its MLPs' dtype)."""
        if dense.dtype not in (torch.float32, torch.bfloat16):
            dense = dense.float()
        return FusedDotInteractionFunction.apply(dense, pooled.float(), self.ops)


class FusedDotInteractionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, dense, pooled, ops):
        ctx.ops = ops
        ctx.save_for_backward(dense, pooled)
        return ops.interaction_forward(dense, pooled)

    @staticmethod
    def backward(ctx, grad):
        dense, pooled = ctx.saved_tensors
        grad_dense, grad_pooled = ctx.ops.interaction_backward(dense, pooled, grad.to(dense.dtype).contiguous())
        return grad_dense, grad_pooled, None


class DotInteraction(nn.Module):
    """Pairwise dot products of the features (no self-interaction), after the dense vector."""

    def __init__(self, num_features: int) -> None:
        super().__init__()
        rows, cols = torch.tril_indices(num_features, num_features, offset=-1)
        self.register_buffer("rows", rows, persistent=False)
        self.register_buffer("cols", cols, persistent=False)

    def forward(self, dense: torch.Tensor, pooled: torch.Tensor) -> torch.Tensor:
        features = torch.cat([dense.unsqueeze(1), pooled], dim=1)  # (B, F, D)
        dots = torch.bmm(features, features.transpose(1, 2))  # (B, F, F)
        return torch.cat([dense, dots[:, self.rows, self.cols]], dim=1)
