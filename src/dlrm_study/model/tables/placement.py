"""The gpu loop's sparse arch: tables placed in device memory, host memory, or both.

`make_placed_arch` builds the arch a config's `train.placement` names. A per-table list
("hbm,hbm,cached,host") groups the tables by placement, gives each group its own arch, and
puts the pooled embeddings back in table order (`PlacedSparseArch`).
"""

import torch

from dlrm_study.config import Config, placements
from dlrm_study.errors import UsageError
from dlrm_study.model.tables import registry
from dlrm_study.model.tables.base import SparseArch, TableSpec, counters


def make_placed_arch(cfg: Config, generator: torch.Generator, device: torch.device) -> SparseArch:
    """The sparse arch of the gpu loop for `train.placement` (already resolved from `auto`)."""
    spec = TableSpec.of(cfg, device)
    if cfg.train.placement.startswith("torchrec"):
        return torchrec_arch(cfg, generator, device)
    each = placements(cfg)
    if len(set(each)) == 1:
        return one_placement(each[0], spec, cfg, generator)
    groups = {p: [i for i, q in enumerate(each) if q == p] for p in dict.fromkeys(each)}
    archs = {p: one_placement(p, spec.only(tables), cfg, generator) for p, tables in groups.items()}
    return PlacedSparseArch(spec, groups, archs)


def one_placement(placement: str, spec: TableSpec, cfg: Config, generator: torch.Generator) -> SparseArch:
    """The arch of one placement over the tables of `spec` (`registry.entry`: an unknown one is a UsageError)."""
    return registry.entry(placement).make(spec, cfg, generator)


def torchrec_arch(cfg: Config, generator: torch.Generator, device: torch.device) -> SparseArch:
    """torchrec's fused TBE with fbgemm-gpu's CUDA kernels, tables where the placement says."""
    if device.type != "cuda":
        raise UsageError(f"train.placement {cfg.train.placement} needs a CUDA GPU (fbgemm-gpu's CUDA kernels)")
    from dlrm_study.model.tables.torchrec_arch import TorchrecSparseArch

    kernel = cfg.train.placement.removeprefix("torchrec-")
    return TorchrecSparseArch(TableSpec.of(cfg, device), generator, kernel)


class PlacedSparseArch(SparseArch):
    """Tables split by placement, one arch per group; output in the config's table order."""

    name = "placed"

    def __init__(self, spec: TableSpec, groups: dict[str, list[int]], archs: dict[str, SparseArch]) -> None:
        super().__init__(spec)
        self.groups, self.device = groups, spec.device
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

    def counters(self) -> dict[str, float]:
        merged: dict[str, float] = {}
        for arch in self.archs.values():
            merged.update(counters(arch))
        return merged
