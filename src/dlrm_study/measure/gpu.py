"""GPU limits and the embedding-only benchmark behind the `hbm` bandwidth target.

- `copy_bandwidth`: device-to-device copy of a large buffer (bytes read + written per second),
  and pinned host-to-device copy: the two ceilings the placements live under.
- `embedding_bench`: the sparse arch alone (lookup, backward fused with the update) timed
  by CUDA events; the bytes it must move at least (each looked-up row read forward, read
  and written by the update) over its time, as a fraction of the measured copy bandwidth.

On the CPU (the GPU script's dry run) the same code times with the wall clock.
"""

import statistics

import torch

from dlrm_study.config import Config, validate
from dlrm_study.data import make_data
from dlrm_study.embeddings import make_sparse_arch
from dlrm_study.measure.bench import elapsed_ms, quantile
from dlrm_study.train.loop import resolve_device


def copy_bandwidth(device: torch.device, mib: int = 1024, repeats: int = 10) -> dict[str, float]:
    """GB/s of a device-to-device copy (read + write) and of a pinned host-to-device copy."""
    n = mib * 2**20 // 4
    src, dst = torch.empty(n, device=device), torch.empty(n, device=device)
    host = torch.empty(n, pin_memory=device.type == "cuda")
    d2d = statistics.median(elapsed_ms(lambda: dst.copy_(src), device) for _ in range(repeats))
    h2d = statistics.median(elapsed_ms(lambda: dst.copy_(host, non_blocking=True), device) for _ in range(repeats))
    nbytes = n * 4
    return {"copy_gbps": 2 * nbytes / d2d / 1e6, "h2d_gbps": nbytes / h2d / 1e6}


def embedding_bench(
    cfg: Config, steps: int = 20, warmup: int = 5, limits: dict[str, float] | None = None
) -> dict[str, object]:
    """The measured fields of the sparse arch's forward + fused backward/update alone, and its bandwidth."""
    validate(cfg)
    device = resolve_device(cfg.train.device)
    arch = make_sparse_arch(cfg, torch.Generator().manual_seed(cfg.train.seed), device)
    batches = make_data(cfg).batches()
    grad = torch.randn(cfg.train.batch_size, cfg.model.num_tables, cfg.model.embedding_dim, device=device)
    ms, ids = [], 0
    for i in range(warmup + steps):
        batch = next(batches)
        indices = [t.to(arch.ids_device or device) for t in batch.indices]
        offsets = [t.to(arch.ids_device or device) for t in batch.offsets]

        def step(indices=indices, offsets=offsets) -> None:
            arch(indices, offsets).backward(grad)
            arch.update()

        if i == warmup:
            arch.stats()
        took = elapsed_ms(step, device)
        if i >= warmup:
            ms.append(took)
            ids += sum(len(t) for t in indices)
    median = statistics.median(ms)
    # Every looked-up row: read by the lookup, read and written by the update (fp32).
    moved = 3 * (ids / steps) * cfg.model.embedding_dim * 4
    limits = limits or {}
    record = {
        "loop": cfg.train.loop,
        "placement": arch.placement,
        "kernel_path": arch.kernel_path,
        "device": device.type,
        "batch_size": cfg.train.batch_size,
        "steps": steps,
        "threads": torch.get_num_threads(),
        "embedding_ms_median": median,
        "ms_median": median,
        "ms_p10": quantile(ms, 0.1),
        "ms_p90": quantile(ms, 0.9),
        "embedding_gbps": moved / median / 1e6,
        **limits,
        **arch.stats(),
    }
    if "copy_gbps" in limits:
        record["embedding_copy_fraction"] = record["embedding_gbps"] / limits["copy_gbps"]
    return record
