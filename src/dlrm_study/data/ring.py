"""Benchmark input off the critical path: synthetic batches made before the timing starts, then reused in turn.

Why: a benchmark times the training step, and on a 2-core machine a dlrm-benchmark batch made
between steps takes a fifth of a step's time on the same cores and caches. So, as the gpu loop
does (`train.gpu.make_ring`), a benchmark's synthetic batches are made up front, placed, and
staged where the sparse arch reads staged batches (the fused CPU kernels: ids checked and stacked
over the tables when made, as a data loader hands a table-batched kernel its ids). The ring holds
enough ids to cover the tables' rows once (up to `RING_IDS`), so a row comes round again no sooner
than in a fresh uniform stream and the ring does not warm the caches. Criteo input is a stream and
keeps its loader; records say which (`input`: `ring` or `stream`).
"""

import itertools
import math
from collections.abc import Callable, Iterator

from dlrm_study.config import Config
from dlrm_study.data.batch import Batch, StagedBatch

RING_IDS = 2**22  # ids a ring holds at most (32 MiB of them)
MAX_BATCHES = 1024


def ring_batches(cfg: Config) -> int:
    """Batches in the config's ring: ids to cover the tables' rows once, within RING_IDS and MAX_BATCHES; 2 at least."""
    lookups = cfg.data.lookups_per_table
    mean = (lookups + 1) / 2 if cfg.data.pooling == "uniform" else lookups
    per_batch = cfg.train.batch_size * cfg.model.num_tables * mean
    return max(2, min(MAX_BATCHES, math.ceil(min(sum(cfg.model.table_rows), RING_IDS) / per_batch)))


def make_ring(
    batches: Iterator[Batch], count: int, prepare: Callable[[Batch], Batch | StagedBatch]
) -> Iterator[Batch | StagedBatch]:
    """`count` batches made now and `prepare`d (placed, staged), then handed out in turn without end."""
    return itertools.cycle([prepare(next(batches)) for _ in range(count)])
