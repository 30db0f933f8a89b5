"""Synthetic batches with a learnable signal.

Ids are uniform or Zipf(alpha) per table, bags have a fixed or uniform pooling factor,
dense features are uniform in [0, 1), and labels are drawn from a fixed random
*teacher*: a score per id (hashed into at most 65,536 buckets per table) and a linear
function of the dense features, so a model can learn and AUC means something.

Batch `i` of a stream is a pure function of (seed, stream, i): runs are repeatable,
a resumed run sees the same batches, and no state is carried between batches.
"""

from collections.abc import Iterator

import numpy as np
import torch

from dlrm_study.config import Config
from dlrm_study.data.batch import Batch

TEACHER_BUCKETS = 1 << 16
STREAMS = {"train": 0, "eval": 1}
# Odd prime multiplier: rank -> id is a bijection on [0, rows) that scatters hot ids.
SCATTER = 2654435761
# Teacher logit scale: a unit-variance score times this gives a Bayes AUC near 0.9.
TEACHER_SCALE = 3.0


class SyntheticData:
    """Batches of one stream ("train" or "eval") for a config."""

    def __init__(self, cfg: Config, stream: str = "train") -> None:
        self.model, self.data = cfg.model, cfg.data
        self.batch_size = cfg.train.batch_size
        self.seed = cfg.train.seed
        self.stream = STREAMS[stream]
        teacher = torch.Generator().manual_seed(self.data.teacher_seed)
        features = self.model.dense_features
        self.dense_weights = torch.randn(features, generator=teacher) * (12.0 / features) ** 0.5
        self.id_scores = [torch.randn(min(rows, TEACHER_BUCKETS), generator=teacher) for rows in self.model.table_rows]

    def batch(self, index: int) -> Batch:
        """Batch number `index` of this stream."""
        seed = np.random.SeedSequence([self.seed, self.stream, index]).generate_state(2, np.uint64)
        gen = torch.Generator().manual_seed(int(seed[0] >> np.uint64(1)))
        b = self.batch_size
        dense = torch.rand(b, self.model.dense_features, generator=gen)
        indices, offsets = [], []
        score = (dense - 0.5) @ self.dense_weights
        sparse_score = torch.zeros(b)
        for table, rows in enumerate(self.model.table_rows):
            lengths = self._lengths(b, gen)
            ids = self._ids(int(lengths.sum()), rows, gen)
            offsets.append(torch.cumsum(lengths, 0) - lengths)
            indices.append(ids)
            sparse_score += self._bag_scores(table, ids, lengths) * lengths.rsqrt()
        # Dense and sparse terms each have unit variance; together they are scaled.
        score += sparse_score / self.model.num_tables**0.5
        prob = torch.sigmoid(TEACHER_SCALE * score / 2**0.5)
        labels = (torch.rand(b, generator=gen) < prob).float()
        return Batch(dense, indices, offsets, labels)

    def batches(self, start: int = 0) -> Iterator[Batch]:
        """Batches `start`, `start + 1`, ... without end."""
        index = start
        while True:
            yield self.batch(index)
            index += 1

    def _bag_scores(self, table: int, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Sum of the teacher's id scores over each bag."""
        scores = self.id_scores[table]
        buckets = len(scores)
        # A power-of-two bucket count (every table of 65,536 rows or more) masks instead of dividing.
        bucket = ids & (buckets - 1) if buckets & (buckets - 1) == 0 else ids % buckets
        id_score = scores[bucket]
        if self.data.pooling == "fixed":
            return id_score.view(len(lengths), -1).sum(1)
        bag = torch.repeat_interleave(torch.arange(len(lengths)), lengths)
        return torch.zeros(len(lengths)).index_add_(0, bag, id_score)

    def _lengths(self, b: int, gen: torch.Generator) -> torch.Tensor:
        lookups = self.data.lookups_per_table
        if self.data.pooling == "fixed":
            return torch.full((b,), lookups, dtype=torch.int64)
        return torch.randint(1, lookups + 1, (b,), generator=gen)

    def _ids(self, n: int, rows: int, gen: torch.Generator) -> torch.Tensor:
        if self.data.id_distribution == "uniform":
            return torch.randint(0, rows, (n,), generator=gen)
        ranks = zipf_ranks(n, rows, self.data.zipf_alpha, gen)
        return (ranks * SCATTER) % rows


def zipf_ranks(n: int, rows: int, alpha: float, gen: torch.Generator) -> torch.Tensor:
    """`n` ranks in [0, rows), P(rank k) ~ (k + 1)^-alpha (continuous inverse CDF, rounded down)."""
    u = torch.rand(n, generator=gen, dtype=torch.float64)
    top = float(rows + 1)
    if abs(alpha - 1.0) < 1e-9:
        x = top**u
    else:
        e = 1.0 - alpha
        x = (u * (top**e - 1.0) + 1.0) ** (1.0 / e)
    return (x.floor().long() - 1).clamp_(0, rows - 1)
