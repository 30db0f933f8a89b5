"""The gpu loop's placements, one entry each: its factory, its memory estimate, its cost terms, and whether
its step can be captured as a CUDA graph.

`entry(name)` is the one lookup: an unknown placement is a UsageError naming the known ones, never a
default. The cost terms name the bound terms (`perfmodel.gpu.bound_ms`) the placement's embedding traffic
is charged to; the memory estimate is `config.memory.table_bytes`'s (device, host) bytes.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch

from dlrm_study.config import Config, Placement
from dlrm_study.config.memory import table_bytes
from dlrm_study.data.batch import fixed_bag_size
from dlrm_study.errors import UsageError
from dlrm_study.model.tables.base import SparseArch, TableSpec
from dlrm_study.model.tables.cached import CachedSparseArch
from dlrm_study.model.tables.device_tables import DeviceTablesSparseArch
from dlrm_study.model.tables.host import HostSparseArch

Factory = Callable[[TableSpec, Config, torch.Generator], SparseArch]


@dataclass(frozen=True)
class PlacementEntry:
    placement: Placement
    make: Factory  # the arch over the tables of a spec
    cost_terms: tuple[str, ...]  # where its embedding bytes go in the GPU model's bound
    capturable: bool  # its step over staged batches is captured as a CUDA graph

    def memory(self, cfg: Config) -> tuple[int, int]:
        """(device, host) bytes of all tables and their optimizer state if every table had this placement."""
        return table_bytes(cfg, self.placement)


def bag_size(cfg: Config) -> int:
    return fixed_bag_size(cfg.data.pooling, cfg.data.lookups_per_table)


def device_tables(placement: Placement) -> Factory:
    return lambda spec, cfg, generator: DeviceTablesSparseArch(spec, generator, placement, bag_size(cfg))


def cached(spec: TableSpec, cfg: Config, generator: torch.Generator) -> SparseArch:
    t = cfg.train
    return CachedSparseArch(spec, generator, t.cache_fraction, t.cache_policy, bag_size(cfg))


REGISTRY: dict[Placement, PlacementEntry] = {
    entry.placement: entry
    for entry in (
        PlacementEntry(Placement.HBM, device_tables(Placement.HBM), ("hbm_ms",), capturable=True),
        PlacementEntry(Placement.UVM, device_tables(Placement.UVM), ("link_ms",), capturable=True),
        PlacementEntry(
            Placement.HOST, lambda spec, cfg, g: HostSparseArch(spec, g), ("host_embedding_ms", "link_ms"), False
        ),
        PlacementEntry(Placement.CACHED, cached, ("hbm_ms", "link_ms"), capturable=False),
    )
}


def entry(name: str) -> PlacementEntry:
    """The registered placement `name`; an unknown one is a UsageError naming the known ones."""
    known = {str(p): e for p, e in REGISTRY.items()}
    if name not in known:
        raise UsageError(f"unknown placement {name!r} for one group of tables (choose from {', '.join(known)})")
    return known[name]
