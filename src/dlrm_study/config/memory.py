"""How many bytes a run needs, how many the device has free, and refusing a run that would not fit."""

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path

from dlrm_study.config.schema import Config, Loop, Placement
from dlrm_study.config.validate import placements
from dlrm_study.errors import UsageError

GiB = 1024**3


@dataclass
class MemoryEstimate:
    tables: int
    optimizer_state: int
    dense: int
    activations: int

    @property
    def total(self) -> int:
        return self.tables + self.optimizer_state + self.dense + self.activations


def estimate_memory(cfg: Config) -> MemoryEstimate:
    """Bytes a training run needs: fp32 tables, optimizer state, dense params, activations.

    Activations count each MLP layer's output kept for backward and its gradient, the
    interaction, and per looked-up id what the loop allocates for it: the reference loop's
    sparse gradient (one row per id), or the gpu loop's staged ids and its update's sort
    buffers (`gpu_id_bytes`: it makes no per-id gradient row).
    """
    m, b, lookups = cfg.model, cfg.train.batch_size, cfg.data.lookups_per_table
    rows = sum(m.table_rows)
    tables = rows * m.embedding_dim * 4
    optimizer_state = 0  # plain SGD keeps none
    layers = m.bottom_layers + m.top_layers
    dense_params = sum(fan_in * fan_out + fan_out for fan_in, fan_out in layers)
    widths = [m.dense_features, *m.bottom_mlp, m.interaction_width, *m.top_mlp]
    features = m.num_tables + 1
    per_sample = 2 * sum(widths) + 3 * features * m.embedding_dim + 2 * features * features
    ids = b * m.num_tables * lookups
    per_id = gpu_id_bytes(cfg) if cfg.train.loop == Loop.GPU else 8 * 3 + m.embedding_dim * 4
    activations = 2 * b * per_sample * 4 + ids * per_id
    return MemoryEstimate(tables, optimizer_state, dense_params * 4 * 3, activations)


RING_IDS = 4_000_000  # a benchmark ring holds about this many staged ids (2 to 8 batches)


def ring_batches(capacity: int) -> int:
    """Batches in a benchmark's ring of staged batches: 2 to 8, fewer the larger they are."""
    return max(2, min(8, RING_IDS // max(capacity, 1)))


def gpu_id_bytes(cfg: Config) -> float:
    """Device bytes per looked-up id of a gpu-loop run, benchmarked over a ring of staged batches: the
    ring's ids and the step's static copy (int32), the update's sort (keys, order, the sort's own
    scratch of about as much again, each id's bag) and its chunks' partial sums (a row per 32 ids)."""
    capacity = cfg.train.batch_size * cfg.model.num_tables * cfg.data.lookups_per_table
    staged = (ring_batches(capacity) + 1) * 4
    update = 2 * (4 + 8) + 8 + cfg.model.embedding_dim * 4 / 32
    return staged + update


def available_memory(device: str) -> int:
    """Bytes free on `device` now: MemAvailable for the CPU, free memory for a GPU."""
    if device.startswith("cuda"):
        import torch

        free, _total = torch.cuda.mem_get_info()
        return free
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def table_bytes(cfg: Config, placement: str) -> tuple[int, int]:
    """(device, host) bytes of all tables and their optimizer state if every table had `placement`."""
    m, t = cfg.model, cfg.train
    rows = sum(m.table_rows)
    table = rows * (m.embedding_dim + (t.optimizer == "rowwise_adagrad")) * 4
    if placement in (Placement.HBM, Placement.TORCHREC_FUSED):
        return table, 0
    if placement == Placement.CACHED:  # the cached rows, plus 8 bytes per row (its slot) and 24 per slot
        slots = max(1, math.ceil(t.cache_fraction * rows))
        return slots * (table // rows + 24) + rows * 8, table
    if placement == Placement.TORCHREC_FUSED_UVM_CACHING:  # torchrec's default cache: 20% of rows
        return table // 5, table
    return 0, table  # host, uvm, torchrec-fused_uvm


def split_memory(cfg: Config) -> tuple[int, int]:
    """(device, host) bytes of a gpu-loop run with its per-table placements."""
    need = estimate_memory(cfg)
    device = need.dense + need.activations
    host = 0
    for rows, placement in zip(cfg.model.table_rows, placements(cfg), strict=True):
        one = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, table_rows=[rows]))
        on_device, on_host = table_bytes(one, placement)
        device, host = device + on_device, host + on_host
    return device, host


def check_fits(cfg: Config, device: str) -> MemoryEstimate:
    """Refuse, before allocation, a config whose estimate exceeds what `device` has free."""
    need = estimate_memory(cfg)
    if cfg.train.loop == Loop.GPU and device.startswith("cuda"):
        check_split_fits(cfg, device)
        return need
    have = available_memory(device)
    if need.total > have:
        raise UsageError(
            f"config {cfg.name!r} needs about {need.total / GiB:.1f} GiB "
            f"(tables {need.tables / GiB:.1f}, optimizer {need.optimizer_state / GiB:.1f}, "
            f"activations {need.activations / GiB:.1f}) but {device} has {have / GiB:.1f} GiB available"
        )
    return need


def check_split_fits(cfg: Config, device: str) -> None:
    """The gpu loop's share on the GPU and its share in host memory, each checked against what is free."""
    on_device, on_host = split_memory(cfg)
    for where, need in ((device, on_device), ("host", on_host)):
        have = available_memory("cpu" if where == "host" else device)
        if need > have:
            raise UsageError(
                f"config {cfg.name!r} with placement {cfg.train.placement} needs about {need / GiB:.1f} GiB "
                f"in {where} memory but {have / GiB:.1f} GiB is available (choose another train.placement)"
            )
