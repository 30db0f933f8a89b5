"""GPU limits, the gpu loop's block-timed benchmark, and the embedding-only benchmark.

- `copy_bandwidth`: device-to-device copy of a large buffer (bytes read + written per second),
  and pinned host-to-device copy: the two ceilings the placements live under.
- `measure_training`: the gpu loop's step (captured as a CUDA graph where it can be) over a
  ring of batches already on the device, warmed up until steady, then timed in blocks of many
  steps with one event pair per block. Whether the host or the device bounds a step is read
  from the host's enqueue time per step (issuing one step to an idle device) against the
  block-timed step. One profiled window per point (its first measurement in this process; the
  profiler set up for graphs before the first capture, `graph_profiler`) counts kernels per
  step and the device's kernel time per step; busy is that over the block-timed step.
- `embedding_bench`: the sparse arch alone (lookup, backward fused with the update) on staged
  batches, timed over blocks of calls; the bytes it must move at least over its time, as a
  fraction of the copy bandwidth, for the lookup alone and for lookup + update.

On the CPU (the GPU script's dry run) the same code times with the wall clock, and the profiled
window's "kernels" are the step's top-level aten operations.
"""

import json
import math
import statistics
import time
from collections.abc import Callable

import torch

from dlrm_study.config import Config, Placement, validate
from dlrm_study.data import make_data, stage
from dlrm_study.data.batch import fixed_bag_size, ids_capacity
from dlrm_study.measure import context, graph_profiler
from dlrm_study.measure.prepared import Prepared, what_ran
from dlrm_study.measure.timing import elapsed_ms, peak_memory, quiet_stderr, reset_peak_memory, step_times, synchronize
from dlrm_study.model.kernels import torch_ops, triton_ops
from dlrm_study.model.tables import make_sparse_arch
from dlrm_study.model.tables.base import counters
from dlrm_study.perfmodel.gpu import gpu_work
from dlrm_study.records import columns as col
from dlrm_study.train.gpu import GpuStep, make_ring, ring_size, takes_staged
from dlrm_study.train.run import resolve_device

WARMUP_STEPS, WARMUP_S = 50, 2.0  # warm up until this many steps or seconds, whichever comes first
BLOCKS = 5  # the median block's interval is [min, max]: 94% for the median of 5
BLOCK_S = 0.1  # a block lasts about this long on a GPU ...
BLOCK_STEPS = (10, 500)  # ... within this many steps
PROFILE_STEPS = 20  # steps of a point's one profiled window on a GPU (a dry run's: its profile_steps, at least 1)
ENQUEUE_TRIALS = 10  # steps issued one at a time to an idle device: the host's cost of a step (median)
# A host that needs at least this share of the step time to issue a step keeps the device waiting.
HOST_BOUND_SHARE = 0.9
EMBEDDING_BLOCK_CALLS = 20  # calls per timed block of the embedding benchmark (their launches overlap)


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
    The step's graph and ring are kept with the prepared run, so its repeats reuse them; so is
    the point's profiled window (`RunContext.profiled`: one session per point, by config hash): repeats measure
    their own steps against it.
    """
    cfg, run = prepared.cfg, prepared.run
    on_gpu = run.device.type == "cuda"
    graph_profiler.prepare(run.device)  # before this process's first capture
    if prepared.gpu_step is None:
        prepared.gpu_step = GpuStep(run)
        prepared.ring = make_ring(prepared.gpu_step, prepared.batches, ring_size(prepared.gpu_step.capacity))
    ring = prepared.ring
    arch = run.model.sparse_arch
    turn = iter(range(2**62))

    def one() -> None:
        prepared.gpu_step(ring[next(turn) % len(ring)])

    def some(n: int) -> Callable[[], None]:
        return lambda: [one() for _ in range(n)]

    reset_peak_memory(run.device)
    least = (WARMUP_STEPS, WARMUP_S) if on_gpu else (warmup, 0.0)
    try:
        warmed = warm_up(one, warmup, *least, run.device)
    except Exception as err:  # the warm-up runs the kernels first: a Triton kernel that fails fails here
        if not fall_back(prepared, err):
            raise
        warmed = warm_up(one, warmup, *least, run.device)
    step = prepared.gpu_step
    block = steps
    if on_gpu:
        per_step_ms = elapsed_ms(some(3), run.device) / 3
        block = min(max(round(BLOCK_S * 1e3 / per_step_ms), steps, BLOCK_STEPS[0]), BLOCK_STEPS[1])
    counters(arch)  # counters (a cache's hits) from here on only
    block_ms = [elapsed_ms(some(block), run.device) / block for _ in range(BLOCKS)]
    counts = counters(arch)
    times = step_times(block_ms, cfg.train.batch_size)
    enqueue = enqueue_ms(one, run.device, ENQUEUE_TRIALS if on_gpu else 2)
    key = cfg.hash()
    profiled_windows = context.current().profiled
    reused = key in profiled_windows
    if not reused:
        profiled_windows[key] = profile_window(one, PROFILE_STEPS if on_gpu else max(profile_steps, 1), run.device)
    profiled = profiled_windows[key]
    return {
        **what_ran(cfg, run.model.sparse_arch, run.device, run.model),
        col.STEPS: block * BLOCKS,
        col.WARMUP: warmed,
        **times,
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
        **judged(profiled, times[col.MS_MEDIAN], enqueue, run.device),
        "profile_reused": reused,
        **model_work(cfg),
        **counts,
        **peak_memory(run.device),
        KERNEL_FALLBACK: context.current().fallbacks.get(id(prepared), ""),
    }


KERNEL_FALLBACK = "kernel_fallback"  # why a point's Triton kernels gave way to their torch twins ('' where not)


def model_work(cfg: Config) -> dict[str, float]:
    """What the GPU model says one step must move and compute (`perfmodel.gpu.gpu_work`): a miss reads against it."""
    work = gpu_work(cfg)
    return {"model_embedding_bytes": work["embedding_bytes"], "model_pooled_bytes": work["pooled_bytes"],
            "model_flops": work["flops"]}  # fmt: skip


def fall_back(prepared: Prepared, err: Exception) -> bool:
    """Where `err` came from a step on Triton kernels: the torch twins swapped in for this point (its step
    built anew) and the reason kept for its records; False where there is no twin to fall back to (not
    Triton, or uvm on a GPU, whose tables in host memory only Triton reads)."""
    arch = prepared.run.model.sparse_arch
    ops = getattr(arch, "ops", None)
    if ops is None or ops.NAME != triton_ops.NAME:
        return False
    if arch.placement == Placement.UVM and prepared.run.device.type == "cuda":
        return False
    arch.ops = torch_ops
    prepared.gpu_step = GpuStep(prepared.run)
    why = f"{type(err).__name__}: {str(err).strip()[:200]}"
    context.current().fallbacks[id(prepared)] = f"triton failed ({why}); the torch twin ran"
    return True


def judged(profiled: dict[str, object], step_ms: float, enqueue: float, device: torch.device) -> dict[str, object]:
    """A record's profile fields: kernels per step, busy = kernel time over the block-timed step, and the bound.

    The bound is read from the host's enqueue time, not from busy: a device idle between kernels
    inside a graph is not a host that cannot keep up. On the CPU there is no device to be busy (and
    the profiler slows the host's own operations): busy is NaN there, the kernel time recorded as seen.
    """
    kernel_ms = float(profiled["kernel_ms_per_step"])
    bound = "host" if enqueue >= HOST_BOUND_SHARE * step_ms else "device"
    on_gpu = device.type == "cuda"
    return {
        **profiled,
        "gpu_busy_fraction": kernel_ms / step_ms if step_ms > 0 and on_gpu else math.nan,
        "host_enqueue_ms": enqueue,
        "host_enqueue_share": enqueue / step_ms if step_ms > 0 else math.nan,
        "bound": bound if on_gpu else "cpu",
    }


def warm_up(one: Callable[[], None], least: int, steps: int, seconds: float, device: torch.device) -> int:
    """Steps until `steps` have run or `seconds` have passed (at least `least`); returns how many ran."""
    start, done = time.perf_counter(), 0
    while done < least or (done < steps and time.perf_counter() - start < seconds):
        one()
        done += 1
    synchronize(device)
    return done


def enqueue_ms(one: Callable[[], None], device: torch.device, trials: int = ENQUEUE_TRIALS) -> float:
    """The host's milliseconds to issue one step to an idle device (its launch queue empty): the median of
    `trials`. On the CPU a step runs as it is issued, so this is the step itself."""
    took = []
    for _ in range(trials):
        synchronize(device)
        start = time.perf_counter()
        one()
        took.append((time.perf_counter() - start) * 1e3)
    synchronize(device)
    return statistics.median(took)


WINDOW = "dlrm:profiled_window"


def profile_window(one: Callable[[], None], steps: int, device: torch.device) -> dict[str, object]:
    """Kernels per step and the device's kernel milliseconds per step, from one profiled window of `steps` steps.

    On the CPU the "kernels" are the step's top-level aten operations (the same arithmetic, the wall
    clock's). Where the profiler saw no kernel on a GPU (`graph_profiler` strategy off, or a session
    that collected nothing), both are NaN and `profile_note` says why: never a busy of 0.
    """
    if graph_profiler.strategy() == graph_profiler.NOT_PROFILED:
        return unprofiled(graph_profiler.NOT_PROFILED_NOTE)
    if device.type == "cuda" and graph_profiler.strategy() == "off":
        return unprofiled("off: the profiler saw no kernel of a captured graph in either probe")
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    synchronize(device)
    with quiet_stderr():
        prof = torch.profiler.profile(activities=activities)
        prof.start()
    try:
        with torch.profiler.record_function(WINDOW):
            for _ in range(steps):
                one()
            synchronize(device)
    finally:
        with quiet_stderr():
            prof.stop()
    events = prof.events()
    windows = [e for e in events if e.name == WINDOW]
    if not windows:
        return unprofiled("the profiler recorded no window")
    window = (windows[0].time_range.start, windows[0].time_range.end)
    if device.type == "cuda":
        kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
    else:
        kernels = [
            e for e in events
            if e.name.startswith("aten::") and not (e.cpu_parent and e.cpu_parent.name.startswith("aten::"))
        ]  # fmt: skip
    spans = [(e.time_range.start, e.time_range.end) for e in kernels]
    if not spans:
        return unprofiled("the profiler saw no kernel in the window")
    inside, anywhere = covered_us(spans, window), covered_us(spans, (-math.inf, math.inf))
    return {
        col.TOP_KERNELS: top_kernels([(e.name, e.time_range.end - e.time_range.start) for e in kernels], steps),
        "kernels_per_step": len(spans) / steps,
        "kernel_ms_per_step": inside / 1e3 / steps,
        # Device time stamped outside the window (clocks apart, or a bogus stamp): large, and busy is doubtful.
        "profile_clipped_share": 1 - inside / anywhere if anywhere > 0 else math.nan,
        "profiled_steps": steps,
        "profile_note": "",
    }


TOP = 10  # kernels a record keeps
NAME_CHARS = 120  # of a kernel's name (Triton's and cuBLAS's run long)


def top_kernels(timed: list[tuple[str, float]], steps: int, top: int = TOP) -> str:
    """The `top` kernels by device time in a window, as JSON: [name, launches per step, µs per step], slowest
    first (one name: every launch of it). A miss is read from these beside the model's bytes and FLOPs."""
    total: dict[str, list[float]] = {}
    for name, us in timed:
        count_us = total.setdefault(name[:NAME_CHARS], [0.0, 0.0])
        count_us[0], count_us[1] = count_us[0] + 1, count_us[1] + us
    ranked = sorted(total.items(), key=lambda item: -item[1][1])[:top]
    return json.dumps([[name, count / steps, round(us / steps, 3)] for name, (count, us) in ranked])


def unprofiled(why: str) -> dict[str, object]:
    return {
        col.TOP_KERNELS: "[]",
        "kernels_per_step": math.nan,
        "kernel_ms_per_step": math.nan,
        "profile_clipped_share": math.nan,
        "profiled_steps": 0,
        "profile_note": why,
    }


def covered_us(spans: list[tuple[float, float]], window: tuple[float, float]) -> float:
    """Microseconds of `window` covered by the spans (their union, each clipped to the window).

    The window is the profiled steps' own (a host scope ending after the device synchronized), so a
    span with a bogus timestamp outside it counts only its part inside, never the gap to it.
    """
    lo, hi = window
    clipped = sorted((max(start, lo), min(end, hi)) for start, end in spans if min(end, hi) > max(start, lo))
    covered, reach = 0.0, lo
    for start, end in clipped:
        if end > reach:
            covered += end - max(start, reach)
            reach = end
    return covered


def embedding_bench(
    cfg: Config, steps: int = EMBEDDING_BLOCK_CALLS, warmup: int = 5, limits: dict[str, float] | None = None
) -> dict[str, object]:
    """The sparse arch alone: its lookup, and its lookup + fused backward/update, each with its bandwidth.

    Kernel archs (hbm, uvm, cached) read staged batches, as in training; host takes per-table bags.
    `steps` batches are placed on the device first; then each timed block calls the arch once per
    batch (`BLOCKS` blocks, one event pair each), so launches overlap the kernels before them and a
    call's time is its block's over `steps`, not one eager call's launch and all.
    """
    validate(cfg)
    device = resolve_device(cfg.train.device)
    arch = make_sparse_arch(cfg, torch.Generator().manual_seed(cfg.train.seed), device)
    batches = make_data(cfg).batches()
    staged = takes_staged(arch)
    capacity = ids_capacity(cfg.train.batch_size, cfg.model.table_rows, cfg.data.lookups_per_table)
    bag_size = fixed_bag_size(cfg.data.pooling, cfg.data.lookups_per_table)
    grad = torch.randn(cfg.train.batch_size, cfg.model.num_tables, cfg.model.embedding_dim, device=device)
    placed, ids = [], 0
    for _ in range(max(steps, 1)):
        batch = next(batches)
        ids += sum(len(t) for t in batch.indices)
        if staged:
            placed.append(stage(batch, cfg.model.table_rows, capacity, bag_size).to(device))
        else:
            placed.append(batch.to(device, ids_device=arch.ids_device))

    def forward() -> None:
        with torch.no_grad():
            for batch in placed:
                arch.lookup(batch)

    def step() -> None:
        for batch in placed:
            arch.lookup(batch).backward(grad)
            arch.update()

    for _ in range(warmup):
        step()
    synchronize(device)
    counters(arch)  # counters (a cache's hits) from here on only
    calls = len(placed)
    # The lookup alone: not for cached (a lookup in training mode fills the cache, so it is no read).
    timed_forward = arch.placement != Placement.CACHED
    forward_ms = [elapsed_ms(forward, device) / calls if timed_forward else math.nan for _ in range(BLOCKS)]
    ms = [elapsed_ms(step, device) / calls for _ in range(BLOCKS)]
    median, forward_median = statistics.median(ms), statistics.median(forward_ms)
    row_bytes = (ids / calls) * cfg.model.embedding_dim * 4
    # Every looked-up row: read by the lookup, read and written by the update (fp32).
    moved = 3 * row_bytes
    limits = limits or {}
    record = {
        **what_ran(cfg, arch, device),
        col.STEPS: calls * BLOCKS,
        "timing": "blocks",
        "blocks": BLOCKS,
        "block_steps": calls,
        "embedding_ms_median": median,
        col.MS_MEDIAN: median,
        col.MS_P10: col.quantile(ms, 0.1),
        col.MS_P90: col.quantile(ms, 0.9),
        "embedding_gbps": moved / median / 1e6,
        "embedding_forward_ms_median": forward_median,
        "embedding_forward_gbps": row_bytes / forward_median / 1e6,
        **limits,
        **counters(arch),
    }
    if "copy_gbps" in limits:
        record["embedding_copy_fraction"] = record["embedding_gbps"] / limits["copy_gbps"]
        record["embedding_forward_copy_fraction"] = record["embedding_forward_gbps"] / limits["copy_gbps"]
    return record
