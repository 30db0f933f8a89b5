"""DLRM's dot interaction as one Triton kernel each way, for the GPU loop: no (F, F) matrix, no cast around it.

`interaction.DotInteraction` concatenates the dense vector and the pooled embeddings, multiplies the (B, F, D)
features by themselves with `bmm` and gathers the lower triangle; under autocast the concatenation of bf16 dense
and fp32 pooled is promoted to fp32 and cast back to bf16 for `bmm`, and the gather's backward is an
accumulating `index_put_`. Here one program per sample loads its F features (the dense row, then the pooled
rows) into one (FP, DP) tile, forms their dots with one `tl.dot` in fp32 and writes only the F (F - 1) / 2
pairs beside the dense vector, in the dense vector's dtype. Backward scatters the pairs' gradient into the
symmetric (FP, FP) tile G + G^T and multiplies it by the same features: each pair's gradient reaches both of
its features, and the dense vector's own gradient is added to row 0. The pair order is
`torch.tril_indices(F, F, -1)`'s: pair (i, j), j < i, at i (i - 1) / 2 + j.

Not yet the GPU loop's: wiring it into `interaction.interaction_for` changes the code every loop runs, so it
waits for a session that measures again (`records.code_identity`). On the CPU it runs in Triton's interpreter
(TRITON_INTERPRET=1 before Triton is imported), which is how tests/test_triton_interaction.py checks it
against `DotInteraction`; scripts/triton_compile_check.py compiles it for sm_90.
"""

import torch
from torch import nn

from dlrm_study.model.kernels.triton_ops import available, triton

if triton is not None:
    import triton.language as tl

    @triton.jit
    def _rounded(x, BF16: tl.constexpr):
        """fp32 values as the output dtype: bf16 rounded to nearest even, spelled out, since Triton's interpreter
        truncates where a GPU's conversion rounds (the same bits either way); fp32 as they are."""
        if BF16:  # decided when the kernel is compiled: one branch is built
            bits = x.to(tl.uint32, bitcast=True)
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
            y = bits.to(tl.uint16).to(tl.bfloat16, bitcast=True)
        else:
            y = x
        return y

    @triton.jit
    def _features(dense, pooled, b, F, D, FP: tl.constexpr, DP: tl.constexpr):
        """Sample b's features as one (FP, DP) fp32 tile: row 0 the dense vector, rows 1..F-1 its pooled rows."""
        f, d = tl.arange(0, FP)[:, None], tl.arange(0, DP)[None, :]
        live_d = d < D
        row = tl.load(dense + b * D + d + f * 0, mask=(f == 0) & live_d, other=0.0).to(tl.float32)
        rows = tl.load(pooled + (b * (F - 1) + f - 1) * D + d, mask=(f >= 1) & (f < F) & live_d, other=0.0)
        return row + rows.to(tl.float32)

    @triton.jit
    def _forward_kernel(dense, pooled, out, F, D, P, FP: tl.constexpr, DP: tl.constexpr, BF16: tl.constexpr):
        b = tl.program_id(0).to(tl.int64)
        x = _features(dense, pooled, b, F, D, FP, DP)
        dots = tl.dot(x, tl.trans(x), input_precision="ieee")  # (FP, FP), fp32: no TF32 rounding
        i, j = tl.arange(0, FP)[:, None], tl.arange(0, FP)[None, :]
        row = out + b * (D + P)
        tl.store(row + D + i * (i - 1) // 2 + j, _rounded(dots, BF16), mask=(j < i) & (i < F))
        d = tl.arange(0, DP)
        tl.store(row + d, tl.load(dense + b * D + d, mask=d < D, other=0.0), mask=d < D)  # its own dtype

    @triton.jit
    def _backward_kernel(
        dense, pooled, grad, grad_dense, grad_pooled, F, D, P, FP: tl.constexpr, DP: tl.constexpr, BF16: tl.constexpr
    ):
        b = tl.program_id(0).to(tl.int64)
        x = _features(dense, pooled, b, F, D, FP, DP)
        i, j = tl.arange(0, FP)[:, None], tl.arange(0, FP)[None, :]
        row = grad + b * (D + P)
        lower = tl.load(row + D + i * (i - 1) // 2 + j, mask=(j < i) & (i < F), other=0.0).to(tl.float32)
        both = lower + tl.trans(lower)  # a pair's gradient reaches both its features
        dx = tl.dot(both, x, input_precision="ieee")  # (FP, DP)
        f, d = tl.arange(0, FP)[:, None], tl.arange(0, DP)[None, :]
        live_d = d < D
        own = tl.load(row + d + f * 0, mask=(f == 0) & live_d, other=0.0).to(tl.float32)
        first = tl.sum(tl.where(f == 0, dx + own, 0.0), axis=0)  # (DP,): the dense vector's gradient
        cols = tl.arange(0, DP)
        tl.store(grad_dense + b * D + cols, _rounded(first, BF16), mask=cols < D)  # the dense vector's dtype
        tl.store(grad_pooled + (b * (F - 1) + f - 1) * D + d, dx, mask=(f >= 1) & (f < F) & live_d)  # fp32


def tile(n: int) -> int:
    """The power of two at least n and 16 (`tl.dot`'s smallest side)."""
    return max(16, 1 << (n - 1).bit_length())


class TritonDotInteractionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, dense: torch.Tensor, pooled: torch.Tensor) -> torch.Tensor:
        batch, tables, dim = pooled.shape
        features = tables + 1
        pairs = features * (features - 1) // 2
        dense = (dense if dense.dtype in (torch.float32, torch.bfloat16) else dense.float()).contiguous()
        pooled = pooled.float().contiguous()  # the tables' fp32 (its gradient is returned in fp32 too)
        out = torch.empty(batch, dim + pairs, dtype=dense.dtype, device=dense.device)
        _forward_kernel[(batch,)](dense, pooled, out, features, dim, pairs, FP=tile(features), DP=tile(dim),
                                  BF16=dense.dtype == torch.bfloat16)  # fmt: skip
        ctx.save_for_backward(dense, pooled)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        dense, pooled = ctx.saved_tensors
        batch, tables, dim = pooled.shape
        features = tables + 1
        grad_dense, grad_pooled = torch.empty_like(dense), torch.empty_like(pooled, dtype=torch.float32)
        _backward_kernel[(batch,)](dense, pooled, grad.contiguous(), grad_dense, grad_pooled, features, dim,
                                   features * (features - 1) // 2, FP=tile(features), DP=tile(dim),
                                   BF16=dense.dtype == torch.bfloat16)  # fmt: skip
        return grad_dense, grad_pooled


class TritonDotInteraction(nn.Module):
    """[dense, pair dots] in the dense vector's dtype (bf16 under the GPU loop's autocast, else fp32), the dots
    taken in fp32 and rounded once; the pooled embeddings read, and their gradient given, in fp32."""

    def forward(self, dense: torch.Tensor, pooled: torch.Tensor) -> torch.Tensor:
        if not available(dense.device):
            raise RuntimeError(f"the Triton interaction cannot run on {dense.device} here (no GPU, no interpreter)")
        return TritonDotInteractionFunction.apply(dense, pooled)
