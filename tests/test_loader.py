import pytest
import torch

from dlrm_study.data import SyntheticData
from dlrm_study.data.loader import Prefetcher
from dlrm_study.train import build, train


def test_prefetcher_keeps_order_and_ends(tiny):
    data = SyntheticData(tiny)
    wanted = [data.batch(i) for i in range(5)]
    got = list(Prefetcher(iter(wanted), depth=2))
    assert [b.dense.data_ptr() for b in got] == [b.dense.data_ptr() for b in wanted]


def test_prefetcher_raises_the_producers_error_in_the_consumer():
    def broken():
        yield 1
        raise ValueError("bad line 7")

    batches = Prefetcher(broken())
    assert next(batches) == 1
    with pytest.raises(ValueError, match="bad line 7"):
        next(batches)


def test_training_with_prefetch_equals_inline(small):
    threads = torch.get_num_threads()
    inline = build(small)
    train(inline, SyntheticData(small).batches(), 10)
    small.train.prefetch = 2
    ahead = build(small)
    train(ahead, SyntheticData(small).batches(), 10)
    assert ahead.losses == inline.losses
    assert torch.get_num_threads() == threads  # the producer's single thread is its own setting
