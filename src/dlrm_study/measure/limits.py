"""This machine's limits, measured: memory bandwidth, random-row gather and update rates, GEMM throughput
in fp32 and bf16 at the model's layer shapes (what the roofline's bound is computed from)."""

import functools
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from dlrm_study import platform
from dlrm_study.model import kernels
from dlrm_study.model.tables import hugepages
from dlrm_study.perfmodel.roofline import layer_key
from dlrm_study.records import columns as col

# Row sizes measured by default: fp32 rows of dim 4..128 and bf16 rows of dim 8..256 (all presets).
ROW_BYTES = (16, 32, 64, 128, 256, 512)


GEMM_SHAPE = (2048, 1024, 1024)  # M, K, N: one square-ish GEMM, reported beside the layer rates


BAG = 100  # ids per bag in the gather measurement, as in dlrm-benchmark


CACHES = Path("/sys/devices/system/cpu/cpu0/cache")


UPDATE_CHUNK = 2**14  # rows of gradient per index_add_ call: keeps the gradient cache-resident


def measure_limits(
    row_bytes: list[int] | None = None,
    quick: bool = False,
    bf16_row_bytes: list[int] | None = None,
    layers: list[tuple[int, int, int]] | None = None,
) -> dict[str, float]:
    """Measured limits of this machine, flat, units in the key names (cached per process).

    `row_bytes`: fp32-word row sizes (default ROW_BYTES); `bf16_row_bytes`: bf16 row sizes;
    `layers`: (batch, fan_in, fan_out) whose GEMMs to time. `needs(cfg)` gives all three.
    """
    sizes = tuple(sorted(set(row_bytes or ROW_BYTES)))
    for size in sizes:
        if size <= 0 or size % 4:
            raise ValueError(f"row size {size} B is not a positive multiple of 4 bytes")
    bf16_sizes = tuple(sorted(set(bf16_row_bytes or ())))
    for size in bf16_sizes:
        if size <= 0 or size % 2:
            raise ValueError(f"bf16 row size {size} B is not a positive multiple of 2 bytes")
    shapes = tuple(sorted(set(layers or ())))
    # A copy: callers may not edit the cache.
    return dict(_measure(sizes, bf16_sizes, shapes, quick, torch.get_num_threads()))


@functools.cache
def _measure(sizes: tuple[int, ...], bf16_sizes: tuple[int, ...], shapes: tuple[tuple[int, int, int], ...],
             quick: bool, threads: int) -> dict[str, float]:  # fmt: skip
    repeats = 3 if quick else 7
    return {
        col.THREADS: float(threads),
        **memory_limits(sizes, quick, repeats, bf16_sizes),
        **gemm_limits(repeats),
        **layer_gemm_limits(shapes, repeats),
    }


def memory_limits(
    sizes: tuple[int, ...], quick: bool, repeats: int, bf16_sizes: tuple[int, ...] = ()
) -> dict[str, float]:
    """Streaming bandwidth, and random-row gather and update rates at each row size (fp32 words, bf16)."""
    # One buffer serves every measurement: first-touch page faults cost more than the copies.
    # Server L3s reach hundreds of MB, so the full table is at least 4x the last-level cache.
    # On huge pages where the OS allows, as the optimized tables are: the machine at its best.
    buffer = hugepages.empty((2**29 if quick else min(max(2**30, 4 * last_level_cache_bytes()), 2**33)) // 4)
    buffer.fill_(1.0)
    src, dst = buffer.chunk(2)
    limits = {"stream_gbps": 2 * src.numel() * 4 / median_s(lambda: dst.copy_(src), repeats) / 1e9}
    lookups = UPDATE_CHUNK if quick else 2**20  # quick: few parallel ops, each costly on busy cores
    for size in sizes:
        dim = size // 4
        table = buffer[: buffer.numel() // dim * dim].view(-1, dim)
        gather, update = row_seconds(table, lookups, repeats)
        limits[f"gather_rows_per_s_{size}B"] = lookups / gather
        limits[f"gather_gbps_{size}B"] = lookups * size / gather / 1e9
        limits[f"update_rows_per_s_{size}B"] = lookups / update
        limits[f"update_gbps_{size}B"] = 2 * lookups * size / update / 1e9  # each row read and written
    halves = buffer.view(torch.bfloat16)
    for size in bf16_sizes:
        dim = size // 2
        table = halves[: halves.numel() // dim * dim].view(-1, dim)
        gather, update = row_seconds(table, lookups, repeats)
        limits[f"gather_bf16_gbps_{size}B"] = lookups * size / gather / 1e9
        limits[f"update_bf16_gbps_{size}B"] = 2 * lookups * size / update / 1e9
    return limits


def gemm_dtypes() -> dict[str, torch.dtype]:
    """fp32, and bf16 where the CPU has it natively (an emulated bf16 GEMM is not a limit of the machine)."""
    return {"fp32": torch.float32, **({"bf16": torch.bfloat16} if platform.native_bf16() else {})}


def gemm_limits(repeats: int) -> dict[str, float]:
    """GFLOP/s of one square-ish torch.matmul (GEMM_SHAPE) in each of `gemm_dtypes`."""
    m, k, n = GEMM_SHAPE
    limits = {}
    for name, dtype in gemm_dtypes().items():
        a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
        limits[f"gemm_{name}_gflops"] = 2 * m * k * n / best_s(functools.partial(torch.matmul, a, b), repeats) / 1e9
    return limits


def layer_gemms(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, grad: torch.Tensor) -> dict[str, Callable]:
    """One Linear layer's three GEMMs, through the ops the loops run (see the module docstring)."""
    return {
        "forward": functools.partial(F.linear, x, weight, bias),  # aten::addmm
        "grad_input": functools.partial(torch.mm, grad, weight),
        "grad_weight": functools.partial(torch.mm, x.t(), grad),  # autograd's mat1.t().mm(grad)
    }


def layer_gemm_limits(shapes: tuple[tuple[int, int, int], ...], repeats: int) -> dict[str, float]:
    """GFLOP/s of each layer shape's forward and backward GEMMs, in each of `gemm_dtypes`."""
    limits = {}
    for precision, dtype in gemm_dtypes().items():
        for layer in shapes:
            batch, fan_in, fan_out = layer
            x, grad = torch.randn(batch, fan_in, dtype=dtype), torch.randn(batch, fan_out, dtype=dtype)
            weight, bias = torch.randn(fan_out, fan_in, dtype=dtype), torch.randn(fan_out, dtype=dtype)
            flops = 2 * batch * fan_in * fan_out
            for gemm_pass, fn in layer_gemms(x, weight, bias, grad).items():
                limits[layer_key(precision, layer, gemm_pass)] = flops / best_s(fn, repeats) / 1e9
    return limits


def last_level_cache_bytes() -> int:
    """Size of the largest CPU cache (Linux sysfs writes e.g. `491520K`), 0 where unknown."""
    try:
        sizes = [int(f.read_text().strip().rstrip("K")) * 1024 for f in CACHES.glob("index*/size")]
    except (OSError, ValueError):
        return 0
    return max(sizes, default=0)


def row_seconds(table: torch.Tensor, lookups: int, repeats: int) -> tuple[float, float]:
    """Seconds to gather-and-pool, and to read-modify-write, `lookups` random rows of `table`.

    The update takes the faster of two torch ways (which wins depends on the row size):
    `index_add_`, and gather + add + `index_copy_` (races on repeated ids do not matter here).
    """
    ids = torch.randint(table.shape[0], (lookups,))
    offsets = torch.arange(0, lookups, BAG)
    grad = torch.full((UPDATE_CHUNK, table.shape[1]), 1e-6, dtype=table.dtype)
    rows = torch.empty_like(grad)

    def index_add() -> None:
        for chunk in ids.split(UPDATE_CHUNK):
            table.index_add_(0, chunk, grad[: len(chunk)])

    def gather_add_copy() -> None:
        for chunk in ids.split(UPDATE_CHUNK):
            torch.index_select(table, 0, chunk, out=rows[: len(chunk)])
            table.index_copy_(0, chunk, rows[: len(chunk)].add_(grad[: len(chunk)]))

    gather = median_s(lambda: F.embedding_bag(ids, table, offsets, mode="sum"), repeats)
    fused = fused_gather(table, ids, offsets)
    if fused is not None:
        gather = min(gather, median_s(fused, repeats))
    return gather, min(median_s(index_add, repeats), median_s(gather_add_copy, repeats))


def fused_gather(table: torch.Tensor, ids: torch.Tensor, offsets: torch.Tensor) -> Callable[[], object] | None:
    """The optimized loop's own pooled forward over the same rows (None without the C++ kernels).

    It prefetches rows ahead and can gather faster than `embedding_bag`; a bound that charged
    the slower of the two would sit above what the loop reaches.
    """
    ops = kernels.load()
    if ops is None:
        return None
    bag_starts = torch.cat([offsets, torch.tensor([len(ids)])])
    if table.dtype == torch.bfloat16:
        return functools.partial(ops.forward_bf16, table.view(torch.int16), ids, bag_starts, len(offsets), 1)
    return functools.partial(ops.forward_fp32, table, ids, bag_starts, len(offsets), 1)


def median_s(fn: Callable[[], object], repeats: int) -> float:
    """Median seconds of `fn` over `repeats` calls after one warm-up call."""
    return statistics.median(seconds(fn, repeats))


def best_s(fn: Callable[[], object], repeats: int) -> float:
    """Fewest seconds of `fn` over `repeats` calls after one warm-up call."""
    return min(seconds(fn, repeats))


def seconds(fn: Callable[[], object], repeats: int) -> list[float]:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times
