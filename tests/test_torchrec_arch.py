"""The torchrec peer (FusedEmbeddingBagCollection) trains exactly as the reference loop does."""

import copy

import pytest
import torch

from dlrm_study import config
from dlrm_study.data import SyntheticData
from dlrm_study.measure.cpu import EMBEDDING_BACKWARD
from dlrm_study.train import build, train, train_step
from dlrm_study.train import checkpoint as ckpt

pytest.importorskip("torchrec")

from dlrm_study.model.tables.torchrec_arch import TorchrecSparseArch


def with_overrides(cfg: config.Config, *items: str) -> config.Config:
    cfg = copy.deepcopy(cfg)
    for item in items:
        config.apply_override(cfg, item)
    return cfg


def test_forward_equals_reference(small):
    ref = build(small).model.sparse_arch
    trec = build(with_overrides(small, "train.loop=torchrec")).model.sparse_arch
    assert isinstance(trec, TorchrecSparseArch)
    batch = SyntheticData(small).batch(0)
    ours = trec(batch.indices, batch.offsets)
    assert ours.shape == (small.train.batch_size, len(small.model.table_rows), small.model.embedding_dim)
    torch.testing.assert_close(ours, ref(batch.indices, batch.offsets), rtol=0, atol=0)


@pytest.mark.parametrize("optimizer", ["sgd", "rowwise_adagrad"])
def test_steps_equal_reference_loop(small, optimizer):
    ref = build(with_overrides(small, f"train.optimizer={optimizer}"))
    trec = build(with_overrides(small, f"train.optimizer={optimizer}", "train.loop=torchrec"))
    for a, b in zip(trec.model.sparse_arch.tables(), ref.model.sparse_arch.tables(), strict=True):
        assert torch.equal(a, b)  # same seed, same initial tables
    data = SyntheticData(small)
    for i in range(5):
        batch = data.batch(i)
        assert any(ids.unique().numel() < ids.numel() for ids in batch.indices)  # repeated ids in the batch
        torch.testing.assert_close(train_step(trec, batch), train_step(ref, batch), rtol=0, atol=1e-5)
    for a, b in zip(trec.model.sparse_arch.tables(), ref.model.sparse_arch.tables(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
    # The FEBC's table parameters are the sparse arch's: the dense optimizer never sees them.
    for a, b in zip(trec.model.dense_parameters(), ref.model.dense_parameters(), strict=True):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)


def test_checkpoint_keeps_adagrad_momentum(small, tmp_path):
    cfg = with_overrides(small, "train.optimizer=rowwise_adagrad", "train.loop=torchrec")
    data = SyntheticData(cfg)
    straight = build(cfg)
    train(straight, data.batches(), 4)
    first = build(cfg)
    train(first, data.batches(), 2)
    ckpt.save(first, tmp_path / "run.pt")
    resumed = ckpt.load(tmp_path / "run.pt")
    train(resumed, data.batches(start=resumed.step), 4)
    assert resumed.losses == straight.losses
    for a, b in zip(resumed.model.sparse_arch.tables(), straight.model.sparse_arch.tables(), strict=True):
        assert torch.equal(a, b)


def test_backward_node_names_the_tbe_backward(small):
    run = build(with_overrides(small, "train.loop=torchrec"))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        train_step(run, SyntheticData(small).batch(0))
    nodes = [e.name for e in prof.events() if e.name.startswith("autograd::engine::evaluate_function: ")]
    assert "SplitLookupFunction" in EMBEDDING_BACKWARD  # the breakdown counts it as the embedding's backward
    assert any("SplitLookupFunction" in name for name in nodes), nodes
