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

from dlrm_study.config import Config, Precision
from dlrm_study.records import columns as col

GEMM_PASSES = ("forward", "grad_input", "grad_weight")


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


def layer_key(precision: str, layer: tuple[int, int, int], gemm_pass: str) -> str:
    """`gemm_bf16_gflops_2048x512x64_grad_weight`: one pass of one layer shape (batch x fan_in x fan_out)."""
    batch, fan_in, fan_out = layer
    return f"gemm_{precision}_gflops_{batch}x{fan_in}x{fan_out}_{gemm_pass}"


def mean_lookups(cfg: Config) -> float:
    """Mean ids per bag: L for fixed pooling, (L+1)/2 for uniform pooling in [1, L]."""
    lookups = cfg.data.lookups_per_table
    return (lookups + 1) / 2 if cfg.data.pooling == "uniform" else float(lookups)


def embedding_row_bytes(cfg: Config) -> int:
    """Bytes of each random row access: the fp32 row, or one 2-byte half of a Split-SGD bf16 row.

    The bf16 forward reads the upper halves only; the update reads and writes both halves,
    which live in two arrays: two accesses of this size per id.
    """
    return cfg.model.embedding_dim * (2 if cfg.train.precision == Precision.BF16 else 4)


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
    return "bf16" if cfg.train.precision == Precision.BF16 and "gemm_bf16_gflops" in limits else "fp32"


def mlp_gemm_ms(cfg: Config, limits: dict[str, float], precision: str) -> float:
    """ms of the MLPs' GEMMs, each at the rate measured at its own shape and pass."""
    return sum(flops / rate(limits, layer_key(precision, layer, p)) for layer, p, flops in gemm_work(cfg)) / 1e6


def fastest_fp32_gemm(limits: dict[str, float]) -> float:
    """The best fp32 GEMM rate measured (square or at any layer shape), GFLOP/s."""
    return max(value for key, value in limits.items() if key.startswith("gemm_fp32_gflops"))


def gather_gbps(cfg: Config, limits: dict[str, float]) -> float:
    """The best measured random-row gather rate for this config's rows (fp32 words; bf16 rows too for bf16)."""
    best = rate(limits, f"gather_gbps_{measured_row_bytes(cfg)}B")
    if cfg.train.precision == Precision.BF16:
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
    for precision in (Precision.FP32, Precision.BF16):
        if precision == Precision.FP32 or "gemm_bf16_gflops" in limits:
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
