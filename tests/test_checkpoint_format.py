"""Checkpoint formats: bf16 tables are one [hi | lo] matrix (format 2); format 1 loads converted, newer is refused."""

import pytest
import torch

from dlrm_study.data import make_data
from dlrm_study.errors import UsageError
from dlrm_study.model.kernels import torch_ops
from dlrm_study.train import build, train
from dlrm_study.train import checkpoint as ckpt


@pytest.fixture
def bf16(small):
    small.train.loop, small.train.precision = "optimized", "bf16"
    return small


def state(run) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in run.model.state_dict().items()}


def as_format_1(path):
    """Rewrite a checkpoint as format 1 wrote it: no format, the bf16 table as `weight_hi` and `weight_lo`."""
    saved = torch.load(path, weights_only=True)
    del saved["format"]
    table = saved["model"].pop("sparse_arch.weight_split")
    dim = table.shape[1] // 2
    saved["model"]["sparse_arch.weight_hi"], saved["model"]["sparse_arch.weight_lo"] = table[:, :dim], table[:, dim:]
    torch.save(saved, path)


@pytest.mark.parametrize("optimizer", ["sgd", "rowwise_adagrad"])
def test_bf16_checkpoint_resumes_exactly_in_both_formats(bf16, tmp_path, optimizer):
    bf16.train.optimizer = optimizer
    straight = build(bf16)
    train(straight, make_data(bf16).batches(), 12)
    first = build(bf16)
    train(first, make_data(bf16).batches(), 5)
    ckpt.save(first, tmp_path / "new.pt")
    assert torch.load(tmp_path / "new.pt", weights_only=True)["format"] == ckpt.FORMAT == 2
    ckpt.save(first, tmp_path / "old.pt")
    as_format_1(tmp_path / "old.pt")
    for name in ("new.pt", "old.pt"):
        resumed = ckpt.load(tmp_path / name)
        assert resumed.step == 5
        train(resumed, make_data(bf16).batches(start=resumed.step), 12)
        assert resumed.losses == straight.losses, name
        for key, value in state(straight).items():
            assert torch.equal(value, state(resumed)[key]), (name, key)


def test_format_1_tables_become_interleaved_rows(bf16, tmp_path):
    run = build(bf16)
    ckpt.save(run, tmp_path / "old.pt")
    as_format_1(tmp_path / "old.pt")
    loaded = ckpt.load(tmp_path / "old.pt").model.sparse_arch
    assert not hasattr(loaded, "weight_hi") and loaded.weight_split.shape[1] == 2 * bf16.model.embedding_dim
    assert torch.equal(torch_ops.master(loaded.weight_split), run.model.sparse_arch.master_weight())


@pytest.mark.parametrize("version", [3, 0, "2"])
def test_a_format_this_version_does_not_read_is_one_line(bf16, tmp_path, version):
    ckpt.save(build(bf16), tmp_path / "run.pt")
    saved = torch.load(tmp_path / "run.pt", weights_only=True)
    saved["format"] = version
    torch.save(saved, tmp_path / "run.pt")
    with pytest.raises(UsageError, match=r"checkpoint format .* this dlrm-study reads formats 1 to 2") as err:
        ckpt.load(tmp_path / "run.pt")
    assert "\n" not in str(err.value)


def test_fp32_checkpoints_are_format_2_and_unchanged(small, tmp_path):
    small.train.loop = "optimized"
    run = build(small)
    ckpt.save(run, tmp_path / "run.pt")
    saved = torch.load(tmp_path / "run.pt", weights_only=True)
    assert saved["format"] == 2 and saved["model"]["sparse_arch.weight"].dtype == torch.float32
    del saved["format"]  # format 1 wrote fp32 tables as format 2 does
    torch.save(saved, tmp_path / "run.pt")
    assert torch.equal(ckpt.load(tmp_path / "run.pt").model.sparse_arch.weight, run.model.sparse_arch.weight)
