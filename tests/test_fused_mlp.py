"""The optimized loop's MLPs on oneDNN, bias and ReLU fused in: bf16 bit for bit nn.Linear + nn.ReLU, fp32 close."""

import copy
import types

import pytest
import torch
from torch import nn

from dlrm_study import platform
from dlrm_study.data import make_data
from dlrm_study.measure.bench import bench
from dlrm_study.model import fused_mlp
from dlrm_study.model.dlrm import mlp
from dlrm_study.train import build, train_step

needs_onednn = pytest.mark.skipif(not fused_mlp.available(), reason="needs torch's oneDNN")
needs_bf16 = pytest.mark.skipif(not (fused_mlp.available() and platform.native_bf16()), reason="needs native bf16")


@needs_bf16
def test_fused_bf16_layers_are_bit_for_bit_linear_and_relu():
    generator = torch.Generator().manual_seed(0)
    plain = mlp([(100, 256), (256, 256), (256, 1)], generator, last_relu=False).bfloat16()
    fused = fused_mlp.fuse(copy.deepcopy(plain))
    assert [type(m) for m in fused] == [fused_mlp.FusedLinear, nn.Identity] * 2 + [fused_mlp.FusedLinear]
    assert [fused[i].relu for i in (0, 2, 4)] == [True, True, False]
    assert [n for n, _ in fused.named_parameters()] == [n for n, _ in plain.named_parameters()]  # checkpoints keep
    x = torch.randn(64, 100, generator=generator).bfloat16()
    inputs = [x.clone().requires_grad_(), x.clone().requires_grad_()]
    outputs = [plain(inputs[0]), fused(inputs[1])]
    assert torch.equal(*outputs)
    weights = torch.randn(outputs[0].shape, generator=generator).bfloat16()
    for out in outputs:
        (out * weights).sum().backward()
    assert torch.equal(inputs[0].grad, inputs[1].grad)
    for p, q in zip(plain.parameters(), fused.parameters(), strict=True):
        assert torch.equal(p.grad, q.grad)


@needs_onednn
def test_fused_fp32_layers_compute_what_linear_and_relu_do():
    """fp32 runs all three GEMMs on oneDNN (MKL's differ by float rounding): the same values, 1e-5."""
    generator = torch.Generator().manual_seed(1)
    plain = mlp([(100, 256), (256, 256), (256, 1)], generator, last_relu=False)
    fused = fused_mlp.fuse(copy.deepcopy(plain))
    x = torch.randn(64, 100, generator=generator)
    inputs = [x.clone().requires_grad_(), x.clone().requires_grad_()]
    outputs = [plain(inputs[0]), fused(inputs[1])]
    torch.testing.assert_close(outputs[0], outputs[1], rtol=0, atol=1e-5)
    weights = torch.randn(outputs[0].shape, generator=generator)
    for out in outputs:
        (out * weights).sum().backward()
    torch.testing.assert_close(inputs[0].grad, inputs[1].grad, rtol=0, atol=1e-5)
    for p, q in zip(plain.parameters(), fused.parameters(), strict=True):
        assert p.grad.shape == q.grad.shape
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-5)


@needs_onednn
@pytest.mark.parametrize("dtype", [torch.float32, pytest.param(torch.bfloat16, marks=needs_bf16)])
def test_first_layer_takes_no_input_gradient(dtype):
    layer = fused_mlp.FusedLinear(nn.Linear(8, 4).to(dtype), relu=True)
    layer(torch.randn(3, 8).to(dtype)).sum().backward()  # data: no input gradient asked for, none computed
    assert layer.weight.grad is not None and layer.bias.grad is not None


@needs_bf16
def test_the_optimized_bf16_loop_runs_fused_mlps_and_trains_as_before(small):
    small.train.loop, small.train.precision = "optimized", "bf16"
    fused, plain = build(small), build(small)
    assert fused_mlp.kernels(fused.model) == "onednn-fused"
    for name in ("bottom_mlp", "top_mlp"):  # undo the fusion in one run: the layers as nn.Linear + nn.ReLU
        layers = []
        for module in getattr(plain.model, name):
            if isinstance(module, fused_mlp.FusedLinear):
                linear = nn.Linear(1, 1)
                linear.weight, linear.bias = module.weight, module.bias
                layers += [linear, nn.ReLU()] if module.relu else [linear]
        setattr(plain.model, name, nn.Sequential(*layers))
    assert fused_mlp.kernels(plain.model) == "aten"
    data = make_data(small)
    for i in range(3):
        assert torch.equal(train_step(fused, data.batch(i)), train_step(plain, data.batch(i)))
    for p, q in zip(fused.model.dense_parameters(), plain.model.dense_parameters(), strict=True):
        assert torch.equal(p, q)


@needs_bf16
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_records_say_which_mlp_kernels_ran(tiny, precision):
    tiny.train.loop, tiny.train.precision = "optimized", precision
    assert bench(tiny, steps=1, warmup=0, profile_steps=0, progress=False)["mlp_kernels"] == "onednn-fused"
    tiny.train.fused_interaction = False  # the fused dense path off: bmm and nn.Linear (the ablation's steps)
    assert bench(tiny, steps=1, warmup=0, profile_steps=0, progress=False)["mlp_kernels"] == "aten"


def test_only_the_optimized_loop_fuses_its_mlps(tiny):
    assert fused_mlp.kernels(build(tiny).model) == "aten"  # the reference: nn.Linear, as dlrm


@needs_bf16  # its backward's GEMMs are oneDNN's bf16 ones, which a CPU without native bf16 lacks
def test_bf16_weight_gradient_is_made_in_the_weights_layout():
    """g.T @ x: contiguous like the weight, so AccumulateGrad copies nothing; the values are autograd's
    (x.T @ g).T bit for bit. The backward alone (its forward needs oneDNN's bf16). Fails before: the
    gradient came transposed (a strided view)."""
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(64, 48, generator=generator).bfloat16()
    weight, bias = torch.randn(32, 48, generator=generator).bfloat16(), torch.randn(32, generator=generator).bfloat16()
    out = torch.relu(nn.functional.linear(x, weight, bias))
    grad = torch.randn(out.shape, generator=generator).bfloat16()
    ctx = types.SimpleNamespace(saved_tensors=(x, weight, out), relu=True, needs_input_grad=(False, True, True, False))
    _, grad_weight, grad_bias, _ = fused_mlp.FusedLinearFunction.backward(ctx, grad)
    masked = torch.ops.aten.threshold_backward(grad, out, 0)
    assert grad_weight.is_contiguous() and grad_weight.stride() == weight.stride()
    assert torch.equal(grad_weight, x.t().mm(masked).t()) and torch.equal(grad_bias, masked.sum(0))
