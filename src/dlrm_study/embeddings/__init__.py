"""Swappable sparse archs behind one interface (see `base.SparseArch`)."""

import torch

from dlrm_study.config import Config
from dlrm_study.embeddings.base import SparseArch
from dlrm_study.embeddings.reference import ReferenceSparseArch

__all__ = ["ReferenceSparseArch", "SparseArch", "make_sparse_arch"]


def make_sparse_arch(cfg: Config, generator: torch.Generator) -> SparseArch:
    """The sparse arch of the config's loop, initialised from `generator`."""
    m = cfg.model
    if cfg.train.loop == "reference":
        return ReferenceSparseArch(m.table_rows, m.embedding_dim, cfg.train.learning_rate, generator)
    raise ValueError(f"no sparse arch for loop {cfg.train.loop!r}")
