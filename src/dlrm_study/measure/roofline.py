"""Roofline: this machine's measured limits, one iteration's work, and the lower bound they imply.

Limits (`measure_limits`) are measured with torch on the CPU, on torch's current thread
count, as medians over repeats after a warm-up (GEMMs: the best repeat, since on a shared
machine another job halves a compute-bound GEMM, and a limit is what the cores can do),
memory rates in one buffer of at least 1 GB and 4x the last-level cache, so random rows
are not cache-resident (512 MB in quick mode):

- streaming bandwidth: copying one half of the buffer into the other (read + write bytes);
- random-row gather: `embedding_bag` sums of random rows (the pooled forward; a small
  output, where `index_select` would mostly time writing its output), or the optimized
  loop's own fused forward kernel over the same rows where it is faster;
- random-row read-modify-write (the fused backward+update): the faster of `index_add_` and
  gather + add + `index_copy_` into random rows (read + write bytes);
- the same two in bf16 rows (`gather_bf16_*`, `update_bf16_*`: a bf16 table, torch's bf16
  kernels), beside the fp32-word rates above;
- GEMM rates at the model's own layer shapes: for each MLP layer (batch, fan_in, fan_out), its
  forward (`F.linear`, the `aten::addmm` nn.Linear runs) and its two backward GEMMs (the input
  gradient `grad @ W` and the weight gradient `x.T @ grad`, as autograd computes them), in fp32
  and, where the CPU has native bf16, in bf16 with bf16 weights (as the optimized bf16 loop holds
  them); plus one square GEMM (`gemm_*_gflops`), for reference only.

Quick mode also uses fewer lookups and repeats: rougher, and optimistic on CPUs whose L3
holds much of its table. Torch's scatter ops carry per-row overhead, so a hand-written
fused update kernel beats the measured update rate: the bound charges the update as the
larger of reading its rows at the gather rate and moving its bytes at the streaming rate.

Work (`iteration_work`) counts the bytes and FLOPs of one training step; `bound_ms`
divides them by the limits. Assumptions:

- Memory-bound embedding phases and compute-bound MLP phases do not overlap on the same
  cores, so their times add; each runs at the best measured rate of its kind.
- Every looked-up id is one random row access (hot rows of skewed ids that stay in cache
  would cost less); gradient, pooled-output and index traffic is left out, and so is the
  dense parameters' SGD update (about 12 bytes per MLP weight, a few percent at most).
- Row-wise Adagrad's per-row fp32 state is charged like the row's own bytes, as if it came
  with the row.
- MLP time is each GEMM's FLOPs at the rate measured at its own shape and pass (the first
  bottom layer has no input gradient: its input is data), plus the interaction's FLOPs at the
  fastest fp32 GEMM rate measured (it runs in fp32 in every loop). Bias, ReLU and cast traffic
  are left out.
"""

import functools
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from dlrm_study import results
from dlrm_study.config import Config
from dlrm_study.embeddings import hugepages, kernels
from dlrm_study.records import columns as col

# Row sizes measured by default: fp32 rows of dim 4..128 and bf16 rows of dim 8..256 (all presets).
ROW_BYTES = (16, 32, 64, 128, 256, 512)
GEMM_SHAPE = (2048, 1024, 1024)  # M, K, N: one square-ish GEMM, reported beside the layer rates
GEMM_PASSES = ("forward", "grad_input", "grad_weight")
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


def needs(*cfgs: Config) -> dict[str, list]:
    """What `measure_limits` must measure for these configs' bounds and rates (its keyword arguments)."""
    return {
        "row_bytes": sorted({size for cfg in cfgs for size in row_sizes(cfg)}),
        "bf16_row_bytes": sorted({2 * cfg.model.embedding_dim for cfg in cfgs}),
        "layers": sorted({layer for cfg in cfgs for layer in layer_shapes(cfg)}),
    }


def row_sizes(cfg: Config) -> list[int]:
    """fp32-word row sizes (bytes) that `bound_ms` and `rates` need for this config."""
    return sorted({measured_row_bytes(cfg), 4 * cfg.model.embedding_dim})


def layer_shapes(cfg: Config) -> list[tuple[int, int, int]]:
    """(batch, fan_in, fan_out) of every MLP layer, bottom then top (repeats kept)."""
    m, batch = cfg.model, cfg.train.batch_size
    return [(batch, fan_in, fan_out) for fan_in, fan_out in m.bottom_layers + m.top_layers]


def measured_row_bytes(cfg: Config) -> int:
    """The row size whose measured rates stand for this config's rows: rounded up to 4 bytes
    (an odd bf16 dimension has 2-byte-aligned rows; the measurement gathers fp32 words)."""
    return -(-embedding_row_bytes(cfg) // 4) * 4


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
    return {"fp32": torch.float32, **({"bf16": torch.bfloat16} if results.native_bf16() else {})}


def gemm_limits(repeats: int) -> dict[str, float]:
    """GFLOP/s of one square-ish torch.matmul (GEMM_SHAPE) in each of `gemm_dtypes`."""
    m, k, n = GEMM_SHAPE
    limits = {}
    for name, dtype in gemm_dtypes().items():
        a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
        limits[f"gemm_{name}_gflops"] = 2 * m * k * n / best_s(functools.partial(torch.matmul, a, b), repeats) / 1e9
    return limits


def layer_key(precision: str, layer: tuple[int, int, int], gemm_pass: str) -> str:
    """`gemm_bf16_gflops_2048x512x64_grad_weight`: one pass of one layer shape (batch x fan_in x fan_out)."""
    batch, fan_in, fan_out = layer
    return f"gemm_{precision}_gflops_{batch}x{fan_in}x{fan_out}_{gemm_pass}"


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


def mean_lookups(cfg: Config) -> float:
    """Mean ids per bag: L for fixed pooling, (L+1)/2 for uniform pooling in [1, L]."""
    lookups = cfg.data.lookups_per_table
    return (lookups + 1) / 2 if cfg.data.pooling == "uniform" else float(lookups)


def embedding_row_bytes(cfg: Config) -> int:
    """Bytes of each random row access: the fp32 row, or one 2-byte half of a Split-SGD bf16 row.

    The bf16 forward reads the upper halves only; the update reads and writes both halves,
    which live in two arrays: two accesses of this size per id.
    """
    return cfg.model.embedding_dim * (2 if cfg.train.precision == "bf16" else 4)


def iteration_work(cfg: Config) -> dict[str, float]:
    """Ids, embedding bytes and FLOPs of one training step (forward, backward, update).

    Update bytes: the row read and written (fp32: 4+4 bytes per element; bf16 Split-SGD:
    both 2-byte halves read and written, also 4+4), plus for row-wise Adagrad one fp32
    state per touched row read and written. FLOPs: 2 * MACs forward plus 4 * MACs backward
    (input and weight gradients), for the MLPs and, separately, the interaction's bmm
    (B x F x F x D MACs for F = tables + 1 features). The CPU bound charges the GEMMs one by one
    (`gemm_work`, without the first layer's input gradient); `mlp_flops` is the GPU model's count.
    """
    m, batch = cfg.model, cfg.train.batch_size
    ids = batch * m.num_tables * mean_lookups(cfg)
    update = ids * m.embedding_dim * 8
    if cfg.train.optimizer == "rowwise_adagrad":
        update += ids * 8
    mlp_macs = sum(fan_in * fan_out for fan_in, fan_out in m.bottom_layers + m.top_layers)
    features = m.num_tables + 1
    interaction_macs = features * features * m.embedding_dim
    return {
        "ids_per_iteration": ids,
        "embedding_forward_bytes": ids * embedding_row_bytes(cfg),
        "embedding_update_bytes": update,
        "mlp_flops": 6.0 * batch * mlp_macs,
        "interaction_flops": 6.0 * batch * interaction_macs,
    }


def gemm_work(cfg: Config) -> list[tuple[tuple[int, int, int], str, float]]:
    """Every GEMM of one step's MLPs: (layer shape, pass, FLOPs). The first bottom layer has no
    input gradient (its input is data, which autograd does not differentiate)."""
    gemms = []
    for i, layer in enumerate(layer_shapes(cfg)):
        batch, fan_in, fan_out = layer
        for gemm_pass in GEMM_PASSES:
            if not (i == 0 and gemm_pass == "grad_input"):
                gemms.append((layer, gemm_pass, 2.0 * batch * fan_in * fan_out))
    return gemms


def rate(limits: dict[str, float], key: str) -> float:
    if key not in limits:
        raise ValueError(f"limits have no {key!r}: measure them with measure_limits(**needs(cfg))")
    return limits[key]


def gemm_precision(cfg: Config, limits: dict[str, float]) -> str:
    """Whose GEMM rates the config's MLPs run at: bf16 where measured (native bf16), else fp32."""
    return "bf16" if cfg.train.precision == "bf16" and "gemm_bf16_gflops" in limits else "fp32"


def mlp_gemm_ms(cfg: Config, limits: dict[str, float], precision: str) -> float:
    """ms of the MLPs' GEMMs, each at the rate measured at its own shape and pass."""
    return sum(flops / rate(limits, layer_key(precision, layer, p)) for layer, p, flops in gemm_work(cfg)) / 1e6


def fastest_fp32_gemm(limits: dict[str, float]) -> float:
    """The best fp32 GEMM rate measured (square or at any layer shape), GFLOP/s."""
    return max(value for key, value in limits.items() if key.startswith("gemm_fp32_gflops"))


def gather_gbps(cfg: Config, limits: dict[str, float]) -> float:
    """The best measured random-row gather rate for this config's rows (fp32 words; bf16 rows too for bf16)."""
    best = rate(limits, f"gather_gbps_{measured_row_bytes(cfg)}B")
    if cfg.train.precision == "bf16":
        best = max(best, limits.get(f"gather_bf16_gbps_{embedding_row_bytes(cfg)}B", 0.0))
    return best


def bound_ms(cfg: Config, limits: dict[str, float]) -> dict[str, float]:
    """Lower bound on ms per iteration: embedding bytes at the row rates + each GEMM at its shape's rate."""
    work = iteration_work(cfg)
    gather = gather_gbps(cfg, limits)
    forward = work["embedding_forward_bytes"] / gather / 1e6

    # A random read-modify-write cannot beat reading its rows at the gather rate, nor moving
    # all its bytes at the streaming rate. (Torch's scatter ops, the measured `update_gbps`,
    # are slower than the fused kernel, so they would not bound it from below.)
    update_bytes = work["embedding_update_bytes"]
    update = max(update_bytes / 2 / gather, update_bytes / rate(limits, "stream_gbps")) / 1e6
    mlp = mlp_gemm_ms(cfg, limits, gemm_precision(cfg, limits))
    mlp += work["interaction_flops"] / fastest_fp32_gemm(limits) / 1e6  # fp32 in every loop
    return {
        col.ROOFLINE_MS: forward + update + mlp,
        "roofline_embedding_ms": forward + update,
        "roofline_embedding_forward_ms": forward,
        "roofline_embedding_update_ms": update,
        "roofline_mlp_ms": mlp,
    }


def rates(cfg: Config, limits: dict[str, float]) -> dict[str, float]:
    """The measured rates at this config's shapes, fp32 beside bf16, as record fields.

    `roofline_gemm_<p>_gflops`: the config's MLP GEMMs at their measured per-shape rates, as one
    rate (their FLOPs over their summed times); bf16 only where measured (native bf16).
    Gather and update: random rows of the config's dim, as fp32 rows and as bf16 rows.
    """
    dim = cfg.model.embedding_dim
    flops = sum(f for _, _, f in gemm_work(cfg))
    fields = {}
    for precision in ("fp32", "bf16"):
        if precision == "fp32" or "gemm_bf16_gflops" in limits:
            fields[f"roofline_gemm_{precision}_gflops"] = flops / mlp_gemm_ms(cfg, limits, precision) / 1e6
    for kind in ("gather", "update"):
        fields[f"roofline_{kind}_fp32_gbps"] = rate(limits, f"{kind}_gbps_{4 * dim}B")
        fields[f"roofline_{kind}_bf16_gbps"] = rate(limits, f"{kind}_bf16_gbps_{2 * dim}B")
    return fields


def roofline_report(cfg: Config, limits: dict[str, float]) -> str:
    """A few human-readable lines: the limits used, the work, the bound."""
    work, ms = iteration_work(cfg), bound_ms(cfg, limits)
    size = measured_row_bytes(cfg)
    gemm = gemm_precision(cfg, limits)
    layers = rates(cfg, limits)[f"roofline_gemm_{gemm}_gflops"]
    t = cfg.train
    return "\n".join(
        [
            f"machine ({limits.get(col.THREADS, 0):.0f} threads): stream {limits['stream_gbps']:.1f} GB/s, "
            f"{size} B rows: gather {limits[f'gather_gbps_{size}B']:.2f} GB/s, "
            f"update {limits[f'update_gbps_{size}B']:.2f} GB/s; "
            f"GEMM {gemm} {layers:.0f} GFLOP/s at the layers' shapes ({limits[f'gemm_{gemm}_gflops']:.0f} square)",
            f"work per iteration ({cfg.name}, {t.precision}, {t.optimizer}, batch {t.batch_size}): "
            f"{work['ids_per_iteration'] / 1e6:.3g} M ids, {work['embedding_forward_bytes'] / 1e6:.4g} MB forward, "
            f"{work['embedding_update_bytes'] / 1e6:.4g} MB update, "
            f"{(sum(f for _, _, f in gemm_work(cfg)) + work['interaction_flops']) / 1e9:.4g} GFLOP",
            f"bound: {ms[col.ROOFLINE_MS]:.4g} ms/it = embedding {ms['roofline_embedding_ms']:.4g} "
            f"(forward {ms['roofline_embedding_forward_ms']:.4g} + update {ms['roofline_embedding_update_ms']:.4g}) "
            f"+ MLP {ms['roofline_mlp_ms']:.4g}; at most {t.batch_size / ms[col.ROOFLINE_MS] * 1e3:,.0f} samples/s",
        ]
    )
