"""Swappable sparse archs behind one interface (see `base.SparseArch`)."""

import torch

from dlrm_study.config import Config
from dlrm_study.model.tables.base import SparseArch
from dlrm_study.model.tables.fused_cpu import FusedCPUSparseArch
from dlrm_study.model.tables.reference import ReferenceSparseArch

__all__ = ["FusedCPUSparseArch", "ReferenceSparseArch", "SparseArch", "make_sparse_arch"]


def make_sparse_arch(cfg: Config, generator: torch.Generator, device: torch.device | None = None) -> SparseArch:
    """The sparse arch of the config's loop, initialised from `generator`, its tables where they belong."""
    m, t = cfg.model, cfg.train
    if t.loop == "gpu":
        from dlrm_study.model.tables.placement import make_placed_arch

        return make_placed_arch(cfg, generator, device or torch.device("cpu"))
    if t.loop == "reference":
        return ReferenceSparseArch(m.table_rows, m.embedding_dim, t.learning_rate, generator, t.optimizer)
    if t.loop == "optimized":
        return FusedCPUSparseArch(
            m.table_rows, m.embedding_dim, t.learning_rate, generator, t.optimizer, t.precision,
            table_batching=t.table_batching, huge_pages=t.huge_pages,
        )  # fmt: skip
    if t.loop == "torchrec":
        from dlrm_study.model.tables.torchrec_arch import TorchrecSparseArch

        return TorchrecSparseArch(m.table_rows, m.embedding_dim, t.learning_rate, generator, t.optimizer)
    raise ValueError(f"no sparse arch for loop {cfg.train.loop!r}")
