"""The optimized bf16 loop's dense weights: bf16 upper halves of fp32 masters, never cast in a step."""

import pytest
import torch

from dlrm_study import config
from dlrm_study.data import make_data
from dlrm_study.model.kernels import torch_ops
from dlrm_study.train.run import build, place, train_step


@pytest.fixture
def bf16_run():
    run = build(config.load("tiny", ["train.loop=optimized", "train.precision=bf16"]))
    return run, make_data(run.cfg).batches()


def masters(run) -> list[torch.Tensor]:
    """Each MLP parameter's fp32 master: its bf16 bits joined with Split-SGD's lower halves."""
    state = run.dense_optimizer.state
    return [torch_ops.join(p.detach().view(torch.int16), state[p]["lo"]) for p in run.model.dense_parameters()]


def test_a_bf16_step_casts_activations_but_no_weights(bf16_run) -> None:
    run, batches = bf16_run
    params = run.model.dense_parameters()
    train_step(run, place(run, next(batches)))  # warm up: first-call allocations are not the hot path
    weight_shapes = {tuple(p.shape) for p in params}
    storage = [p.data_ptr() for p in params]
    with torch.profiler.profile(record_shapes=True) as prof:
        train_step(run, place(run, next(batches)))
    casts = [tuple(e.input_shapes[0]) for e in prof.events() if e.name == "aten::_to_copy" and e.input_shapes]
    assert casts  # the bf16 MLPs' inputs are cast: the profile does see casts
    assert not weight_shapes & set(casts), "a weight was cast to or from bf16 inside the step"
    assert all(p.dtype == torch.bfloat16 for p in params) and [p.data_ptr() for p in params] == storage


def test_bf16_weights_follow_fp32_sgd_on_their_masters_exactly(bf16_run) -> None:
    """Each step moves every fp32 master by exactly -lr * (the step's bf16 gradient), as fp32 SGD
    would; the bf16 weight the GEMMs use is the master truncated to bf16 (within one bf16 ulp)."""
    run, batches = bf16_run
    lr = run.cfg.train.learning_rate
    for _ in range(3):
        before = masters(run)
        train_step(run, place(run, next(batches)))
        grads = [p.grad.float() for p in run.model.dense_parameters()]
        for old, new, grad, p in zip(before, masters(run), grads, run.model.dense_parameters(), strict=True):
            assert torch.equal(new, old - lr * grad)
            ulp = new.abs() * 2**-7  # bf16 keeps 8 significant bits: truncation is below one ulp
            assert ((p.detach().float() - new).abs() <= ulp).all()
            assert ((p.detach().float() - new) * new.sign() <= 0).all()  # truncated toward zero
