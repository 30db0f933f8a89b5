"""Synthetic batches with a learnable signal.

Ids are uniform or Zipf(alpha) per table, bags have a fixed or uniform pooling factor,
dense features are uniform in [0, 1), and labels are drawn from a fixed random
*teacher*, so a model can learn and AUC means something. `data.teacher` picks it:

- `additive`: a score per id (hashed into at most 65,536 buckets per table) and a linear
  function of the dense features.
- `dlrm`: a teacher DLRM: a linear bottom layer (dense -> TEACHER_DIM), one TEACHER_DIM
  embedding per id bucket (bags sum-pooled), the dot interaction of every pair of features
  and a linear top over the bottom output, the dots and the additive teacher's id scores.
  Its logit's variance is split TEACHER_SHARES between the dense, id and pairwise terms, and with
  Zipf ids only each table's TEACHER_HOT_RANKS hottest ids carry signal (`hot_buckets`).
  Its probability of each label is known (`probabilities`), so the AUC it reaches on the
  labels it drew is the ceiling any model can attain on them.

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
TEACHERS = ("additive", "dlrm")
TEACHER_DIM = 4  # the teacher DLRM's embedding width: small, so a student of any width can represent it
# How the dlrm teacher's logit variance is split. S3's accuracy question is about the embedding update, so
# most of the signal is in the ids' first-order scores, which a student learns fastest; the dense term and
# the pairwise dots (learnt slowly: both factors start random) keep a tenth each, so the labels still have both.
TEACHER_SHARES = {"dense": 0.1, "ids": 0.8, "pairwise": 0.1}
# With Zipf ids, only each table's hottest ranks carry the dlrm teacher's signal (scores and embeddings); the
# rest are looked up and trained as ever but say nothing of the label. A student cannot learn the score of
# an id it sees a few times in a short run, so the tail's signal would be a ceiling no run reaches. 100 ranks of
# Zipf(1.05) over 20,000 rows draw about 56% of a table's lookups (mlperf-scaled's benchmark, one fp32 seed:
# 90% of the attainable gain in 800 steps; with 200 ranks, 88% in 1,000).
TEACHER_HOT_RANKS = 100


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
        self.dlrm = TeacherDLRM(self.model, teacher) if self.data.teacher == "dlrm" else None
        if self.dlrm is not None and self.data.id_distribution == "zipf":
            rows = self.model.table_rows
            hot = [hot_buckets(len(scores), n) for scores, n in zip(self.id_scores, rows, strict=True)]
            self.id_scores = [scores * mask for scores, mask in zip(self.id_scores, hot, strict=True)]
            self.dlrm.tables = [table * mask.unsqueeze(1) for table, mask in zip(self.dlrm.tables, hot, strict=True)]

    def batch(self, index: int) -> Batch:
        """Batch number `index` of this stream."""
        return self.sample(index)[0]

    def probabilities(self, index: int) -> torch.Tensor:
        """The teacher's probability of a positive label for each sample of batch `index` (its labels' source)."""
        return self.sample(index)[1]

    def sample(self, index: int) -> tuple[Batch, torch.Tensor]:
        """Batch number `index` and the teacher's probabilities its labels were drawn from."""
        seed = np.random.SeedSequence([self.seed, self.stream, index]).generate_state(2, np.uint64)
        gen = torch.Generator().manual_seed(int(seed[0] >> np.uint64(1)))
        b = self.batch_size
        dense = torch.rand(b, self.model.dense_features, generator=gen)
        indices, offsets, lengths_of = [], [], []
        dense_term = (dense - 0.5) @ self.dense_weights
        sparse_score = torch.zeros(b)
        for table, rows in enumerate(self.model.table_rows):
            lengths = self._lengths(b, gen)
            ids = self._ids(int(lengths.sum()), rows, gen)
            offsets.append(torch.cumsum(lengths, 0) - lengths)
            indices.append(ids)
            lengths_of.append(lengths)
            sparse_score += self._bag_scores(table, ids, lengths) * lengths.rsqrt()
        # Dense and sparse terms each have unit variance (the latter's less where only hot ids score); the additive
        # teacher sums them, the dlrm teacher weighs them and its pairwise dots by TEACHER_SHARES.
        ids_term = sparse_score / self.model.num_tables**0.5
        score = dense_term + ids_term
        if self.dlrm is not None:
            terms = {"dense": dense_term, "ids": ids_term, "pairwise": self.dlrm.pairwise(dense, indices, lengths_of)}
            score = sum(TEACHER_SHARES[k] ** 0.5 * t for k, t in terms.items()) * 2**0.5
        prob = torch.sigmoid(TEACHER_SCALE * score / 2**0.5)
        labels = (torch.rand(b, generator=gen) < prob).float()
        return Batch(dense, indices, offsets, labels), prob

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


class TeacherDLRM:
    """The pairwise half of the `dlrm` teacher: bottom layer, bucketed embeddings, dot interaction, linear top."""

    def __init__(self, model, generator: torch.Generator) -> None:
        k, features = TEACHER_DIM, model.dense_features
        # Dense features are uniform: centred, each has variance 1/12; each bottom output has unit variance.
        self.bottom = torch.randn(features, k, generator=generator) * (12.0 / features) ** 0.5
        self.tables = [torch.randn(min(rows, TEACHER_BUCKETS), k, generator=generator) for rows in model.table_rows]
        pairs = (model.num_tables + 1) * model.num_tables // 2
        self.top = torch.randn(pairs, generator=generator)

    def pairwise(self, dense: torch.Tensor, indices: list[torch.Tensor], lengths: list[torch.Tensor]) -> torch.Tensor:
        """Each sample's top-layer score over the dots of every pair of features, of unit variance."""
        features = [(dense - 0.5) @ self.bottom]
        for table, ids, n in zip(self.tables, indices, lengths, strict=True):
            vectors = table[ids % len(table)]
            if len(ids) % len(n) == 0 and bool((n == len(ids) // len(n)).all()):  # fixed pooling: no bag index
                pooled = vectors.view(len(n), -1, TEACHER_DIM).sum(1)
            else:
                bag = torch.repeat_interleave(torch.arange(len(n)), n)
                pooled = torch.zeros(len(n), TEACHER_DIM).index_add_(0, bag, vectors)
            features.append(pooled * n.rsqrt().unsqueeze(1))  # unit variance per component, any pooling
        stacked = torch.stack(features, 1)
        rows, cols = torch.triu_indices(len(features), len(features), 1)
        dots = (stacked @ stacked.transpose(1, 2))[:, rows, cols] / TEACHER_DIM**0.5
        return dots @ self.top / len(self.top) ** 0.5


def hot_buckets(buckets: int, rows: int) -> torch.Tensor:
    """1 at the teacher buckets of a table's TEACHER_HOT_RANKS hottest Zipf ids (`SyntheticData._ids`), else 0."""
    mask = torch.zeros(buckets)
    ranks = torch.arange(min(TEACHER_HOT_RANKS, rows))
    mask[(ranks * SCATTER) % rows % buckets] = 1.0
    return mask


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
