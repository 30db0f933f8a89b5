"""`train.placement=auto`: the fastest placement whose tables fit the device."""

import dataclasses

from dlrm_study.config import memory
from dlrm_study.config.schema import Config, Loop, Placement
from dlrm_study.errors import UsageError

# Expected speed, fastest first: device memory, hot rows cached on the device, rows read
# over PCIe by GPU kernels, then CPU lookups. Notebook 05 measures the order.
AUTO_ORDER = ("hbm", "cached", "uvm", "host")


def resolve_placement(cfg: Config, device: str) -> str:
    """`auto` -> the first placement of AUTO_ORDER that fits on `device` (others unchanged)."""
    if cfg.train.loop != Loop.GPU or cfg.train.placement != Placement.AUTO:
        return cfg.train.placement
    if not device.startswith("cuda"):
        return "hbm"  # the CPU is its own device memory
    reasons = []
    for placement in AUTO_ORDER:
        trial = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, placement=placement))
        try:
            memory.check_split_fits(trial, device)
            return placement
        except UsageError as err:
            reasons.append(str(err))
    raise UsageError(f"train.placement auto: no placement fits ({reasons[-1]})")
