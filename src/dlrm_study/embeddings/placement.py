"""The gpu loop's sparse arch: tables placed in device memory, host memory, or both.

`make_placed_arch` builds the arch a config's `train.placement` names. A per-table list
("hbm,hbm,cached,host") groups the tables by placement, gives each group its own arch, and
puts the pooled embeddings back in table order (`PlacedSparseArch`).
"""

import torch

from dlrm_study.config import Config, placements
from dlrm_study.data.batch import fixed_bag_size
from dlrm_study.embeddings.base import SparseArch
from dlrm_study.embeddings.cached import CachedSparseArch
from dlrm_study.embeddings.device_tables import DeviceTablesSparseArch
from dlrm_study.embeddings.host import HostSparseArch
from dlrm_study.errors import UsageError


def make_placed_arch(cfg: Config, generator: torch.Generator, device: torch.device) -> SparseArch:
    """The sparse arch of the gpu loop for `train.placement` (already resolved from `auto`)."""
    m, t = cfg.model, cfg.train
    if t.placement.startswith("torchrec"):
        return torchrec_arch(cfg, generator, device)
    each = placements(cfg)
    if len(set(each)) == 1:
        return one_placement(each[0], m.table_rows, cfg, generator, device)
    groups = {p: [i for i, q in enumerate(each) if q == p] for p in dict.fromkeys(each)}
    archs = {
        p: one_placement(p, [m.table_rows[i] for i in tables], cfg, generator, device) for p, tables in groups.items()
    }
    return PlacedSparseArch(m.table_rows, m.embedding_dim, groups, archs, device)


def one_placement(
    placement: str, table_rows: list[int], cfg: Config, generator: torch.Generator, device: torch.device
) -> SparseArch:
    dim, lr, optimizer = cfg.model.embedding_dim, cfg.train.learning_rate, cfg.train.optimizer
    bag_size = fixed_bag_size(cfg.data.pooling, cfg.data.lookups_per_table)
    if placement in ("hbm", "uvm"):
        return DeviceTablesSparseArch(table_rows, dim, lr, generator, optimizer, device, placement, bag_size)
    if placement == "host":
        return HostSparseArch(table_rows, dim, lr, generator, optimizer, device)
    if placement == "cached":
        t = cfg.train
        return CachedSparseArch(
            table_rows, dim, lr, generator, optimizer, device, t.cache_fraction, t.cache_policy, bag_size
        )
    raise ValueError(f"no sparse arch for placement {placement!r}")


def torchrec_arch(cfg: Config, generator: torch.Generator, device: torch.device) -> SparseArch:
    """torchrec's fused TBE with fbgemm-gpu's CUDA kernels, tables where the placement says."""
    if device.type != "cuda":
        raise UsageError(f"train.placement {cfg.train.placement} needs a CUDA GPU (fbgemm-gpu's CUDA kernels)")
    from dlrm_study.embeddings.torchrec_arch import TorchrecSparseArch

    m, t = cfg.model, cfg.train
    kernel = t.placement.removeprefix("torchrec-")
    return TorchrecSparseArch(m.table_rows, m.embedding_dim, t.learning_rate, generator, t.optimizer, device, kernel)


class PlacedSparseArch(SparseArch):
    """Tables split by placement, one arch per group; output in the config's table order."""

    name = "placed"
    backward_node = "FusedLookup"

    def __init__(
        self,
        table_rows: list[int],
        dim: int,
        groups: dict[str, list[int]],
        archs: dict[str, SparseArch],
        device: torch.device,
    ) -> None:
        super().__init__(table_rows, dim)
        self.groups, self.device = groups, device
        self.archs = torch.nn.ModuleDict(archs)
        self.placement = ",".join(dict.fromkeys(groups))
        # Host groups want their ids on the CPU; device groups copy theirs over themselves.
        if any(arch.ids_device is not None for arch in archs.values()):
            self.ids_device = torch.device("cpu")
        order = [i for tables in groups.values() for i in tables]
        self.restore = torch.empty(len(order), dtype=torch.int64)
        self.restore[torch.tensor(order)] = torch.arange(len(order))

    @property
    def kernel_path(self) -> str:
        return ",".join(arch.kernel_path for arch in self.archs.values())

    def forward(self, indices: list[torch.Tensor], offsets: list[torch.Tensor]) -> torch.Tensor:
        parts = []
        for placement, tables in self.groups.items():
            pooled = self.archs[placement]([indices[i] for i in tables], [offsets[i] for i in tables])
            parts.append(pooled)
        return torch.cat(parts, dim=1)[:, self.restore.to(self.device)]

    def update(self) -> None:
        for arch in self.archs.values():
            arch.update()

    def tables(self) -> list[torch.Tensor]:
        out: list[torch.Tensor] = [torch.empty(0)] * len(self.table_rows)
        for placement, tables in self.groups.items():
            for i, weight in zip(tables, self.archs[placement].tables(), strict=True):
                out[i] = weight.cpu()
        return out

    def stats(self) -> dict[str, float]:
        merged: dict[str, float] = {}
        for arch in self.archs.values():
            merged.update(arch.stats())
        return merged
