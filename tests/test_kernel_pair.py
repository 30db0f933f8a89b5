"""scripts/kernel_pair.py: a kernel change timed side by side with the kernels it replaces, its tables compared."""

import argparse
import re
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

from dlrm_study.model import kernels
from dlrm_study.model.kernels import torch_ops

SCRIPT = runpy.run_path(str(Path(__file__).resolve().parents[1] / "scripts" / "kernel_pair.py"))
compare, main = SCRIPT["compare"], SCRIPT["main"]


def twins(**changed) -> SimpleNamespace:
    """The PyTorch twins standing in for a build of the kernels (no compiler needed), with `changed` kernels."""
    names = ("forward_fp32", "forward_bf16", "sgd_fp32", "sgd_split_bf16")
    ops = {name: getattr(torch_ops, name) for name in names}
    return SimpleNamespace(**{**ops, **changed}, set_prefetch_rows=lambda gather, update: [gather, update])


def args(**given) -> argparse.Namespace:
    return argparse.Namespace(**{"config": "tiny", "rounds": 2, "steps": 2, "ahead": "", **given})


def test_the_same_kernels_leave_identical_tables_and_a_ratio_per_case(capsys):
    assert compare(twins(), twins(), args(ahead="0,8"))
    out = capsys.readouterr().out
    assert out.count("bit for bit identical") == 2  # bf16, then fp32
    assert len(re.findall(r"before / after \d\.\d{3}x", out)) == 8  # (gather, update) x 2 distances x 2 precisions


def test_an_update_that_changes_the_result_is_caught(capsys):
    def doubled(weight, ids, offsets, grad, lr, batch, tables):
        torch_ops.sgd_fp32(weight, ids, offsets, grad, 2 * lr, batch, tables)

    assert not compare(twins(sgd_fp32=doubled), twins(), args())
    out = capsys.readouterr().out
    assert "bf16" in out and "DIFFERENT" in out.split("fp32:")[1]


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (["--against", "no-such-commit"], "no src/dlrm_study/model/kernels/fused_cpu.cpp at 'no-such-commit'"),
        (["--against", "/nowhere/kernels.cpp"], "no kernel source /nowhere/kernels.cpp"),
        (["--against", str(kernels.SOURCE)], "this tree's: nothing to compare"),
        (["--config", "huge"], "unknown preset 'huge'"),
        (["--rounds", "0"], "--rounds and --steps are at least 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_any_build(given, said, capsys, monkeypatch):
    monkeypatch.setattr(kernels, "load", lambda: pytest.fail("built before the input was checked"))
    assert main(given) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err
