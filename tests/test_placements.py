"""The gpu loop's placements: each trains the same parameters as `hbm`, on the CPU here.

Triton kernels run in Triton's interpreter without a GPU (see conftest), so the kernel
logic is checked in CI; tests marked `gpu` repeat the equivalence on a CUDA device.
"""

import functools
import importlib.util
import itertools
import os

import pytest
import torch
from tests.test_fused_cpu import can_build_cpp

from dlrm_study import config
from dlrm_study.data import make_data
from dlrm_study.data.batch import padding_id
from dlrm_study.errors import UsageError
from dlrm_study.model.kernels import torch_ops, triton_ops
from dlrm_study.model.tables.base import TableSpec, counters
from dlrm_study.model.tables.cached import CachedSparseArch
from dlrm_study.train import build, train
from dlrm_study.train import checkpoint as ckpt

STEPS = 5
# Zipf ids over 1,400 rows: repeats within a batch; a batch touches about 350 distinct rows,
# so a cache of 30% of the rows (420) fills in two steps and then evicts every step.
SHAPE = [
    "data.pooling=fixed",
    "data.lookups_per_table=6",
    "model.table_rows=400-300-500-200",
    "train.batch_size=32",
]
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
TRITON_INSTALLED = importlib.util.find_spec("triton") is not None


def expected_kernel_path(placement: str, device: str = "cpu") -> str:
    """The kernels each placement group should run, from what this machine has rather than from the code:
    Triton where it is installed and runs (a GPU, or its interpreter on the CPU), the `host` placement's
    C++ where it can be built, their PyTorch twins otherwise."""
    triton_runs = TRITON_INSTALLED and (device == "cuda" or os.environ.get("TRITON_INTERPRET") == "1")
    device_kernels = "triton" if triton_runs else "torch"
    host_kernels = "cpp" if can_build_cpp() else "torch"
    groups = dict.fromkeys(placement.split(","))  # one arch per placement, in first-appearance order
    return ",".join(host_kernels if p == "host" else device_kernels for p in groups)


def gpu_cfg(placement: str, *extra: str) -> config.Config:
    return config.load("tiny", [*SHAPE, "train.loop=gpu", f"train.placement={placement}", *extra])


def trained(cfg: config.Config, steps: int = STEPS):
    run = build(cfg)
    train(run, make_data(cfg).batches(), steps)
    return run


@functools.cache
def hbm_run(optimizer: str = "sgd"):
    """The `hbm` run every placement is compared with (trained once per optimizer)."""
    return trained(gpu_cfg("hbm", f"train.optimizer={optimizer}"))


# The Triton update sums a row's repeats chunk by chunk (partial sums a long segment's head combines), the CPU
# kernels in id order: the same sums, associated otherwise, a few float32 ulps apart after 5 steps of Adagrad.
SAME_SUMS = 5e-6


def assert_same_parameters(a, b, atol: float = SAME_SUMS) -> None:
    for x, y in zip(a.model.sparse_arch.tables(), b.model.sparse_arch.tables(), strict=True):
        torch.testing.assert_close(x.cpu(), y.cpu(), rtol=0, atol=atol)
    for x, y in zip(a.model.dense_parameters(), b.model.dense_parameters(), strict=True):
        torch.testing.assert_close(x.detach().cpu(), y.detach().cpu(), rtol=0, atol=atol)


@pytest.mark.parametrize("optimizer", ["sgd", "rowwise_adagrad"])
def test_hbm_equals_the_reference_loop(optimizer):
    hbm = hbm_run(optimizer)
    assert hbm.model.sparse_arch.kernel_path == expected_kernel_path("hbm")
    reference = trained(config.load("tiny", [*SHAPE, f"train.optimizer={optimizer}"]))
    assert_same_parameters(hbm, reference, atol=1e-5)
    assert hbm.losses == pytest.approx(reference.losses, abs=1e-5)


@pytest.mark.parametrize("optimizer", ["sgd", "rowwise_adagrad"])
@pytest.mark.parametrize(
    "placement, extra",
    [
        ("host", ()),
        ("uvm", ()),  # on the CPU: hbm's storage, only the SGD update differs (see the uvm test below)
        ("cached", ("train.cache_fraction=0.3",)),
        ("cached", ("train.cache_fraction=0.3", "train.cache_policy=lfu")),
        ("hbm,cached,host,uvm", ("train.cache_fraction=0.35",)),
    ],
    ids=["host", "uvm", "cached-lru", "cached-lfu", "per-table"],
)
def test_every_placement_trains_what_hbm_trains(placement, extra, optimizer):
    hbm = hbm_run(optimizer)
    other = trained(gpu_cfg(placement, f"train.optimizer={optimizer}", *extra))
    assert other.model.sparse_arch.kernel_path == expected_kernel_path(placement)
    assert_same_parameters(hbm, other)
    if "cached" in placement:
        assert counters(other.model.sparse_arch)["cache_evicted_rows"] > 0  # write-back was exercised


def test_uvm_on_the_cpu_is_hbm_storage_with_the_segment_update(monkeypatch):
    """What the CPU `uvm` case above exercises, and what it does not.

    Pinned memory needs a CUDA allocator (torch refuses `pin_memory=True` without one), so on the CPU
    `uvm` keeps its tables where `hbm` does: ordinary CPU memory, not pinned, no unified addressing.
    What it does exercise is the update both share: each distinct row written once after its repeats
    are summed (`update_fp32`), never by atomics, which host-resident rows could not take across
    PCIe. Pinned memory read through UVA is checked only by the gpu test below.
    """
    arch = build(gpu_cfg("uvm")).model.sparse_arch
    original, calls = arch.ops.update_fp32, []

    def counted(*args) -> None:
        calls.append(args)
        original(*args)

    monkeypatch.setattr(arch.ops, "update_fp32", counted)
    arch = trained(gpu_cfg("uvm"), 2).model.sparse_arch
    assert arch.placement == "uvm" and arch.weight.device.type == "cpu" and not arch.weight.is_pinned()
    assert len(calls) == 2  # one update per step


def test_torch_kernels_give_the_same_result(monkeypatch):
    triton_run = trained(gpu_cfg("cached", "train.cache_fraction=0.3"))
    assert triton_run.model.sparse_arch.kernel_path == expected_kernel_path("cached")
    monkeypatch.setattr(triton_ops, "available", lambda device: False)
    torch_run = trained(gpu_cfg("cached", "train.cache_fraction=0.3"))
    assert torch_run.model.sparse_arch.kernel_path == "torch"
    assert_same_parameters(triton_run, torch_run)


def kernel_device() -> torch.device | None:
    """Where the compiled or interpreted Triton kernels run here: the GPU, else the CPU in Triton's
    interpreter (TRITON_INTERPRET=1, see conftest); None where neither (their tensors must live there:
    a compiled kernel given CPU tensors on a CUDA host reads host addresses as device ones)."""
    if torch.cuda.is_available() and triton_ops.available(torch.device("cuda")):
        return torch.device("cuda")
    return torch.device("cpu") if triton_ops.available(torch.device("cpu")) else None


KERNELS = pytest.mark.skipif(kernel_device() is None, reason="Triton cannot run here (no GPU, no TRITON_INTERPRET=1)")


def check_update_against_twin(device, ids, starts, grad, rows: int, dim: int, bag_size: int = 0) -> None:
    """Triton's update on `device` against the torch twin's (its segment sums) and the reference's (unique rows
    summed), SGD and row-wise Adagrad. Gradients are whole numbers and lr a power of two, so every sum is exact
    whatever its order: SGD must agree bit for bit, and Adagrad to one rounding of sqrt(m) + eps (the
    interpreter's numpy and torch round that differently) and of a large m's sum of squares."""
    batch, tables = grad.shape[:2]
    count = int(starts[-1])
    weight = torch.randn(rows, dim, generator=torch.Generator().manual_seed(1)).to(device)
    ids, starts, grad = ids.to(device), starts.to(device), grad.to(device)
    for momentum in (None, torch.zeros(rows, device=device)):
        results = []
        for ops in (triton_ops, torch_ops):
            w, m = weight.clone(), None if momentum is None else momentum.clone()
            ops.update_fp32(w, m, ids, starts, grad, 0.5, 1e-8, batch, tables, bag_size)
            results.append((w, m))
        w_ref, m_ref = weight.clone(), None if momentum is None else momentum.clone()
        if momentum is None:
            torch_ops.sgd_fp32(w_ref, ids[:count].long(), starts, grad, 0.5, batch, tables)
        else:
            torch_ops.rowwise_adagrad_fp32(w_ref, m_ref, ids[:count].long(), starts, grad, 0.5, 1e-8, batch, tables)
        for w, m in results:
            torch.testing.assert_close(w, w_ref, rtol=0 if momentum is None else 1e-6, atol=0 if m is None else 5e-7)
            if m is not None:
                torch.testing.assert_close(m, m_ref, rtol=1e-6, atol=0)
            assert not torch.equal(w, weight)  # the update did something


@KERNELS
def test_triton_kernels_match_their_torch_twins():
    """Lookup and update on a staged layout: bags of 0 to 11 ids, hot rows repeated within and across
    bags, int32 ids padded past the last bag with the padding id (no row), as staging lays them out."""
    device, gen = kernel_device(), torch.Generator().manual_seed(0)
    batch, tables, dim, rows = 16, 3, 5, 40  # dim not a power of two: masked lanes
    lengths = torch.randint(0, 12, (batch * tables,), generator=gen)
    starts = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    count = int(starts[-1])
    ids = torch.full((count + 17,), padding_id([rows]), dtype=torch.int32)  # 17 padding ids
    ids[:count] = (torch.randint(0, rows, (count,), generator=gen) % 9).int()  # few rows: many repeats
    ids[:count:2] = 7  # a hot row longer than a chunk of the update: its head adds the next chunks' partial sums
    assert (ids[:count] == 7).sum() > 2 * triton_ops.CHUNK
    weight = torch.randn(rows, dim, generator=gen).to(device)
    grad = torch.randint(-4, 5, (batch, tables, dim), generator=gen).float()
    expected = torch_ops.forward_fp32(weight.cpu(), ids[:count].long(), starts, batch, tables)
    for ops in (triton_ops, torch_ops):
        pooled = ops.forward_fp32(weight, ids.to(device), starts.to(device), batch, tables)
        torch.testing.assert_close(pooled.cpu(), expected)
    check_update_against_twin(device, ids, starts, grad, rows, dim)
    src_rows, dst_rows = torch.tensor([3, 0, 7], device=device), torch.tensor([1, 2, 0], device=device)
    d1, d2 = torch.zeros(4, dim, device=device), torch.zeros(4, dim, device=device)
    triton_ops.copy_rows(weight, src_rows, d1, dst_rows)
    torch_ops.copy_rows(weight, src_rows, d2, dst_rows)
    torch.testing.assert_close(d1, d2)


def hot_row_batch(batch: int, tables: int, bag_size: int, rows: int, hot: int, gen: torch.Generator):
    """Fixed bags of int32 ids in which one row repeats `hot` times (as mlperf-scaled's 3-row table does at a
    large batch), and whole-number gradients."""
    count = batch * tables * bag_size
    ids = torch.randint(0, rows, (count,), generator=gen, dtype=torch.int32)
    ids[torch.randperm(count, generator=gen)[:hot]] = 2  # scattered over bags and tables, one segment once sorted
    starts = torch.arange(batch * tables + 1) * bag_size
    grad = torch.randint(-2, 3, (batch, tables, 16), generator=gen).float()
    return ids, starts, grad


@KERNELS
def test_a_hot_row_of_more_than_10000_repeats_is_summed_exactly():
    """One segment over hundreds of chunks: its head combines the chunks' partial sums (not one repeat at a
    time); fixed bags, so each position's bag is its position // bag_size."""
    gen = torch.Generator().manual_seed(3)
    ids, starts, grad = hot_row_batch(batch=512, tables=3, bag_size=8, rows=500, hot=10_500, gen=gen)
    assert (ids == 2).sum() >= 10_500 > triton_ops.CHUNK * triton_ops.BLOCK_CHUNKS * 10
    check_update_against_twin(kernel_device(), ids, starts, grad, 500, 16, bag_size=8)
    check_update_against_twin(kernel_device(), ids, starts, grad, 500, 16)  # bags searched: the same result


@CUDA
@pytest.mark.gpu
def test_compiled_kernels_sum_a_hot_row_of_21845_repeats():
    """On the GPU, compiled: mlperf-scaled's 3-row table at a batch of 65,536 names each row about 21,845 times."""
    gen = torch.Generator().manual_seed(4)
    ids, starts, grad = hot_row_batch(batch=8192, tables=4, bag_size=1, rows=200_000, hot=21_845, gen=gen)
    check_update_against_twin(torch.device("cuda"), ids, starts, grad, 200_000, 16, bag_size=1)


@CUDA
@pytest.mark.gpu
@pytest.mark.parametrize("dim", [64, 128])
def test_compiled_kernels_match_their_twins_at_the_targets_row_widths(dim: int):
    """On the GPU, compiled at the sizes a target launches (rows of 64 or 128 floats, a batch of 64: multiples
    of 16, which Triton specializes as divisible by 16). The first lending's lookup compiled in the interpreter
    and without those hints, and failed here (results/gpu-session/lending1-log.txt)."""
    gen, device = torch.Generator().manual_seed(5), torch.device("cuda")
    batch, tables, rows = 64, 4, 1000
    lengths = torch.randint(0, 9, (batch * tables,), generator=gen)
    starts = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    ids = torch.randint(0, rows, (int(starts[-1]),), generator=gen, dtype=torch.int32)
    weight = torch.randn(rows, dim, generator=gen)
    expected = torch_ops.forward_fp32(weight, ids.long(), starts, batch, tables)
    pooled = triton_ops.forward_fp32(weight.to(device), ids.to(device), starts.to(device), batch, tables)
    torch.testing.assert_close(pooled.cpu(), expected)
    grad = torch.randint(-4, 5, (batch, tables, dim), generator=gen).float()
    check_update_against_twin(device, ids, starts, grad, rows, dim)


def cache(capacity_rows: int, policy: str) -> CachedSparseArch:
    gen = torch.Generator().manual_seed(0)
    return CachedSparseArch(TableSpec((10,), 2, 0.1), gen, capacity_rows / 10, policy)


def resident(arch: CachedSparseArch) -> set[int]:
    return {r for r in arch.slot_row.tolist() if r >= 0}


def test_lru_evicts_the_least_recently_used_row():
    arch = cache(3, "lru")
    for ids in ([0], [1], [2], [0], [3]):  # row 1 is now the least recently used
        arch.make_resident(torch.tensor(ids))
    assert resident(arch) == {0, 2, 3}


def test_lfu_evicts_the_least_frequently_used_row():
    arch = cache(3, "lfu")
    for ids in ([0, 0, 0], [1, 1], [2], [3]):  # row 2 was used once, the fewest
        arch.make_resident(torch.tensor(ids))
    assert resident(arch) == {0, 1, 3}


def test_evicted_rows_are_written_back_and_hits_counted():
    arch = cache(2, "lru")
    arch.make_resident(torch.tensor([4, 5]))
    arch.cache_weight += 1.0  # as if trained while cached
    before = arch.host_weight[4].clone()
    arch.make_resident(torch.tensor([6, 5]))  # evicts 4, keeps 5 (one hit)
    torch.testing.assert_close(arch.host_weight[4], before + 1.0)
    stats = counters(arch)
    assert stats["cache_hit_rate"] == pytest.approx(1 / 4) and stats["cache_slots"] == 2
    assert stats["cache_evicted_rows"] == 1
    assert torch.isnan(torch.tensor(counters(arch)["cache_hit_rate"]))  # counters reset


def test_a_batch_larger_than_the_cache_is_refused():
    with pytest.raises(UsageError, match=r"raise train\.cache_fraction"):
        cache(2, "lru").make_resident(torch.tensor([1, 2, 3]))


def test_cached_run_resumes_exactly(tmp_path):
    cfg = gpu_cfg("cached", "train.cache_fraction=0.3")
    straight = trained(cfg, 6)
    first = trained(gpu_cfg("cached", "train.cache_fraction=0.3"), 3)
    ckpt.save(first, tmp_path / "c.pt")
    resumed = ckpt.load(tmp_path / "c.pt")
    train(resumed, make_data(resumed.cfg).batches(start=3), 6)
    assert_same_parameters(straight, resumed, atol=0)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["train.placement=host"], "applies to the gpu loop only"),
        (["train.loop=gpu", "train.placement=ssd"], "is not one of"),
        (["train.loop=gpu", "train.placement=hbm,host"], "lists 2 placements for 4 tables"),
        (["train.loop=gpu", "train.placement=hbm,host,auto,hbm"], "in a per-table list"),
        (["train.loop=gpu", "train.cache_fraction=0"], "cache_fraction must be in"),
        (["train.loop=gpu", "train.cache_policy=fifo"], "cache_policy"),
    ],
)
def test_bad_placements_are_refused(overrides, message):
    with pytest.raises(UsageError, match=message):
        config.validate(config.load("tiny", overrides))


def test_torchrec_placement_needs_a_gpu():
    with pytest.raises(UsageError, match="needs a CUDA GPU"):
        build(gpu_cfg("torchrec-fused_uvm"))


def test_placement_that_cannot_fit_is_refused_with_sizes(monkeypatch):
    cfg = config.load("dlrm-benchmark", ["train.loop=gpu", "train.placement=hbm"])  # 2 GB of tables
    monkeypatch.setattr(config.memory, "available_memory", lambda device: 1 << 30)
    with pytest.raises(UsageError, match=r"needs about 2\.\d GiB in cuda memory but 1\.0 GiB"):
        config.check_fits(cfg, "cuda")


def test_auto_picks_the_first_placement_that_fits(monkeypatch):
    cfg = config.load("dlrm-benchmark", ["train.loop=gpu", "train.placement=auto"])
    free = {"cuda": 1 << 30, "cpu": 64 << 30}  # tables do not fit on the GPU, 10% of them do
    monkeypatch.setattr(config.memory, "available_memory", lambda device: free["cuda" if "cuda" in device else "cpu"])
    assert config.resolve_placement(cfg, "cuda") == "cached"
    free["cuda"] = 100 << 30
    assert config.resolve_placement(cfg, "cuda") == "hbm"
    assert config.resolve_placement(cfg, "cpu") == "hbm"


@CUDA
@pytest.mark.gpu
@pytest.mark.parametrize("placement", ["hbm", "host", "uvm", "cached"])
def test_placements_on_the_gpu_train_what_the_cpu_trains(placement):
    on_cpu = hbm_run()
    on_gpu = trained(gpu_cfg(placement, "train.device=cuda", "train.cache_fraction=0.3"))
    arch = on_gpu.model.sparse_arch
    assert arch.kernel_path == expected_kernel_path(placement, "cuda")
    if placement == "uvm":  # what the CPU cannot check: the tables in pinned host memory, read through UVA
        assert arch.weight.is_pinned() and arch.weight.device.type == "cpu"
    assert_same_parameters(on_cpu, on_gpu, atol=1e-5)


@CUDA
@pytest.mark.gpu
def test_gpu_bf16_autocast_trains():
    run = trained(gpu_cfg("hbm", "train.device=cuda", "train.precision=bf16"), 20)
    assert run.autocast and run.losses[-1] < run.losses[0]


def test_evaluation_leaves_the_cache_and_its_counters_alone():
    from dlrm_study.train import evaluate

    run = trained(gpu_cfg("cached", "train.cache_fraction=0.3"))
    arch = run.model.sparse_arch
    counters(arch)  # counters from here on
    state = {name: buf.clone() for name, buf in arch.named_buffers()}
    batches = list(itertools.islice(make_data(run.cfg).batches(), 3))
    metrics = evaluate(run, batches)
    for name, buf in arch.named_buffers():
        torch.testing.assert_close(buf, state[name], rtol=0, atol=0, msg=f"evaluation changed {name}")
    assert int(arch.lookups) == 0 and int(arch.evictions) == 0 and (state["slot_row"] >= 0).any()
    # It read the rows the tables hold: the reference loop given the same parameters scores the same.
    reference = build(config.load("tiny", SHAPE))
    with torch.no_grad():
        for mine, theirs in zip(reference.model.dense_parameters(), run.model.dense_parameters(), strict=True):
            mine.copy_(theirs)
    reference.model.sparse_arch.set_tables(arch.tables())
    assert evaluate(reference, batches) == pytest.approx(metrics, abs=1e-6)


def test_an_unknown_placement_is_a_usage_error_naming_the_known_ones():
    from dlrm_study.model.tables.placement import one_placement

    cfg = config.load("tiny", ["train.loop=gpu", "train.device=cpu"])
    spec = TableSpec.of(cfg, torch.device("cpu"))
    with pytest.raises(UsageError, match=r"unknown placement 'nvme'.*hbm, uvm, host, cached"):
        one_placement("nvme", spec, cfg, torch.Generator().manual_seed(0))


def test_each_registered_placement_says_what_its_arch_and_the_gpu_model_do():
    """Capturable where the arch has no capture blocker; cost terms where the GPU model charges its bytes;
    memory as the memory estimate says; every per-table placement registered."""
    from dlrm_study.config.memory import table_bytes
    from dlrm_study.config.schema import PLACEMENTS
    from dlrm_study.model.tables import registry
    from dlrm_study.perfmodel import gpu as gpu_model

    assert set(registry.REGISTRY) == set(PLACEMENTS)
    for placement, entry in registry.REGISTRY.items():
        cfg = config.load("tiny", ["train.loop=gpu", "train.device=cpu", f"train.placement={placement}"])
        if placement != "host" or can_build_cpp():
            arch = entry.make(TableSpec.of(cfg, torch.device("cpu")), cfg, torch.Generator().manual_seed(0))
            assert entry.capturable == (getattr(arch, "capture_blocker", None) == ""), placement
        bound = gpu_model.bound_ms(cfg, gpu_model.DEVICES["h200"], placement, hit_rate=0.5)
        charged = {term for term, ms in bound.items() if term != "dense_ms" and ms > 0}
        assert charged == set(entry.cost_terms), placement
        assert entry.memory(cfg) == table_bytes(cfg, placement)
