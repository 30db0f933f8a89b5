"""The gpu loop's step: no host sync and no host-to-device copy inside it, static buffers, capture.

On the CPU the step runs eagerly over the same static buffers a CUDA graph would capture (the
Triton kernels in the interpreter, see conftest); the tests marked `gpu` capture it on a GPU.
"""

import importlib.util
import os
import subprocess
import sys

import pytest
import torch
from tests.conftest import ROOT

from dlrm_study import config
from dlrm_study.data import StagedBatch, make_data, stage
from dlrm_study.errors import UsageError
from dlrm_study.perfmodel.gpu import host_traffic
from dlrm_study.train import build, train
from dlrm_study.train.gpu import LOSS_READ_EVERY, GpuStep, LossLog, not_captured
from dlrm_study.train.run import place, train_step

SHAPE = ["model.table_rows=50-70-30-90", "train.batch_size=16", "data.lookups_per_table=3"]


def gpu_cfg(*extra: str) -> config.Config:
    return config.load("tiny", [*SHAPE, "train.loop=gpu", *extra])


def second_step_traffic(cfg: config.Config) -> dict[str, list[str]]:
    """Host reads and copies in one step, after a first one that allocated the buffers."""
    run = build(cfg)
    step = GpuStep(run)
    batches = make_data(cfg).batches()
    step(step.place(step.stage(next(batches))))
    batch = step.place(step.stage(next(batches)))  # staged and placed before the step, as the loop does
    return host_traffic(lambda: step(batch))


@pytest.mark.parametrize("placement", ["hbm", "uvm"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("optimizer", ["sgd", "rowwise_adagrad"])
def test_a_gpu_step_reads_nothing_back_and_copies_nothing_in(placement, precision, optimizer):
    cfg = gpu_cfg(f"train.placement={placement}", f"train.precision={precision}", f"train.optimizer={optimizer}")
    assert second_step_traffic(cfg) == {"reads_back": [], "copies_in": []}


def test_the_counter_sees_the_per_table_step():
    """The step as it was (per-table bags into `SparseArch.__call__`): its id check reads the bounds back
    and `batched_ids` makes a tensor from host values; the counter must see both, or the test above
    could not fail."""
    cfg = gpu_cfg("train.placement=hbm")
    run = build(cfg)
    batches = make_data(cfg).batches()
    train_step(run, place(run, next(batches)))
    batch = place(run, next(batches))
    traffic = host_traffic(lambda: train_step(run, batch))
    assert "Tensor.tolist" in traffic["reads_back"]
    assert "aten::lift_fresh" in traffic["copies_in"]


def test_cached_and_host_say_why_they_are_not_captured():
    for placement, reason in [("cached", "torch.unique"), ("host", "per-table bags on the host")]:
        run = build(gpu_cfg(f"train.placement={placement}", "train.cache_fraction=0.9"))
        run.device = torch.device("cuda")  # as if on a GPU: only the reason is asked for
        assert reason in not_captured(run)
    run = build(gpu_cfg("train.placement=hbm"))
    run.device = torch.device("cuda")
    assert not_captured(run) == ""


def test_staging_refuses_a_bad_id_in_one_line():
    cfg = gpu_cfg("train.placement=hbm")
    batch = make_data(cfg).batch(0)
    batch.indices[2][1] = 30  # table 2 has 30 rows
    message = r"^id 30 in table 2 is out of range: the table has 30 rows \(ids 0 to 29\)$"
    with pytest.raises(UsageError, match=message):
        stage(batch, cfg.model.table_rows, 16 * 4 * 3)
    run = build(cfg)
    with pytest.raises(UsageError, match=message):
        train(run, iter([batch]), 1)


def test_staged_batches_have_one_shape_and_the_bags_of_the_batch():
    cfg = gpu_cfg("train.placement=hbm")  # uniform pooling: 1 to 3 ids a bag, so counts vary
    data, capacity = make_data(cfg), 16 * 4 * 3
    staged = [stage(data.batch(i), cfg.model.table_rows, capacity) for i in range(4)]
    assert {tuple(t.shape for t in s.tensors()) for s in staged} == {((16, 13), (capacity,), (65,), (16,))}
    assert len({int(s.bag_starts[-1]) for s in staged}) > 1  # the real counts differ, the shapes do not
    batch, first = data.batch(0), staged[0]
    starts = [0, 50, 120, 150]
    for t in range(4):
        lo, hi = int(first.bag_starts[t * 16]), int(first.bag_starts[(t + 1) * 16])
        assert torch.equal(first.ids[lo:hi].long() - starts[t], batch.indices[t])
    # int32 ids (the update sorts them: half the radix passes of int64); padding: one past the last row, past
    # every bag, so the sort puts it after every real row and no row's segment holds it
    assert first.ids.dtype == torch.int32 and (first.ids[int(first.bag_starts[-1]) :] == 50 + 70 + 30 + 90).all()


def test_fixed_pooling_is_checked_when_staged():
    """Where pooling is fixed the update takes a position's bag to be position // L: staging refuses bags that
    differ (a Criteo file gives one id a bag whatever the config says)."""
    cfg = gpu_cfg("train.placement=hbm", "data.pooling=fixed")
    batch = make_data(cfg).batch(0)
    staged = stage(batch, cfg.model.table_rows, 16 * 4 * 3, bag_size=3)
    assert torch.equal(staged.bag_starts, torch.arange(65) * 3)
    uneven = make_data(gpu_cfg("train.placement=hbm")).batch(0)  # uniform pooling: 1 to 3 ids a bag
    with pytest.raises(UsageError, match="bags do not all hold 3 ids"):
        stage(uneven, cfg.model.table_rows, 16 * 4 * 3, bag_size=3)


def test_the_step_reuses_its_static_buffers():
    cfg = gpu_cfg("train.placement=hbm")
    run = build(cfg)
    step = GpuStep(run)
    batches = make_data(cfg).batches()
    step(step.place(step.stage(next(batches))))
    buffers = [t.data_ptr() for t in step.static.tensors()]
    second = step.place(step.stage(next(batches)))
    step(second)
    assert [t.data_ptr() for t in step.static.tensors()] == buffers
    assert all(torch.equal(a, b) for a, b in zip(step.static.tensors(), second.tensors(), strict=True))
    assert step.kind == "eager" and run.step == 2


def test_gpu_training_equals_the_per_table_step():
    """`train` on staged batches trains what the per-table step trains, batch for batch."""
    cfg = gpu_cfg("train.placement=hbm", "train.optimizer=rowwise_adagrad")
    staged = build(cfg)
    losses = train(staged, make_data(cfg).batches(), 6)
    per_table = build(cfg)
    batches = make_data(cfg).batches()
    expected = [train_step(per_table, place(per_table, next(batches))).item() for _ in range(6)]
    assert losses == pytest.approx(expected, abs=1e-6)
    for a, b in zip(staged.model.sparse_arch.tables(), per_table.model.sparse_arch.tables(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


def test_losses_are_read_in_blocks():
    reads = []
    log = LossLog(LOSS_READ_EVERY, lambda step, value: reads.append(step))
    for i in range(LOSS_READ_EVERY - 1):
        log.add(i + 1, torch.tensor(0.5))
    assert reads == []
    log.add(LOSS_READ_EVERY, torch.tensor(0.5))
    assert reads == list(range(1, LOSS_READ_EVERY + 1))
    log.add(LOSS_READ_EVERY + 1, torch.tensor(float("nan")))
    with pytest.raises(RuntimeError, match=f"loss became nan at step {LOSS_READ_EVERY + 1}"):
        log.read()


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


BF16_UNIT = 2.0**-8  # bf16's unit roundoff: a bf16 result rounded another way differs by at most this, relatively


def captured_tolerance(precision: str, moved: float) -> float:
    """How far a captured run may drift from the eager one, for a tensor that training moved by `moved`.

    Both run the same kernels in the same order, ours without atomics; only cuBLAS may pick another
    algorithm under capture (another split of the sum), so a GEMM's output may round differently. In
    fp32 that is a few ulps (1e-5 covers 8 steps). In bf16 one rounding is up to BF16_UNIT of the value,
    and it reaches the update as a relative error of the gradient of about that size: a parameter's
    drift is then at most about BF16_UNIT x what the updates moved it, taken 4 times (the forward
    output, its two backward GEMMs, and the loss's own rounding), plus fp32's floor.
    """
    return 1e-5 if precision == "fp32" else 4 * BF16_UNIT * moved + 1e-6


@pytest.mark.gpu
@CUDA
@pytest.mark.parametrize("placement", ["hbm", "uvm"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_captured_step_trains_what_the_eager_step_trains(placement, precision):
    """Eight steps (three eager warm-up steps, the capture, five replays) against eight eager steps."""
    runs = {}
    for graph in (True, False):
        cfg = gpu_cfg("train.device=cuda", f"train.placement={placement}", f"train.precision={precision}",
                      f"train.cuda_graph={str(graph).lower()}")  # fmt: skip
        run = build(cfg)
        losses = train(run, make_data(cfg).batches(), 8)
        runs[graph] = (run, losses)
    (captured, c_losses), (eager, e_losses) = runs[True], runs[False]
    start = build(eager.cfg)  # the same seed, untrained: how far training moved each tensor
    assert GpuStep(captured).kind == "graph" and GpuStep(eager).kind == "eager"
    assert isinstance(GpuStep(captured).stage(make_data(captured.cfg).batch(0)), StagedBatch)
    loss_atol = captured_tolerance(precision, max(abs(v) for v in e_losses))
    assert c_losses == pytest.approx(e_losses, abs=loss_atol)
    parts = [lambda r: r.model.sparse_arch.tables(), lambda r: list(r.model.dense_parameters())]
    for part in parts:
        for a, b, c in zip(part(captured), part(eager), part(start), strict=True):
            moved = float((b.detach().float().cpu() - c.detach().float().cpu()).abs().max())
            torch.testing.assert_close(a, b, rtol=0, atol=captured_tolerance(precision, moved))


@pytest.mark.gpu
@CUDA
def test_a_captured_step_on_the_gpu_reads_nothing_back():
    cfg = gpu_cfg("train.device=cuda", "train.placement=hbm", "train.precision=bf16")
    run = build(cfg)
    step = GpuStep(run)
    batches = make_data(cfg).batches()
    for _ in range(5):  # eager warm-up, then the capture
        step(step.place(step.stage(next(batches))))
    assert step.graph is not None and step.kind == "graph"
    batch = step.place(step.stage(next(batches)))
    torch.cuda.synchronize()
    assert host_traffic(lambda: step(batch)) == {"reads_back": [], "copies_in": []}


COMPILE_CHECK = ROOT / "scripts" / "triton_compile_check.py"
# The GPU machine's stack: Python 3.12, torch 2.11 (CUDA), Triton 3.6. `make triton36-check` builds a venv with
# Triton 3.6 alone (.venv-triton36) and runs the check there; this test runs it when the variable names one.
TRITON36 = os.environ.get("DLRM_STUDY_TRITON36_PYTHON", "")


def compile_check(python: str) -> subprocess.CompletedProcess:
    return subprocess.run([python, str(COMPILE_CHECK)], capture_output=True, text=True, timeout=600)


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton not installed")
def test_the_triton_kernels_compile_for_an_h200():
    """The interpreter runs what a GPU compiler may refuse (its control flow, its types): compile each
    kernel for sm_90 with Triton's own ptxas, no GPU needed (under this environment's Triton)."""
    done = compile_check(sys.executable)
    assert done.returncode == 0 and done.stdout.startswith("compiled 88 kernels under triton"), done.stderr[-3000:]


@pytest.mark.skipif(not TRITON36, reason="DLRM_STUDY_TRITON36_PYTHON unset (make triton36-check sets it)")
def test_the_triton_kernels_compile_under_the_gpu_machines_triton():
    """The same under the GPU machine's Triton 3.6 (this environment's is newer), without torch."""
    done = compile_check(TRITON36)
    assert done.returncode == 0 and done.stdout.strip() == "compiled 88 kernels under triton 3.6.0", done.stderr[-3000:]
