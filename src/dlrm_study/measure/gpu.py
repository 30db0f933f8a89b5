"""GPU limits, the gpu loop's block-timed benchmark, and the embedding-only benchmark.

- `copy_bandwidth`: device-to-device copy of a large buffer (bytes read + written per second),
  and pinned host-to-device copy: the two ceilings the placements live under.
- `measure_training`: the gpu loop's step (captured as a CUDA graph where it can be) over a
  ring of batches already on the device, warmed up until steady, then timed in blocks of many
  steps with one event pair per block; a short profiled window counts kernels per step and
  the GPU's busy fraction, and says whether the point was device- or host-bound.
- `embedding_bench`: the sparse arch alone (lookup, backward fused with the update) on staged
  batches; the bytes it must move at least over its time, as a fraction of the copy bandwidth,
  for the lookup alone and for lookup + update.

On the CPU (the GPU script's dry run) the same code times with the wall clock.
"""

import math
import statistics
import time
from collections.abc import Callable

import torch

from dlrm_study.config import Config, validate
from dlrm_study.data import make_data, stage
from dlrm_study.data.batch import ids_capacity
from dlrm_study.embeddings import make_sparse_arch
from dlrm_study.measure.bench import (
    Prepared,
    elapsed_ms,
    peak_memory,
    quiet_stderr,
    reset_peak_memory,
    step_times,
    synchronize,
    what_ran,
)
from dlrm_study.records import columns as col
from dlrm_study.train.gpu_step import GpuStep, make_ring, ring_size, takes_staged
from dlrm_study.train.loop import resolve_device

WARMUP_STEPS, WARMUP_S = 50, 2.0  # warm up until this many steps or seconds, whichever comes first
BLOCKS = 5  # the median block's interval is [min, max]: 94% for the median of 5
BLOCK_S = 0.1  # a block lasts about this long on a GPU ...
BLOCK_STEPS = (10, 500)  # ... within this many steps
PROFILE_STEPS = 5
DEVICE_BOUND = 0.9  # GPU busy at least this share of the profiled window: the device bounds the step


def copy_bandwidth(device: torch.device, mib: int = 1024, repeats: int = 10) -> dict[str, float]:
    """GB/s of a device-to-device copy (read + write) and of a pinned host-to-device copy."""
    n = mib * 2**20 // 4
    src, dst = torch.empty(n, device=device), torch.empty(n, device=device)
    host = torch.empty(n, pin_memory=device.type == "cuda")
    d2d = statistics.median(elapsed_ms(lambda: dst.copy_(src), device) for _ in range(repeats))
    h2d = statistics.median(elapsed_ms(lambda: dst.copy_(host, non_blocking=True), device) for _ in range(repeats))
    nbytes = n * 4
    return {"copy_gbps": 2 * nbytes / d2d / 1e6, "h2d_gbps": nbytes / h2d / 1e6}


def measure_training(prepared: Prepared, steps: int, warmup: int, profile_steps: int = 0) -> dict[str, object]:
    """The gpu loop's step, block-timed over a ring of device-resident batches: a record's fields.

    `warmup` and `steps` are least counts: on a GPU the warm-up goes on to `WARMUP_STEPS` or
    `WARMUP_S` and a block lasts about `BLOCK_S`; on the CPU (a dry run) they are the counts.
    The step's graph and ring are kept with the prepared run, so its repeats reuse them.
    """
    cfg, run = prepared.cfg, prepared.run
    on_gpu = run.device.type == "cuda"
    if prepared.gpu_step is None:
        prepared.gpu_step = GpuStep(run)
        prepared.ring = make_ring(prepared.gpu_step, prepared.batches, ring_size(prepared.gpu_step.capacity))
    step, ring = prepared.gpu_step, prepared.ring
    arch = run.model.sparse_arch
    turn = iter(range(2**62))

    def one() -> None:
        step(ring[next(turn) % len(ring)])

    def some(n: int) -> Callable[[], None]:
        return lambda: [one() for _ in range(n)]

    reset_peak_memory(run.device)
    warmed = warm_up(one, warmup, *((WARMUP_STEPS, WARMUP_S) if on_gpu else (warmup, 0.0)), run.device)
    block = steps
    if on_gpu:
        per_step_ms = elapsed_ms(some(3), run.device) / 3
        block = min(max(round(BLOCK_S * 1e3 / per_step_ms), steps, BLOCK_STEPS[0]), BLOCK_STEPS[1])
    arch.stats()  # counters (a cache's hits) from here on only
    block_ms = [elapsed_ms(some(block), run.device) / block for _ in range(BLOCKS)]
    counters = arch.stats()
    profiled = profile_window(one, PROFILE_STEPS if on_gpu else max(profile_steps, 1), run.device)
    return {
        **what_ran(run),
        col.STEPS: block * BLOCKS,
        col.WARMUP: warmed,
        **step_times(block_ms, cfg.train.batch_size),
        col.CAPTURE: step.kind,
        "capture_note": step.reason,
        "timing": "blocks",
        "blocks": BLOCKS,
        "block_steps": block,
        "ms_block_min": min(block_ms),
        "ms_block_max": max(block_ms),
        "input": "ring",
        "ring_batches": len(ring),
        col.INPUT_MS_MEDIAN: math.nan,  # batches come from the ring on the device: input is not timed
        **profiled,
        **counters,
        **peak_memory(run.device),
    }


def warm_up(one: Callable[[], None], least: int, steps: int, seconds: float, device: torch.device) -> int:
    """Steps until `steps` have run or `seconds` have passed (at least `least`); returns how many ran."""
    start, done = time.perf_counter(), 0
    while done < least or (done < steps and time.perf_counter() - start < seconds):
        one()
        done += 1
    synchronize(device)
    return done


def profile_window(one: Callable[[], None], steps: int, device: torch.device) -> dict[str, object]:
    """Kernels per step, the GPU's busy share of the window and what bound the step, from a profiled window.

    Busy: the union of the device's activity intervals over the span from the first to the last;
    below `DEVICE_BOUND` the device waited for the host. On the CPU only the op count is known.
    """
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with quiet_stderr():
        prof = torch.profiler.profile(activities=activities)
        prof.start()
    try:
        for _ in range(steps):
            one()
        synchronize(device)
    finally:
        with quiet_stderr():
            prof.stop()
    events = prof.events()
    if device.type != "cuda":
        ops = [
            e
            for e in events
            if e.name.startswith("aten::") and not (e.cpu_parent and e.cpu_parent.name.startswith("aten::"))
        ]
        return {"kernels_per_step": len(ops) / steps, "gpu_busy_fraction": math.nan, "bound": "cpu"}
    spans = sorted(
        (e.time_range.start, e.time_range.end) for e in events if e.device_type == torch.autograd.DeviceType.CUDA
    )
    busy = busy_fraction(spans)
    return {
        "kernels_per_step": len(spans) / steps,
        "gpu_busy_fraction": busy,
        "bound": "device" if busy >= DEVICE_BOUND else "host",
    }


def busy_fraction(spans: list[tuple[float, float]]) -> float:
    """Share of [first start, last end] covered by the (sorted) intervals."""
    if not spans:
        return math.nan
    covered, reach = 0.0, spans[0][0]
    for start, end in spans:
        if end > reach:
            covered += end - max(start, reach)
            reach = end
    whole = max(end for _, end in spans) - spans[0][0]
    return covered / whole if whole > 0 else math.nan


def embedding_bench(
    cfg: Config, steps: int = 20, warmup: int = 5, limits: dict[str, float] | None = None
) -> dict[str, object]:
    """The sparse arch alone: its lookup, and its lookup + fused backward/update, each with its bandwidth.

    Kernel archs (hbm, uvm, cached) read staged batches, as in training; host takes per-table bags.
    """
    validate(cfg)
    device = resolve_device(cfg.train.device)
    arch = make_sparse_arch(cfg, torch.Generator().manual_seed(cfg.train.seed), device)
    batches = make_data(cfg).batches()
    staged = takes_staged(arch)
    capacity = ids_capacity(cfg.train.batch_size, cfg.model.table_rows, cfg.data.lookups_per_table)
    grad = torch.randn(cfg.train.batch_size, cfg.model.num_tables, cfg.model.embedding_dim, device=device)
    forward_ms, ms, ids = [], [], 0
    for i in range(warmup + steps):
        batch = next(batches)
        count = sum(len(t) for t in batch.indices)
        if staged:
            batch = stage(batch, cfg.model.table_rows, capacity).to(device)
        else:
            batch = batch.to(device, ids_device=arch.ids_device)

        def forward(batch=batch) -> None:
            with torch.no_grad():
                arch.lookup(batch)

        def step(batch=batch) -> None:
            arch.lookup(batch).backward(grad)
            arch.update()

        if i == warmup:
            arch.stats()
        took_forward = elapsed_ms(forward, device) if arch.placement != "cached" else math.nan
        took = elapsed_ms(step, device)
        if i >= warmup:
            forward_ms.append(took_forward)
            ms.append(took)
            ids += count
    median, forward = statistics.median(ms), statistics.median(forward_ms)
    row_bytes = (ids / steps) * cfg.model.embedding_dim * 4
    # Every looked-up row: read by the lookup, read and written by the update (fp32).
    moved = 3 * row_bytes
    limits = limits or {}
    record = {
        col.LOOP: cfg.train.loop,
        col.PLACEMENT: arch.placement,
        col.KERNEL_PATH: arch.kernel_path,
        col.DEVICE: device.type,
        col.BATCH_SIZE: cfg.train.batch_size,
        col.STEPS: steps,
        col.THREADS: torch.get_num_threads(),
        "embedding_ms_median": median,
        col.MS_MEDIAN: median,
        col.MS_P10: col.quantile(ms, 0.1),
        col.MS_P90: col.quantile(ms, 0.9),
        "embedding_gbps": moved / median / 1e6,
        # The lookup alone (not for cached: a lookup in training mode fills the cache, so it is no read).
        "embedding_forward_ms_median": forward,
        "embedding_forward_gbps": row_bytes / forward / 1e6,
        **limits,
        **arch.stats(),
    }
    if "copy_gbps" in limits:
        record["embedding_copy_fraction"] = record["embedding_gbps"] / limits["copy_gbps"]
        record["embedding_forward_copy_fraction"] = record["embedding_forward_gbps"] / limits["copy_gbps"]
    return record
