"""The optimized bf16 loop's MLPs: bias and ReLU fused into oneDNN's GEMM, bit for bit nn.Linear + nn.ReLU."""

import copy

import pytest
import torch
from torch import nn

from dlrm_study import fused_mlp, results
from dlrm_study.data import make_data
from dlrm_study.measure.bench import bench
from dlrm_study.model import mlp
from dlrm_study.train import build, train_step

pytestmark = pytest.mark.skipif(
    not (fused_mlp.available() and results.native_bf16()), reason="needs oneDNN and a CPU with native bf16"
)


def test_fused_layers_are_bit_for_bit_linear_and_relu():
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


def test_first_layer_takes_no_input_gradient():
    layer = fused_mlp.FusedLinear(nn.Linear(8, 4).bfloat16(), relu=True)
    layer(torch.randn(3, 8).bfloat16()).sum().backward()  # data: no input gradient asked for, none computed
    assert layer.weight.grad is not None and layer.bias.grad is not None


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


def test_records_say_which_mlp_kernels_ran(tiny):
    tiny.train.loop = "optimized"
    assert bench(tiny, steps=1, warmup=0, profile_steps=0, progress=False)["mlp_kernels"] == "aten"
    tiny.train.precision = "bf16"
    assert bench(tiny, steps=1, warmup=0, profile_steps=0, progress=False)["mlp_kernels"] == "onednn-fused"
