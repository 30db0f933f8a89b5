"""Every sparse arch refuses an id outside its table alike, before any kernel reads or writes with it.

The bad id sits in the middle table: one short of it, or one past it, is a row of a neighbouring
table in the stacked layout, which is what the unchecked kernels (C++, Triton) silently read.
"""

import functools

import pytest
import torch

from dlrm_study import config
from dlrm_study.data import SyntheticData
from dlrm_study.errors import UsageError
from dlrm_study.model.kernels import torch_ops
from dlrm_study.model.tables import make_sparse_arch
from dlrm_study.model.tables.base import SparseArch
from dlrm_study.train import build, train_step

ROWS = [5, 7, 4]
BAD_TABLE = 1
BATCH = 3
SHAPE = ["model.table_rows=5-7-4", f"train.batch_size={BATCH}", "data.pooling=fixed", "data.lookups_per_table=2"]


def has_torchrec() -> bool:
    try:
        import dlrm_study.model.tables.torchrec_arch  # noqa: F401
    except UsageError:
        return False
    return True


def torch_kernels(arch: SparseArch) -> SparseArch:
    """The same arch on the PyTorch twins of its kernels (its sub-arch's, for `host`)."""
    getattr(arch, "fused", arch).ops = torch_ops
    return arch


# Every sparse arch that can be built on the CPU: name -> (config overrides, what to do to the built arch).
ARCHS = {
    "reference": ([], None),
    "fused-cpu": (["train.loop=optimized"], None),
    "fused-cpu-torch": (["train.loop=optimized"], torch_kernels),
    "fused-cpu-bf16": (["train.loop=optimized", "train.precision=bf16"], None),
    "fused-cpu-per-table": (["train.loop=optimized", "train.table_batching=false"], None),
    "torchrec": (["train.loop=torchrec"], None),
    "hbm": (["train.loop=gpu", "train.placement=hbm"], None),
    "hbm-torch": (["train.loop=gpu", "train.placement=hbm"], torch_kernels),
    "uvm": (["train.loop=gpu", "train.placement=uvm"], None),
    "host": (["train.loop=gpu", "train.placement=host"], None),
    "host-torch": (["train.loop=gpu", "train.placement=host"], torch_kernels),
    "cached": (["train.loop=gpu", "train.placement=cached", "train.cache_fraction=0.9"], None),
    "per-table": (["train.loop=gpu", "train.placement=hbm,cached,host", "train.cache_fraction=0.9"], None),
}
TORCHREC = pytest.mark.skipif(not has_torchrec(), reason="torchrec not installed")
ARCH_PARAMS = [pytest.param(name, id=name, marks=[TORCHREC] if name == "torchrec" else []) for name in ARCHS]


@functools.cache
def cfg_of(name: str) -> config.Config:
    return config.load("tiny", [*SHAPE, *ARCHS[name][0]])


def arch_of(name: str) -> SparseArch:
    cfg = cfg_of(name)
    arch = make_sparse_arch(cfg, torch.Generator().manual_seed(0), torch.device("cpu"))
    adjust = ARCHS[name][1]
    return adjust(arch) if adjust else arch


def bags_with(bad: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Bags of 2 valid ids per sample in every table, one of the middle table's ids replaced by `bad`."""
    indices = [torch.arange(2 * BATCH) % rows for rows in ROWS]
    indices[BAD_TABLE][3] = bad
    offsets = [torch.arange(0, 2 * BATCH, 2) for _ in ROWS]
    return indices, offsets


def refusal(bad: int) -> str:
    rows = ROWS[BAD_TABLE]
    return rf"^id {bad} in table {BAD_TABLE} is out of range: the table has {rows} rows \(ids 0 to {rows - 1}\)$"


@pytest.mark.parametrize("bad", [-1, ROWS[BAD_TABLE]], ids=["negative", "rows"])
@pytest.mark.parametrize("name", ARCH_PARAMS)
def test_every_arch_refuses_an_id_outside_its_table(name, bad):
    arch = arch_of(name)
    before = [t.clone() for t in arch.tables()]
    with pytest.raises(UsageError, match=refusal(bad)):
        arch(*bags_with(bad))
    for a, b in zip(arch.tables(), before, strict=True):
        assert torch.equal(a, b)  # the tables are as they were


@pytest.mark.parametrize("name", ARCH_PARAMS)
def test_every_arch_takes_the_first_and_last_rows(name):
    arch = arch_of(name)
    indices = [torch.tensor([0, rows - 1] * BATCH) for rows in ROWS]
    offsets = [torch.arange(0, 2 * BATCH, 2) for _ in ROWS]
    pooled = arch(indices, offsets)
    assert pooled.shape == (BATCH, len(ROWS), arch.dim)


def test_the_model_refuses_a_bad_id_in_training_and_evaluation():
    run = build(cfg_of("fused-cpu"))
    batch = SyntheticData(run.cfg).batch(0)
    batch.indices[BAD_TABLE][0] = -1
    with pytest.raises(UsageError, match=refusal(-1)):
        train_step(run, batch)
    run.model.eval()
    with pytest.raises(UsageError, match=refusal(-1)), torch.no_grad():
        run.model(batch)


def subclasses(cls: type) -> list[type]:
    return [c for sub in cls.__subclasses__() for c in (sub, *subclasses(sub))]


def test_no_arch_steps_around_the_check():
    """The check sits in `SparseArch.__call__`: no arch, the distributed ones included, overrides it."""
    import dlrm_study.distributed.hybrid
    import dlrm_study.distributed.remote
    import dlrm_study.model.tables.placement

    if has_torchrec():
        import dlrm_study.distributed.torchrec_route  # noqa: F401
    archs = subclasses(SparseArch)
    assert {"RemoteSparseArch", "ShardedSparseArch", "PlacedSparseArch"} <= {c.__name__ for c in archs}
    assert [c.__name__ for c in archs if c.__call__ is not SparseArch.__call__] == []


def test_every_rank_of_the_hybrid_route_refuses_a_bad_id_in_any_table():
    """A rank holds the global batch but looks up its own tables: it must refuse a bad id in a table
    another rank owns too (naming the global table), or the owner alone fails while this rank waits."""
    from dlrm_study.distributed.hybrid import Exchange, ShardedSparseArch
    from dlrm_study.model.tables.base import TableSpec
    from dlrm_study.model.tables.reference import ReferenceSparseArch

    owners = [0, 1, 1]  # this rank (0) owns table 0; the bad id sits in table 1, another rank's
    local = ReferenceSparseArch(TableSpec(tuple(ROWS[:1]), 4, 0.1), torch.Generator().manual_seed(0))
    sharded = ShardedSparseArch(local, TableSpec(tuple(ROWS), 4), Exchange(owners, 2, 0, BATCH, 4, group=None))
    sharded.exchange = False  # no network: the refusal must come before any exchange
    indices = [torch.zeros(BATCH, dtype=torch.int64) for _ in ROWS]
    indices[BAD_TABLE][1] = ROWS[BAD_TABLE]
    offsets = [torch.arange(BATCH) for _ in ROWS]
    with pytest.raises(UsageError, match=f"id {ROWS[BAD_TABLE]} in table {BAD_TABLE} is out of range"):
        sharded.start(indices, offsets)
