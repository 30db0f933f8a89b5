import itertools
import math

import pytest
import torch

from dlrm_study import config
from dlrm_study.data import make_data
from dlrm_study.errors import UsageError
from dlrm_study.train import auc, build, evaluate, train
from dlrm_study.train import checkpoint as ckpt


def brute_force_auc(scores, labels):
    pos = [s for s, y in zip(scores, labels, strict=True) if y == 1]
    neg = [s for s, y in zip(scores, labels, strict=True) if y == 0]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def test_auc_matches_pairwise_definition_with_ties():
    gen = torch.Generator().manual_seed(0)
    scores = torch.randint(0, 6, (300,), generator=gen).float()  # many ties
    labels = (torch.rand(300, generator=gen) < 0.4).float()
    assert auc(scores, labels) == pytest.approx(brute_force_auc(scores.tolist(), labels.tolist()))
    assert auc(torch.tensor([0.1, 0.9]), torch.tensor([0.0, 1.0])) == 1.0
    assert math.isnan(auc(torch.tensor([0.1, 0.9]), torch.tensor([1.0, 1.0])))  # one class only


def params(run):
    return {k: v.clone() for k, v in run.model.state_dict().items() if isinstance(v, torch.Tensor)}


def test_training_is_deterministic_for_a_seed(small):
    a, b = build(small), build(small)
    train(a, make_data(small).batches(), 15)
    train(b, make_data(small).batches(), 15)
    assert a.losses == b.losses
    for key, value in params(a).items():
        assert torch.equal(value, params(b)[key]), key


def test_checkpoint_resumes_exactly(small, tmp_path):
    straight = build(small)
    train(straight, make_data(small).batches(), 20)

    first = build(small)
    train(first, make_data(small).batches(), 8)
    ckpt.save(first, tmp_path / "run.pt")
    resumed = ckpt.load(tmp_path / "run.pt")
    assert resumed.step == 8
    train(resumed, make_data(small).batches(start=resumed.step), 20)
    assert resumed.losses == straight.losses
    for key, value in params(straight).items():
        assert torch.equal(value, params(resumed)[key]), key


def test_bad_checkpoint_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="checkpoint not found"):
        ckpt.load(tmp_path / "none.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(UsageError, match="is not a dlrm-study checkpoint"):
        ckpt.load(tmp_path / "junk.pt")


def test_tiny_learns_the_teacher():
    """The issue's bar: 300 steps of `tiny` reach a validation AUC of at least 0.75."""
    cfg = config.preset("tiny")
    run = build(cfg)
    losses = train(run, make_data(cfg).batches(), 300)
    metrics = evaluate(run, itertools.islice(make_data(cfg, "eval").batches(), cfg.train.eval_batches))
    assert metrics["auc"] >= 0.75
    assert sum(losses[-30:]) < sum(losses[:30])


def test_trains_on_criteo_sample(criteo_cfg):
    criteo_cfg.train.learning_rate = 0.1
    run = build(criteo_cfg)
    losses = train(run, make_data(criteo_cfg).batches(), 60)
    metrics = evaluate(run, make_data(criteo_cfg, "eval").batches())
    assert len(losses) == 60 and metrics["auc"] > 0.6


def test_cuda_request_without_gpu_is_refused(tiny):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    tiny.train.device = "cuda"
    with pytest.raises(UsageError, match="no CUDA GPU"):
        build(tiny)


def test_a_resumed_runs_rate_counts_only_the_steps_it_trained(tmp_path, monkeypatch):
    """Resumed at step 8 of 12, the record's samples/s is the 4 trained steps' samples over the time they took
    (a frozen clock gives 2 s), not all 12 steps' samples."""
    from dlrm_study.measure import training

    cfg = config.load("tiny", ["train.steps=12", "train.batch_size=32", "train.eval_batches=1"])
    first = build(cfg)
    train(first, make_data(cfg).batches(), 8)
    ckpt.save(first, tmp_path / "run.pt")
    resumed = ckpt.load(tmp_path / "run.pt")
    clock = iter([100.0, 102.0])
    monkeypatch.setattr(training.time, "perf_counter", lambda: next(clock))
    record = training.train_and_record(resumed, None, progress=False)
    assert record["steps"] == 12
    assert record["samples_per_s"] == pytest.approx(4 * 32 / 2.0)
