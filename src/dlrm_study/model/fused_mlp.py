"""The optimized loop's MLP layers: oneDNN matmuls, bias and ReLU fused in (with the fused interaction,
`train.fused_interaction`: the fused dense path, one switch for the ablation).

Why: nn.Linear's `addmm` on the CPU first copies the bias into its output and then accumulates
the GEMM into it, and the ReLU after it reads and writes the output again: two passes over every
activation beside each GEMM. oneDNN's matmul applies the bias and the ReLU as it writes its output
(`torch.ops.mkldnn._linear_pointwise`, the op inductor fuses into). In fp32 torch's GEMMs are
MKL's, which on AMD CPUs runs AVX2 code at about half the rate of oneDNN's AVX-512 kernels, so
fp32 layers run all three GEMMs on oneDNN (the results differ from MKL's by float rounding).
In bf16 torch's backward GEMMs already are oneDNN's, and backward is what autograd computes for
Linear + ReLU, with the same ops (the ReLU's mask from its output, grad_input = g @ W,
grad_bias = g summed over the batch), except that the weight gradient is made in the weight's
layout (g.T @ x, not autograd's (x.T @ g).T, which AccumulateGrad must transpose): gradients and
trained weights are bit for bit those of nn.Linear + nn.ReLU (tests). The weights stay the bf16 halves Split-SGD
keeps, or the fp32 parameters (no cast, no copy in a step).
"""

import torch
from torch import nn


def available() -> bool:
    """Whether oneDNN's fused linear is there (a CPU build of torch with mkldnn)."""
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


class FusedLinearFunction(torch.autograd.Function):
    """Linear (+ ReLU) forward as one oneDNN matmul; backward as autograd's own ops for Linear + ReLU."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, relu: bool) -> torch.Tensor:
        out = torch.ops.mkldnn._linear_pointwise(x, weight, bias, "relu" if relu else "none", [], "")
        ctx.relu = relu
        ctx.save_for_backward(x, weight, out if relu else None)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor, None]:
        x, weight, out = ctx.saved_tensors
        if ctx.relu:
            grad = torch.ops.aten.threshold_backward(grad, out, 0)  # ReluBackward0, from the output
        if grad.dtype == torch.float32:  # oneDNN, not MKL: g @ W as linear(g, W.T), g.T @ x as linear(g.T, x.T)
            grad_x = matmul(grad, weight.t()) if ctx.needs_input_grad[0] else None
            return grad_x, matmul(grad.t(), x.t()), grad.sum(0), None
        grad_x = grad.mm(weight) if ctx.needs_input_grad[0] else None  # AddmmBackward0's mat1
        # g.T @ x: the weight gradient made in the weight's layout. Autograd's (x.T @ g).T is the same
        # values in the transposed layout, which AccumulateGrad then copies into the weight's (a
        # transpose of every weight gradient, per layer and step); the GEMM costs the same either way.
        grad_weight = grad.t().mm(x)
        return grad_x, grad_weight, grad.sum(0), None


def matmul(a: torch.Tensor, b_t: torch.Tensor) -> torch.Tensor:
    """a @ b_t.T on oneDNN (strided views taken as they are)."""
    return torch.ops.mkldnn._linear_pointwise(a, b_t, None, "none", [], "")


class FusedLinear(nn.Module):
    """A Linear layer (and the ReLU after it, if `relu`) as one oneDNN matmul; the same parameters."""

    def __init__(self, linear: nn.Linear, relu: bool) -> None:
        super().__init__()
        self.weight, self.bias, self.relu = linear.weight, linear.bias, relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return FusedLinearFunction.apply(x, self.weight, self.bias, self.relu)


def fuse(mlp: nn.Sequential) -> nn.Sequential:
    """Each Linear (+ ReLU) of `mlp` as a FusedLinear (+ Identity), in place: parameter names keep (checkpoints)."""
    for i, layer in enumerate(mlp):
        if isinstance(layer, nn.Linear):
            relu = i + 1 < len(mlp) and isinstance(mlp[i + 1], nn.ReLU)
            mlp[i] = FusedLinear(layer, relu)
            if relu:
                mlp[i + 1] = nn.Identity()
    return mlp


def kernels(model: nn.Module) -> str:
    """What ran the model's MLP layers, as records say: `onednn-fused` (FusedLinear) or `aten` (nn.Linear)."""
    return "onednn-fused" if any(isinstance(m, FusedLinear) for m in model.modules()) else "aten"
