"""A lending checks its GPU kernels against their PyTorch stand-ins before it measures (`lending.numerics`), at the
shapes its headline measures; a failed check is recorded, and the court leaves out that lending's Triton records."""

import types

import pandas as pd
import pytest
import torch
from tests.test_placements import KERNELS

from dlrm_study import settings
from dlrm_study.analysis.readers import NUMERICS_FAILED, checked_kernels, failed_checks
from dlrm_study.lending import gpu_lending, numerics
from dlrm_study.model.kernels import torch_ops, triton_ops
from dlrm_study.plans.sensitivity import NUMERICS_RECORDS
from dlrm_study.records import columns as col
from dlrm_study.records import store
from dlrm_study.records.record import make_record

SMALL = [numerics.Shape(32, 4, 0, 6, 16, 400), numerics.Shape(64, 3, 1, 1, 64, 500)]


@KERNELS
def test_tritons_kernels_match_their_stand_ins_exactly():
    rows = numerics.check(triton_ops, SMALL, torch.device("cpu"))
    assert len(rows) == 3 * len(SMALL) and all(r[col.NUMERICS_PASSED] for r in rows), rows
    assert numerics.said(rows) == "numerics: triton kernels match their stand-ins at 2 shapes"


def planted(forward=None, lr_scale: float = 1.0) -> types.SimpleNamespace:
    """The stand-ins with a planted fault: a lookup of its own, or an update at another learning rate."""

    def update(weight, momentum, ids, starts, grad, lr, eps, batch, tables, bag_size=0):
        torch_ops.update_fp32(weight, momentum, ids, starts, grad, lr * lr_scale, eps, batch, tables, bag_size)

    def lookup(weight, ids, starts, batch, tables):
        return torch_ops.forward_fp32(weight, ids.long(), starts, batch, tables)

    return types.SimpleNamespace(NAME="planted", forward_fp32=forward or lookup, update_fp32=update)


def test_a_planted_wrong_kernel_fails_the_check():
    right = numerics.check(planted(), SMALL, torch.device("cpu"))
    assert all(r[col.NUMERICS_PASSED] for r in right)  # the harness passes a right kernel
    wrong_update = numerics.check(planted(lr_scale=1.0 + 2**-10), SMALL, torch.device("cpu"))
    assert {r["kernel"] for r in wrong_update if not r[col.NUMERICS_PASSED]} == {"sgd", "adagrad"}

    def off_by_one(weight, ids, starts, batch, tables):
        pooled = torch_ops.forward_fp32(weight, ids.long(), starts, batch, tables)
        pooled[0, 0, 0] += 1.0  # one element of one bag
        return pooled

    wrong_lookup = numerics.check(planted(off_by_one), SMALL, torch.device("cpu"))
    assert numerics.said(wrong_lookup).startswith("NUMERICS FAILED: 2 of 6: lookup at batch 32")

    def crashes(*args):
        raise RuntimeError("no kernel for this shape")

    failed = numerics.check(planted(crashes), SMALL[:1], torch.device("cpu"))
    assert not any(r[col.NUMERICS_PASSED] for r in failed) and "RuntimeError" in failed[0]["failure"]


def test_the_triton_records_of_a_lending_whose_check_failed_are_left_out(tmp_path, monkeypatch):
    monkeypatch.setenv(settings.INVOCATION, "lending-bad")
    row = {"shape": "s", "kernel": "sgd", col.KERNEL_PATH: "triton", col.NUMERICS_PASSED: False}
    store.append(tmp_path / NUMERICS_RECORDS, make_record(numerics.STUDY, row))
    monkeypatch.setenv(settings.INVOCATION, "lending-good")
    store.append(tmp_path / NUMERICS_RECORDS, make_record(numerics.STUDY, {**row, col.NUMERICS_PASSED: True}))
    (machine,) = set(store.load(tmp_path / NUMERICS_RECORDS)[col.MACHINE])
    assert failed_checks(tmp_path) == {(machine, "lending-bad")}
    frame = pd.DataFrame({
        col.MACHINE: [machine] * 4, col.INVOCATION: ["lending-bad", "lending-bad", "lending-good", "lending-good"],
        col.KERNEL_PATH: ["triton", "cpp", "triton", "cpp"], col.RUN_ID: ["r1", "r1", "r2", "r2"],
        col.STUDY: ["s"] * 4, col.VARIANT: ["gpu-hbm", "gpu-host"] * 2, col.REPEAT: [0] * 4,
    })  # fmt: skip
    kept = checked_kernels(frame, failed_checks(tmp_path))
    assert list(kept[col.INVOCATION] + "/" + kept[col.KERNEL_PATH]) == ["lending-bad/cpp", "lending-good/triton",
                                                                        "lending-good/cpp"]  # fmt: skip
    assert dict(kept.attrs["left_out"]) == {(machine, NUMERICS_FAILED): 1}


@pytest.mark.parametrize("part", sorted(gpu_lending.LENDINGS))
def test_every_lending_checks_its_headline_shapes_first_and_judges_by_400_s(tmp_path, part):
    plan = gpu_lending.phases(tmp_path, dry_run=False, lending=part)
    first = plan[0]
    assert first.kind == "numerics" and first.headline and plan[1].kind == "runs"
    measured = [cfg for phase in plan if phase.whole for run in phase.runs
                for _, _, cfg in gpu_lending.gpu_budget.pending_items(run, set())[0]]  # fmt: skip
    assert set(numerics.shapes(measured)) <= set(first.shapes)  # every verdict run's GPU shape is checked
    assert gpu_lending.verdicts_end_s(plan) <= gpu_lending.VERDICTS_BY_S
