"""The fused CPU sparse arch: C++ and PyTorch kernels, Split-SGD, equivalence with the reference."""

import contextlib
import os
import shutil
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from dlrm_study import config
from dlrm_study.data import SyntheticData
from dlrm_study.errors import UsageError
from dlrm_study.model import kernels
from dlrm_study.model.interaction import DotInteraction
from dlrm_study.model.kernels import torch_ops
from dlrm_study.report import checks
from dlrm_study.train import build, train, train_step

# conftest's `small`: fixed bags of 6 ids over small tables, so ids repeat within and across bags.
SMALL = ["data.pooling=fixed", "data.lookups_per_table=6", "model.table_rows=50-70-30-90", "train.batch_size=32"]

CPP = kernels.load()
PATHS = [
    pytest.param(CPP, id="cpp", marks=pytest.mark.skipif(CPP is None, reason="no compiler")),
    pytest.param(torch_ops, id="torch"),
]


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """torch's thread count set for the block, restored after it however the block ends."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def kernel_inputs(seed: int = 0, batch: int = 16, tables: int = 3, dim: int = 8, rows: int = 50):
    """Bags of 4 ids over few rows, so ids repeat within bags and across them."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, rows, (batch * tables * 4,), generator=gen)
    offsets = torch.arange(0, len(ids) + 1, 4)
    weight = torch.randn(rows, dim, generator=gen)
    grad = torch.randn(batch, tables, dim, generator=gen)
    return weight, ids, offsets, grad, batch, tables


def expected_pooled(weight, ids, offsets, batch, tables):
    out = torch.zeros(batch, tables, weight.shape[1])
    for bag in range(batch * tables):
        table, sample = divmod(bag, batch)
        out[sample, table] = weight[ids[offsets[bag] : offsets[bag + 1]]].sum(0)
    return out


@pytest.mark.parametrize("ops", PATHS)
def test_forward_pools_each_bag(ops):
    weight, ids, offsets, _, batch, tables = kernel_inputs()
    want = expected_pooled(weight, ids, offsets, batch, tables)
    torch.testing.assert_close(ops.forward_fp32(weight, ids, offsets, batch, tables), want)
    hi, _ = torch_ops.split(weight)
    truncated = hi.view(torch.bfloat16).float()
    want = expected_pooled(truncated, ids, offsets, batch, tables)
    torch.testing.assert_close(ops.forward_bf16(hi, ids, offsets, batch, tables), want)
    # A Split-SGD table's upper halves, a strided view of its [hi | lo] rows: the same sums.
    torch.testing.assert_close(ops.forward_bf16(torch_ops.upper(torch_ops.interleave(weight)), ids, offsets, batch,
                                                tables), want)  # fmt: skip


@pytest.mark.parametrize("ops", PATHS)
def test_sgd_sums_repeated_ids(ops):
    weight, ids, offsets, grad, batch, tables = kernel_inputs()
    want = weight.clone()
    for position, row in enumerate(ids.tolist()):  # one update per looked-up id
        bag = int(torch.searchsorted(offsets, position, right=True)) - 1
        table, sample = divmod(bag, batch)
        want[row] -= 0.1 * grad[sample, table]
    ops.sgd_fp32(weight, ids, offsets, grad, 0.1, batch, tables)
    torch.testing.assert_close(weight, want, rtol=0, atol=1e-6)


@pytest.mark.parametrize("ops", PATHS)
def test_split_sgd_reassembles_exactly_to_fp32_sgd(ops):
    weight, ids, offsets, grad, batch, tables = kernel_inputs(seed=1)
    table = torch_ops.interleave(weight)
    assert table.shape == (len(weight), 2 * weight.shape[1]) and table.dtype == torch.int16
    assert torch.equal(torch_ops.master(table), weight)
    for _ in range(3):
        ops.sgd_fp32(weight, ids, offsets, grad, 0.05, batch, tables)
        ops.sgd_split_bf16(table, ids, offsets, grad, 0.05, batch, tables)
        assert torch.equal(torch_ops.master(table), weight)  # bit for bit
    truncated = (weight.view(torch.int32) & ~0xFFFF).view(torch.float32)
    assert torch.equal(torch_ops.upper(table).view(torch.bfloat16).float(), truncated)  # the bf16 weight: first half


@pytest.mark.parametrize("ops", PATHS)
def test_split_rowwise_adagrad_reassembles_exactly_to_fp32(ops):
    weight, ids, offsets, grad, batch, tables = kernel_inputs(seed=6)
    table, momentum, split_momentum = torch_ops.interleave(weight), torch.zeros(len(weight)), torch.zeros(len(weight))
    for _ in range(3):
        ops.rowwise_adagrad_fp32(weight, momentum, ids, offsets, grad, 0.1, 1e-8, batch, tables)
        ops.rowwise_adagrad_split_bf16(table, split_momentum, ids, offsets, grad, 0.1, 1e-8, batch, tables)
        assert torch.equal(torch_ops.master(table), weight) and torch.equal(split_momentum, momentum)


def test_interleaved_rows_round_trip():
    """[hi | lo] per row: the first half is the bf16 weight, the second the low bits; joined, the fp32 value."""
    weight = torch.randn(7, 5)
    table = torch_ops.interleave(weight)
    hi, lo = torch_ops.split(weight)
    assert torch.equal(table[:, :5], hi) and torch.equal(table[:, 5:], lo)
    assert torch.equal(torch_ops.master(table), weight)
    assert torch_ops.upper(table).data_ptr() == table.data_ptr()  # a view: forward reads the table itself


@pytest.mark.skipif(CPP is None, reason="no compiler")
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("optimizer", ["sgd", "rowwise_adagrad"])
def test_cpp_prefetch_changes_no_bit(precision, optimizer):
    """The kernels prefetch rows ahead; at any distance (0: none, -1: the default) forward and update give the
    same bits."""
    outputs = []
    for ahead in (0, 1, 3, 64, 4096, -1):  # rows ahead: none, one, a few, more than the rows, the most, the default
        weight, ids, offsets, grad, batch, tables = kernel_inputs(seed=7, rows=40)
        table = torch_ops.interleave(weight) if precision == "bf16" else weight
        previous = CPP.set_prefetch_rows(ahead, ahead)
        try:
            if precision == "bf16":
                pooled = CPP.forward_bf16(torch_ops.upper(table), ids, offsets, batch, tables)
            else:
                pooled = CPP.forward_fp32(table, ids, offsets, batch, tables)
            momentum = torch.zeros(len(weight))
            if optimizer == "sgd":
                update = CPP.sgd_split_bf16 if precision == "bf16" else CPP.sgd_fp32
                update(table, ids, offsets, grad, 0.1, batch, tables)
            else:
                update = CPP.rowwise_adagrad_split_bf16 if precision == "bf16" else CPP.rowwise_adagrad_fp32
                update(table, momentum, ids, offsets, grad, 0.1, 1e-8, batch, tables)
        finally:
            CPP.set_prefetch_rows(*previous)
        outputs.append((pooled, table, momentum))
    for pooled, table, momentum in outputs[1:]:
        assert torch.equal(pooled, outputs[0][0]) and torch.equal(table, outputs[0][1])
        assert torch.equal(momentum, outputs[0][2])


@pytest.mark.skipif(CPP is None, reason="no compiler")
def test_cpp_kernels_run_the_prefetch_distance_set_in_rows():
    """The distance is set in rows, for the gather and the update apart, and is what the kernels run at any row
    size; -1 gives back the kernels' default, and no distance past the most or below -1 is taken."""
    previous = CPP.set_prefetch_rows(5, 9)
    try:
        assert CPP.prefetch_rows(128, 256) == [5, 9] and CPP.prefetch_rows(512, 64) == [5, 9]
        assert CPP.set_prefetch_rows(0, 2) == [5, 9] and CPP.prefetch_rows(128, 256) == [0, 2]
        CPP.set_prefetch_rows(-1, -1)
        default = CPP.prefetch_rows(128, 256)
        assert all(rows > 0 for rows in default) and CPP.prefetch_rows(256, 128) == default[::-1]  # by bytes touched
        for bad in [(-2, 0), (0, -2), (10**6, 0)]:
            with pytest.raises(RuntimeError, match="prefetch distance"):
                CPP.set_prefetch_rows(*bad)
    finally:
        CPP.set_prefetch_rows(*previous)


@pytest.mark.parametrize("ops", PATHS)
def test_rowwise_adagrad_matches_its_definition(ops):
    weight, ids, offsets, grad, batch, tables = kernel_inputs(seed=2)
    want, momentum = weight.clone(), torch.zeros(len(weight))
    summed = torch.zeros_like(weight)
    for position, row in enumerate(ids.tolist()):
        bag = int(torch.searchsorted(offsets, position, right=True)) - 1
        summed[row] += grad[bag % batch, bag // batch]
    touched = ids.unique()
    want_momentum = torch.zeros(len(weight))
    want_momentum[touched] = summed[touched].square().mean(1)
    want[touched] -= 0.1 * summed[touched] / (want_momentum[touched].sqrt() + 1e-8).unsqueeze(1)
    ops.rowwise_adagrad_fp32(weight, momentum, ids, offsets, grad, 0.1, 1e-8, batch, tables)
    torch.testing.assert_close(momentum, want_momentum)
    torch.testing.assert_close(weight, want, rtol=0, atol=1e-6)


@pytest.mark.skipif(CPP is None, reason="no compiler")
def test_cpp_update_is_the_same_for_any_thread_count():
    results = []
    for threads in (1, 2, 3):
        weight, ids, offsets, grad, batch, tables = kernel_inputs(seed=3, rows=20)
        with torch_threads(threads):
            CPP.sgd_fp32(weight, ids, offsets, grad, 0.1, batch, tables)
        results.append(weight)
    assert all(torch.equal(results[0], w) for w in results[1:])


def params(run):
    tables = torch.cat(run.model.sparse_arch.tables())
    dense = [p.detach() for p in run.model.dense_parameters()]
    return tables, dense


@pytest.mark.parametrize("optimizer", ["sgd", "rowwise_adagrad"])
@pytest.mark.parametrize("ops", PATHS)
def test_fused_fp32_loop_equals_reference(small, ops, optimizer):
    """From identical weights, k steps with repeated ids: same tables and dense parameters (1e-5)."""
    small.train.optimizer = optimizer
    reference = build(small)
    fused_cfg = config.Config.from_dict(small.to_dict())
    fused_cfg.train.loop = "optimized"
    fused = build(fused_cfg)
    fused.model.sparse_arch.ops = ops
    assert torch.equal(params(fused)[0], params(reference)[0])
    data = SyntheticData(small)
    for i in range(6):
        batch = data.batch(i)
        torch.testing.assert_close(train_step(fused, batch), train_step(reference, batch), rtol=0, atol=1e-5)
    (fused_tables, fused_dense), (ref_tables, ref_dense) = params(fused), params(reference)
    assert not torch.equal(ref_tables, params(build(small))[0])  # the tables did train
    torch.testing.assert_close(fused_tables, ref_tables, rtol=0, atol=1e-5)
    for a, b in zip(fused_dense, ref_dense, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)


@pytest.mark.parametrize("step", ["fused-update", "+table-batching", "+huge-pages"])
def test_each_ablation_step_trains_what_the_reference_trains(small, step):
    """Notebook 02's ablation switches techniques off; each step still computes the reference's numbers."""
    from dlrm_study.config.variants import REGISTRY

    reference = build(small)
    ablated_cfg = config.load("tiny", [*SMALL, *REGISTRY[step]])
    ablated = build(ablated_cfg)
    arch = ablated.model.sparse_arch
    assert arch.table_batching == ablated_cfg.train.table_batching
    assert isinstance(ablated.model.interaction, DotInteraction)  # the fused interaction comes last
    data = SyntheticData(small)
    for i in range(4):
        batch = data.batch(i)
        torch.testing.assert_close(train_step(ablated, batch), train_step(reference, batch), rtol=0, atol=1e-5)
    torch.testing.assert_close(params(ablated)[0], params(reference)[0], rtol=0, atol=1e-5)


def test_optimized_switches_apply_to_the_optimized_loop_only(small):
    small.train.huge_pages = False
    with pytest.raises(UsageError, match=r"train\.huge_pages switches a technique of the optimized loop"):
        config.validate(small)


def test_bf16_split_sgd_tracks_fp32_loss():
    cfg = config.load("tiny", ["train.loop=optimized"])
    fp32 = build(cfg)
    bf16_cfg = config.load("tiny", ["train.loop=optimized", "train.precision=bf16"])
    bf16 = build(bf16_cfg)
    if bf16_cfg.train.precision != "bf16":
        pytest.skip("this CPU has no bf16 support")
    a = train(fp32, SyntheticData(cfg).batches(), 200)
    b = train(bf16, SyntheticData(bf16_cfg).batches(), 200)
    window = 25
    for start in range(0, 200, window):
        mean_a, mean_b = sum(a[start : start + window]) / window, sum(b[start : start + window]) / window
        assert abs(mean_a - mean_b) < 0.03, (start, mean_a, mean_b)
    assert sum(b[-window:]) < sum(b[:window])  # and it learns


def can_build_cpp() -> bool:
    """Whether this machine has what torch needs to build the kernels: a C++ compiler, ninja, Python's headers.

    Asked of the machine, not of `kernels.load()`, which falls back to PyTorch quietly on any failure.
    """
    if os.environ.get("DLRM_STUDY_KERNELS") == "torch":
        return False
    compiler = shutil.which(os.environ.get("CXX", "c++"))
    headers = Path(sysconfig.get_paths()["include"], "Python.h").is_file()
    return bool(compiler and shutil.which("ninja") and headers)


def optimized_arch(cfg: config.Config):
    cfg.train.loop = "optimized"
    return build(cfg).model.sparse_arch


@pytest.mark.skipif(not can_build_cpp(), reason="no C++ toolchain: the PyTorch path is expected")
def test_fused_arch_runs_the_cpp_kernels_where_they_can_be_built(small):
    arch = optimized_arch(small)
    assert arch.kernel_path == "cpp"
    assert Path(arch.ops.__file__).suffix == ".so"  # the compiled extension, not a Python module


def test_fused_arch_runs_the_torch_kernels_when_cpp_is_switched_off(small, monkeypatch):
    monkeypatch.setenv("DLRM_STUDY_KERNELS", "torch")
    monkeypatch.setattr(kernels, "load", kernels.load.__wrapped__)  # uncached: reads the switch again
    arch = optimized_arch(small)
    assert arch.kernel_path == "torch" and arch.ops is torch_ops


def test_fused_arch_falls_back_to_torch_when_the_build_fails(small, monkeypatch):
    from torch.utils import cpp_extension

    def no_compiler(**kwargs):
        raise OSError("no compiler")

    monkeypatch.setenv("DLRM_STUDY_KERNELS", "auto")
    monkeypatch.setattr(kernels, "load", kernels.load.__wrapped__)
    monkeypatch.setattr(cpp_extension, "load", no_compiler)
    with pytest.warns(UserWarning, match=r"fused CPU kernels unavailable \(OSError\); using the PyTorch path"):
        arch = optimized_arch(small)
    assert arch.kernel_path == "torch" and arch.ops is torch_ops


def test_tables_are_advised_onto_huge_pages():
    from dlrm_study.model.tables import hugepages

    setting = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    table = hugepages.empty(1 << 20, 4)
    assert table.shape == (1 << 20, 4)
    if setting.exists() and "[never]" not in setting.read_text():
        assert hugepages.advise(torch.empty(1 << 20, 4))
    assert not hugepages.advise(torch.empty(10))  # below one huge page: nothing to ask for


@pytest.mark.parametrize("ops", PATHS)
def test_fused_interaction_matches_dlrm_forward_and_backward(ops):
    from dlrm_study.model.interaction import DotInteraction, FusedDotInteractionFunction

    gen = torch.Generator().manual_seed(4)
    dense, pooled = torch.randn(6, 5, generator=gen), torch.randn(6, 3, 5, generator=gen)
    weights = torch.randn(6, 5 + 6, generator=gen)
    a = [dense.clone().requires_grad_(), pooled.clone().requires_grad_()]
    b = [dense.clone().requires_grad_(), pooled.clone().requires_grad_()]
    fused = FusedDotInteractionFunction.apply(a[0], a[1], ops)
    plain = DotInteraction(4)(b[0], b[1])
    torch.testing.assert_close(fused, plain)
    (fused * weights).sum().backward()
    (plain * weights).sum().backward()
    torch.testing.assert_close(a[0].grad, b[0].grad)
    torch.testing.assert_close(a[1].grad, b[1].grad)


@pytest.mark.parametrize("ops", PATHS)
def test_dense_split_sgd_reassembles_to_fp32_sgd(ops):
    gen = torch.Generator().manual_seed(5)
    weight, grad = torch.randn(300, generator=gen), torch.randn(300, generator=gen).bfloat16()
    hi, lo = torch_ops.split(weight)
    ops.split_sgd_dense(hi, lo, grad.view(torch.int16), 0.1)
    assert torch.equal(torch_ops.join(hi, lo), weight - 0.1 * grad.float())


def test_bf16_run_keeps_fp32_masters_of_the_dense_weights():
    cfg = config.load("tiny", ["train.loop=optimized", "train.precision=bf16"])
    run = build(cfg)
    if cfg.train.precision != "bf16":
        pytest.skip("this CPU has no bf16 support")
    fp32 = build(config.load("tiny", ["train.loop=optimized"]))
    first = run.model.bottom_mlp[0].weight
    assert first.dtype == torch.bfloat16
    master = torch_ops.join(first.view(torch.int16), run.dense_optimizer.state[first]["lo"])
    assert torch.equal(master, fp32.model.bottom_mlp[0].weight)  # the same fp32 initialisation


def test_split_sgd_check_runs_the_kernel_training_runs(monkeypatch):
    """Notebook 07's check steps training's optimizer: a broken kernel there makes it false."""
    from types import SimpleNamespace

    assert checks.split_sgd_exact() == (True, "cpp" if can_build_cpp() else "torch")
    forgets_the_update = SimpleNamespace(NAME="cpp", split_sgd_dense=lambda hi, lo, grad, lr: None)  # names itself
    monkeypatch.setattr(kernels, "load", lambda: forgets_the_update)
    assert checks.split_sgd_exact() == (False, "cpp")


def sequential_pooled(weight, ids, offsets, batch, tables):
    """Each bag's rows added one at a time from 0.0 in fp32, in bag order: the fused forward's additions."""
    out = torch.zeros(batch, tables, weight.shape[1])
    for bag in range(batch * tables):
        table, sample = divmod(bag, batch)
        for row in ids[offsets[bag] : offsets[bag + 1]].tolist():
            out[sample, table] = out[sample, table] + weight[row]
    return out


@pytest.mark.skipif(CPP is None, reason="no compiler")
@pytest.mark.parametrize("dim", [7, 16, 32, 64, 128])
def test_cpp_forward_is_exact_in_every_specialised_dimension(dim):
    """The forward keeps its sums in registers for dims 16/32/64/128, two ids per step, and walks bags of
    0, 1 (pooling factor 1), 2, 3 and 5 ids: each sum bit for bit the one-at-a-time fp32 sum, fp32 and bf16."""
    gen = torch.Generator().manual_seed(dim)
    batch, tables, rows = 6, 3, 40
    sizes = torch.tensor([0, 1, 2, 3, 5, 1] * tables)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)])
    ids = torch.randint(0, rows, (int(sizes.sum()),), generator=gen)
    weight = torch.randn(rows, dim, generator=gen)
    assert torch.equal(CPP.forward_fp32(weight, ids, offsets, batch, tables),
                       sequential_pooled(weight, ids, offsets, batch, tables))  # fmt: skip
    table = torch_ops.interleave(weight)
    truncated = torch_ops.upper(table).contiguous().view(torch.bfloat16).float()
    assert torch.equal(CPP.forward_bf16(torch_ops.upper(table), ids, offsets, batch, tables),
                       sequential_pooled(truncated, ids, offsets, batch, tables))  # fmt: skip
    ones = torch.arange(batch * tables + 1)  # pooling factor 1: every bag one id
    assert torch.equal(CPP.forward_fp32(weight, ids[: batch * tables], ones, batch, tables),
                       sequential_pooled(weight, ids[: batch * tables], ones, batch, tables))  # fmt: skip


@pytest.mark.skipif(CPP is None, reason="no compiler")
@pytest.mark.parametrize("threads", [1, 2, 3, 5])
def test_cpp_bucketed_update_applies_each_id_in_bag_order(threads):
    """One shared bucketing pass hands each thread its rows' ids: every id applied once, in bag order, on
    any thread count (5 threads over 7 rows: some own none), bit for bit the one-at-a-time update."""
    weight, ids, offsets, grad, batch, tables = kernel_inputs(seed=9, rows=7, dim=64)
    want = weight.clone()
    step = torch.tensor(0.1, dtype=torch.float32)
    for position, row in enumerate(ids.tolist()):
        bag = int(torch.searchsorted(offsets, position, right=True)) - 1
        want[row] = want[row] - step * grad[bag % batch, bag // batch]
    with torch_threads(threads):
        CPP.sgd_fp32(weight, ids, offsets, grad, 0.1, batch, tables)
    assert torch.equal(weight, want)


@pytest.mark.parametrize("ops", PATHS)
@pytest.mark.parametrize("dim", [64, 13])
def test_bf16_interaction_is_bit_for_bit_the_casts_around_the_fp32_one(ops, dim):
    """In the bf16 loop the interaction takes the bottom MLP's bf16 output and gives bf16 (gradients likewise),
    widening and rounding inside: the same bits, forward and backward, as casting to fp32 before the fp32
    kernel and to bf16 after it. Fails before: the kernels took fp32 only."""
    from dlrm_study.model.interaction import FusedDotInteractionFunction

    gen = torch.Generator().manual_seed(8)
    batch, tables = 8, 26
    dense = torch.randn(batch, dim, generator=gen).bfloat16()
    pooled = torch.randn(batch, tables, dim, generator=gen)
    a = [dense.clone().requires_grad_(), pooled.clone().requires_grad_()]
    b = [dense.clone().requires_grad_(), pooled.clone().requires_grad_()]
    out = FusedDotInteractionFunction.apply(a[0], a[1], ops)
    cast = FusedDotInteractionFunction.apply(b[0].float(), b[1], ops).bfloat16()
    assert out.dtype == torch.bfloat16 and torch.equal(out, cast)
    grad = torch.randn(out.shape, generator=gen).bfloat16()
    out.backward(grad)
    cast.backward(grad)
    assert a[0].grad.dtype == torch.bfloat16 and torch.equal(a[0].grad, b[0].grad)
    assert a[1].grad.dtype == torch.float32 and torch.equal(a[1].grad, b[1].grad)


@pytest.mark.parametrize("ops", PATHS)
def test_interaction_is_within_the_dot_error_bound(ops):
    """The C++ interaction rounds with fused multiply-adds, not as bmm does: each dot of D terms (and each
    feature gradient, a sum of at most F terms) is within the standard bound of a float sum of n
    products, n * u * sum |terms| (u = 2^-24, fp32's unit roundoff), of the exact (float64) value."""
    from dlrm_study.model.interaction import FusedDotInteractionFunction

    gen = torch.Generator().manual_seed(6)
    batch, tables, dim = 4, 26, 64
    dense, pooled = torch.randn(batch, dim, generator=gen), torch.randn(batch, tables, dim, generator=gen)
    a = [dense.clone().requires_grad_(), pooled.clone().requires_grad_()]
    out = FusedDotInteractionFunction.apply(a[0], a[1], ops)
    features = torch.cat([dense.unsqueeze(1), pooled], 1).double()
    rows, cols = torch.tril_indices(tables + 1, tables + 1, offset=-1)
    products = features[:, rows] * features[:, cols]  # (B, pairs, D)
    exact, u = products.sum(-1), 2.0**-24
    assert torch.equal(out[:, :dim], dense)
    assert ((out[:, dim:].double() - exact).abs() <= dim * u * products.abs().sum(-1)).all()
    grad = torch.randn(out.shape, generator=gen)
    out.backward(grad)
    g = grad[:, dim:].double()
    pair_grad = torch.zeros(batch, tables + 1, tables + 1, dtype=torch.float64)
    pair_grad[:, rows, cols] = g
    pair_grad = pair_grad + pair_grad.transpose(1, 2)  # each pair's gradient into both features
    exact_grad = pair_grad @ features
    exact_grad[:, 0] += grad[:, :dim].double()  # the dense vector's own gradient passes through, then the pairs'
    terms = pair_grad.abs() @ features.abs()
    terms[:, 0] += grad[:, :dim].abs().double()
    got = torch.cat([a[0].grad.unsqueeze(1), a[1].grad], 1).double()
    assert ((got - exact_grad).abs() <= (tables + 1) * u * terms).all()  # at most F terms per element


def test_the_bf16_loop_casts_nothing_around_its_interaction():
    """The optimized bf16 loop's interaction reads the bottom MLP's bf16 output and gives the top MLP bf16: no
    cast of either, forward or backward, in a step (the batch's dense input is still cast: the profile sees casts).
    Fails before: the bottom output was widened to fp32 and the interaction's output cast to bf16."""
    from dlrm_study.data import make_data
    from dlrm_study.train.run import place

    run = build(config.load("tiny", ["train.loop=optimized", "train.precision=bf16"]))
    batches = make_data(run.cfg).batches()
    train_step(run, place(run, next(batches)))  # warm up
    with torch.profiler.profile(record_shapes=True) as prof:
        train_step(run, place(run, next(batches)))
    casts = {tuple(e.input_shapes[0]) for e in prof.events() if e.name == "aten::_to_copy" and e.input_shapes}
    m, batch = run.cfg.model, run.cfg.train.batch_size
    features = m.num_tables + 1
    around = {(batch, m.embedding_dim), (batch, m.embedding_dim + features * (features - 1) // 2)}
    assert casts and not casts & around, f"cast around the interaction: {casts & around}"
