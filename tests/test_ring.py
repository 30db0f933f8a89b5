"""Benchmark input from a ring made before the timing: sizes, what records say, staged batches train the same."""

import itertools

import pytest
import torch

from dlrm_study import config
from dlrm_study.data import make_data, ring, stage
from dlrm_study.data.batch import ids_capacity
from dlrm_study.measure.bench import bench
from dlrm_study.measure.prepared import prepare
from dlrm_study.model import kernels
from dlrm_study.model.kernels import torch_ops
from dlrm_study.train import build, train_step

PATHS = [pytest.param("cpp", id="cpp"), pytest.param("torch", id="torch")]


def test_ring_covers_the_tables_rows_within_bounds():
    assert ring.ring_batches(config.preset("tiny")) == 7  # 4,000 rows, 64 x 4 x 2.5 ids a batch
    assert ring.ring_batches(config.preset("dlrm-benchmark")) == 3  # 2^22 ids at most, 1.64M ids a batch
    assert ring.ring_batches(config.preset("kaggle")) == ring.MAX_BATCHES  # 33.8M rows, 3,328 ids a batch
    assert ring.ring_batches(config.load("tiny", ["model.table_rows=4x10"])) == 2  # at least two


def test_ring_makes_its_batches_once_then_hands_them_out_in_turn():
    made = itertools.count()
    handed = ring.make_ring(made, 3, lambda index: f"batch {index}")
    assert next(made) == 3  # all made up front
    assert list(itertools.islice(handed, 7)) == [f"batch {i % 3}" for i in range(7)]


@pytest.mark.parametrize("loop", ["optimized", "reference"])
def test_synthetic_benchmarks_read_a_ring_and_say_so(tiny, loop):
    tiny.train.loop = loop
    fields = bench(tiny, steps=2, warmup=1, profile_steps=0, progress=False)
    assert fields["input"] == "ring" and fields["ring_batches"] == 7


def test_criteo_input_stays_a_stream(criteo_cfg):
    prepared = prepare(criteo_cfg)
    assert prepared.input == "stream" and prepared.ring_batches is None


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_staged_batches_train_the_fused_arch_bit_for_bit_as_bags_do(small, path, precision):
    if path == "cpp" and kernels.load() is None:
        pytest.skip("no C++ kernels here")
    small.train.loop, small.train.precision = "optimized", precision
    runs = [build(small), build(small)]
    for run in runs:
        run.model.sparse_arch.ops = kernels.load() if path == "cpp" else torch_ops
    capacity = ids_capacity(small.train.batch_size, small.model.table_rows, small.data.lookups_per_table) + 5
    data = make_data(small)
    for i in range(4):
        batch = data.batch(i)
        staged = stage(batch, small.model.table_rows, capacity)  # padded past the last bag: never read
        assert torch.equal(train_step(runs[0], batch), train_step(runs[1], staged))
    assert torch.equal(runs[0].model.sparse_arch.master_weight(), runs[1].model.sparse_arch.master_weight())
