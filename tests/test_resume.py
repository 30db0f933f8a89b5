"""Resuming the optimized loop from a checkpoint continues bit for bit, in fp32 and bf16, on both kernel paths."""

from pathlib import Path

import pytest
import torch

from dlrm_study import config
from dlrm_study.cli.main import main
from dlrm_study.data import make_data
from dlrm_study.model import kernels
from dlrm_study.train import Run, build, train
from dlrm_study.train import checkpoint as ckpt

STEPS, SAVE_AT = 12, 5
CASES = [
    pytest.param(precision, optimizer, id=f"{precision}-{optimizer}")
    for precision in ("fp32", "bf16")
    for optimizer in ("sgd", "rowwise_adagrad")
]


@pytest.fixture(params=["cpp", "torch"])
def kernel_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which kernels the runs built in the test use: the compiled C++ or the PyTorch twins."""
    if request.param == "torch":
        monkeypatch.setattr(kernels, "load", lambda: None)  # what a machine without a compiler gets
    elif kernels.load() is None:
        pytest.skip("no C++ compiler: the kernels cannot be built here")
    return request.param


def optimized(precision: str, optimizer: str) -> config.Config:
    return config.load("tiny", ["train.loop=optimized", f"train.precision={precision}", f"train.optimizer={optimizer}"])


def state(run: Run) -> dict[str, object]:
    """Everything a run trains: model parameters and buffers (tables, their halves, Adagrad
    accumulators) and the dense optimizer's state (Split-SGD's lower halves)."""
    dense = run.dense_optimizer.state_dict()
    out: dict[str, object] = {f"model.{k}": v.clone() for k, v in run.model.state_dict().items()}
    for index, values in dense["state"].items():
        out.update({f"dense_optimizer.{index}.{k}": v.clone() for k, v in values.items()})
    out["dense_optimizer.param_groups"] = dense["param_groups"]
    return out


def assert_same_state(a: dict[str, object], b: dict[str, object]) -> None:
    assert a.keys() == b.keys()
    for key, value in a.items():
        if isinstance(value, torch.Tensor):
            assert value.dtype == b[key].dtype, key  # torch.equal would compare int16 bits with bf16 values
            assert torch.equal(value, b[key]), key
        else:
            assert value == b[key], key


@pytest.mark.parametrize(("precision", "optimizer"), CASES)
def test_optimized_loop_resumes_bit_exactly(precision, optimizer, kernel_path, tmp_path):
    cfg = optimized(precision, optimizer)
    straight = build(cfg)
    assert straight.model.sparse_arch.kernel_path == kernel_path
    train(straight, make_data(cfg).batches(), STEPS)

    first = build(optimized(precision, optimizer))
    train(first, make_data(first.cfg).batches(), SAVE_AT)
    ckpt.save(first, tmp_path / "run.pt")
    resumed = ckpt.load(tmp_path / "run.pt")
    assert resumed.step == SAVE_AT
    assert_same_state(state(first), state(resumed))  # the checkpoint restores what was saved

    train(resumed, make_data(resumed.cfg).batches(start=resumed.step), STEPS)
    assert resumed.losses == straight.losses
    assert_same_state(state(straight), state(resumed))


def test_cli_resume_of_a_bf16_run_matches_an_uninterrupted_one(tmp_path: Path, monkeypatch, capsys):
    """`dlrm-study train --resume` end to end, on whichever kernels this machine builds."""
    monkeypatch.chdir(tmp_path)  # the default record lands in ./results
    common = ["train", "--loop", "optimized", "--precision", "bf16", "--no-progress"]
    assert main([*common, "--steps", str(STEPS), "--checkpoint", "straight.pt"]) == 0
    assert main([*common, "--steps", str(SAVE_AT), "--checkpoint", "resumed.pt"]) == 0
    resume = ["train", "--resume", "resumed.pt", "--steps", str(STEPS), "--checkpoint", "resumed.pt", "--no-progress"]
    assert main(resume) == 0
    capsys.readouterr()
    straight, resumed = ckpt.load(tmp_path / "straight.pt"), ckpt.load(tmp_path / "resumed.pt")
    assert resumed.step == straight.step == STEPS
    assert resumed.losses == straight.losses
    assert_same_state(state(straight), state(resumed))
