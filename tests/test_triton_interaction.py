"""The GPU loop's fused dot interaction (`model.kernels.triton_interaction`), in Triton's interpreter on the CPU:
the same outputs and gradients as `DotInteraction`, at shapes that fill no tile, in fp32 and with bf16 dense."""

import pytest
import torch

from dlrm_study.model.interaction import DotInteraction
from dlrm_study.model.kernels import triton_ops
from dlrm_study.model.kernels.triton_interaction import TritonDotInteraction, tile

pytestmark = pytest.mark.skipif(not triton_ops.available(torch.device("cpu")), reason="no Triton interpreter here")


def inputs(batch: int, tables: int, dim: int, dtype: torch.dtype = torch.float32):
    generator = torch.Generator().manual_seed(batch * 100 + tables * 10 + dim)
    dense = torch.randn(batch, dim, generator=generator).to(dtype).requires_grad_()
    pooled = torch.randn(batch, tables, dim, generator=generator).requires_grad_()
    return dense, pooled


@pytest.mark.parametrize(("batch", "tables", "dim"), [(3, 3, 16), (2, 26, 20), (4, 1, 64)])
def test_it_gives_the_bmm_interactions_values_and_gradients(batch, tables, dim):
    dense, pooled = inputs(batch, tables, dim)
    fused = TritonDotInteraction()(dense, pooled)
    expected = DotInteraction(tables + 1)(dense, pooled)
    assert fused.shape == expected.shape == (batch, dim + (tables + 1) * tables // 2)
    torch.testing.assert_close(fused, expected, rtol=1e-5, atol=1e-5)
    upstream = torch.randn(expected.shape, generator=torch.Generator().manual_seed(1))
    want = torch.autograd.grad(expected, (dense, pooled), upstream)
    got = torch.autograd.grad(fused, (dense, pooled), upstream)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-4)


def test_bf16_dense_gives_bf16_out_with_the_dots_taken_in_fp32():
    dense, pooled = inputs(3, 5, 32, torch.bfloat16)
    fused = TritonDotInteraction()(dense, pooled)
    assert fused.dtype == torch.bfloat16
    exact = DotInteraction(6)(dense.float(), pooled)
    # widened, dotted in fp32, rounded once: within half a bf16 spacing (2^-8 relative) of the fp32 dots
    torch.testing.assert_close(fused.float(), exact, rtol=2**-8 + 1e-5, atol=1e-5)
    assert not torch.equal(fused.float(), exact)  # and rounded: bf16, not fp32 values in a bf16 tensor
    upstream = torch.ones_like(fused)
    grads = torch.autograd.grad(fused, (dense, pooled), upstream)
    assert grads[0].dtype == torch.bfloat16 and grads[1].dtype == torch.float32
    wide = dense.detach().float().requires_grad_()
    want = torch.autograd.grad(DotInteraction(6)(wide, pooled), (wide, pooled), upstream.float())
    torch.testing.assert_close(grads[0].float(), want[0], rtol=2**-8 + 1e-5, atol=1e-4)  # rounded once to bf16
    torch.testing.assert_close(grads[1], want[1], rtol=1e-5, atol=1e-4)


def test_a_wrong_pair_order_would_be_seen():
    """The check above can fail: the interaction with two pooled rows swapped gives other values."""
    dense, pooled = inputs(2, 4, 16)
    fused = TritonDotInteraction()(dense, pooled)
    swapped = DotInteraction(5)(dense, pooled[:, [1, 0, 2, 3]])
    assert not torch.allclose(fused, swapped, rtol=1e-5, atol=1e-5)


def test_tiles_are_powers_of_two_of_at_least_16():
    assert [tile(n) for n in (1, 9, 16, 17, 27, 64, 65)] == [16, 16, 16, 32, 32, 64, 128]
