"""Swappable sparse archs behind one interface (see `base.SparseArch`)."""

import torch

from dlrm_study.config import Config, Loop
from dlrm_study.model.tables.base import CPU, SparseArch, TableSpec
from dlrm_study.model.tables.fused_cpu import FusedCPUSparseArch
from dlrm_study.model.tables.placement import make_placed_arch
from dlrm_study.model.tables.reference import ReferenceSparseArch

__all__ = ["FusedCPUSparseArch", "ReferenceSparseArch", "SparseArch", "TableSpec", "make_sparse_arch"]


def make_sparse_arch(cfg: Config, generator: torch.Generator, device: torch.device | None = None) -> SparseArch:
    """The sparse arch of the config's loop, initialised from `generator`, its tables where they belong."""
    t = cfg.train
    if t.loop == Loop.GPU:
        return make_placed_arch(cfg, generator, device or CPU)
    spec = TableSpec.of(cfg)
    if t.loop == Loop.REFERENCE:
        return ReferenceSparseArch(spec, generator)
    if t.loop == Loop.OPTIMIZED:
        return FusedCPUSparseArch(spec, generator, table_batching=t.table_batching, huge_pages=t.huge_pages)
    if t.loop == Loop.TORCHREC:
        from dlrm_study.model.tables.torchrec_arch import TorchrecSparseArch  # torchrec is optional

        return TorchrecSparseArch(spec, generator)
    raise ValueError(f"no sparse arch for loop {cfg.train.loop!r}")
