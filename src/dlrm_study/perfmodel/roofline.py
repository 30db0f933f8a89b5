"""Roofline: one iteration's work and the lower bound a machine's limits imply (pure arithmetic).

The limits are measured by `measure.limits` (on the CPU, on torch's current thread count, best of
repeats after a warm-up, kept between runs per machine, threads, torch and measuring code):

- random-row gather and update rates (`measure.membench`): probes of the memory system's physical
  limit at the embedding kernels' access pattern, in a buffer of the tables' own size, uniform
  random independent rows, prefetched at the distance in rows found best: rows read (the forward:
  whole fp32 rows, or the first half of each [hi | lo] bf16 Split-SGD row) and rows
  read-modified-written (the update: whole rows); and a stream rate at the interaction's footprint.
  Which accesses a config needs is `accesses` (an `Access` each);
- GEMM rates at the model's own layer shapes: for each MLP layer (batch, fan_in, fan_out), its
  forward and its two backward GEMMs (the input gradient `grad @ W` and the weight gradient
  `x.T @ grad`), each the faster of torch's op and the fused layers' oneDNN matmul, in fp32 and,
  where the CPU has native bf16, in bf16; plus one square GEMM (`gemm_*_gflops`), for reference.

Work (`iteration_work`) counts the bytes and FLOPs of one training step; `bound_ms`
divides them by the limits. Assumptions:

- Memory-bound embedding phases and compute-bound MLP phases do not overlap on the same
  cores, so their times add; each runs at the best measured rate of its kind.
- Every looked-up id is one uniform random row access (hot rows of skewed ids that stay in cache
  would cost less); gradient, pooled-output and index traffic is left out, and so is the
  dense parameters' SGD update (about 12 bytes per MLP weight, a few percent at most).
- Row-wise Adagrad's per-row fp32 state is charged like the row's own bytes, as if it came
  with the row.
- MLP time is each GEMM's FLOPs at the rate measured at its own shape and pass (the first
  bottom layer has no input gradient: its input is data), plus the interaction: its F(F-1)/2
  pairs' FLOPs at the fastest GEMM rate measured, or its bytes at the stream rate at its
  footprint, whichever is slower (`interaction_ms`). Bias, ReLU and cast traffic are left out.
"""

import dataclasses

from dlrm_study.config import Config, Precision
from dlrm_study.records import columns as col

GEMM_PASSES = ("forward", "grad_input", "grad_weight")


@dataclasses.dataclass(frozen=True, order=True)
class Access:
    """Random rows of a table: `read` bytes touched of rows `stride` bytes apart, `rows` rows.

    What `measure.membench` measures and the bound charges; here, below both, so the bound names
    its rates without importing the measuring code.
    """

    kind: str  # "gather", "update" (random rows) or "stream" (all rows, in order)
    read: int
    stride: int
    rows: int
    tables: tuple[int, ...] = ()  # the rows split into these tables, ids drawn table by table (the loops' order)

    def __post_init__(self) -> None:
        if self.kind not in ("gather", "update", "stream"):
            raise ValueError(f"access kind {self.kind!r} is none of gather, update, stream")
        if not (0 < self.read <= self.stride and self.read % 4 == 0 and self.stride % 4 == 0 and self.rows > 0):
            raise ValueError(f"{self}: read and stride must be multiples of 4 bytes, 0 < read <= stride, rows > 0")
        if self.tables and sum(self.tables) != self.rows:
            raise ValueError(f"{self}: the tables' rows must add up to rows")

    @property
    def key(self) -> str:
        """The limit's name: `gather_gbps_128B_of_256B_8000000rows_8tables` (one table: no `_1tables`)."""
        split = f"_{len(self.tables)}tables" if len(self.tables) > 1 else ""
        return f"{self.kind}_gbps_{self.read}B_of_{self.stride}B_{self.rows}rows{split}"

    @property
    def table_bytes(self) -> int:
        return self.rows * self.stride

    def lines_per_s(self, gbps: float) -> float:
        """Cache lines per second at `gbps` of this access: what random rows are limited by, not bytes."""
        return gbps * 1e9 / self.read * -(-self.read // 64)

    @property
    def latency_key(self) -> str:
        """The pointer-chase latency over all the rows: `chase_256B_8000000rows_ns` (lower is better)."""
        return f"chase_{self.stride}B_{self.rows}rows_ns"


def needs(*cfgs: Config) -> dict[str, list]:
    """What `measure_limits` must measure for these configs' bounds and rates (its keyword arguments)."""
    return {
        "accesses": sorted({access for cfg in cfgs for access in accesses(cfg).values()}),
        "layers": sorted({layer for cfg in cfgs for layer in layer_shapes(cfg)}),
    }


def accesses(cfg: Config) -> dict[str, Access]:
    """The accesses `bound_ms` and `rates` charge: over all tables stacked (ids drawn table by table, as
    the loops walk them: each table's rows are the footprint of a stretch of the walk), the forward's random-row
    gather in fp32 rows and in bf16 Split-SGD rows ([hi | lo], as wide as fp32's: forward reads the
    first half, an odd dim's rounded up to whole 4-byte words) and the update (whole rows, both); and
    the interaction's features read in order (B x F rows of fp32, its footprint: the memory term)."""
    dim, tables = cfg.model.embedding_dim, tuple(cfg.model.table_rows)
    rows, features = sum(tables), cfg.train.batch_size * (cfg.model.num_tables + 1)
    return {
        "gather_fp32": Access("gather", 4 * dim, 4 * dim, rows, tables),
        "gather_bf16": Access("gather", -(-2 * dim // 4) * 4, 4 * dim, rows, tables),
        "update": Access("update", 4 * dim, 4 * dim, rows, tables),
        "interaction": Access("stream", 4 * dim, 4 * dim, features),
    }


def layer_shapes(cfg: Config) -> list[tuple[int, int, int]]:
    """(batch, fan_in, fan_out) of every MLP layer, bottom then top (repeats kept)."""
    m, batch = cfg.model, cfg.train.batch_size
    return [(batch, fan_in, fan_out) for fan_in, fan_out in m.bottom_layers + m.top_layers]


def layer_key(precision: str, layer: tuple[int, int, int], gemm_pass: str) -> str:
    """`gemm_bf16_gflops_2048x512x64_grad_weight`: one pass of one layer shape (batch x fan_in x fan_out)."""
    batch, fan_in, fan_out = layer
    return f"gemm_{precision}_gflops_{batch}x{fan_in}x{fan_out}_{gemm_pass}"


def mean_lookups(cfg: Config) -> float:
    """Mean ids per bag: L for fixed pooling, (L+1)/2 for uniform pooling in [1, L]."""
    lookups = cfg.data.lookups_per_table
    return (lookups + 1) / 2 if cfg.data.pooling == "uniform" else float(lookups)


def embedding_row_bytes(cfg: Config) -> int:
    """Bytes the forward reads of each row: the fp32 row, or the upper (bf16) half of a Split-SGD row.

    The update reads and writes the whole [hi | lo] row, as many bytes as an fp32 row.
    """
    return cfg.model.embedding_dim * (2 if cfg.train.precision == Precision.BF16 else 4)


def iteration_work(cfg: Config) -> dict[str, float]:
    """Ids, embedding bytes and FLOPs of one training step (forward, backward, update).

    Update bytes: the row read and written (fp32: 4+4 bytes per element; bf16 Split-SGD: the
    [hi | lo] row of two 2-byte halves read and written, also 4+4), plus for row-wise Adagrad one
    fp32 state per touched row read and written. FLOPs: 2 * MACs forward plus 4 * MACs backward
    (input and weight gradients), for the MLPs and, separately, the interaction: its bmm
    (`interaction_flops`, B x F x F x D MACs for F = tables + 1 features, the GPU model's count) and the
    F(F-1)/2 distinct pairs a loop must compute (`interaction_pair_flops`: the CPU bound charges the
    least work a loop can do). Interaction
    bytes: its features read and its output written (forward); features and output gradient read,
    feature gradients written (backward), at the config's element size. The CPU bound charges the GEMMs one by one
    (`gemm_work`, without the first layer's input gradient); `mlp_flops` is the GPU model's count.
    """
    m, batch = cfg.model, cfg.train.batch_size
    ids = batch * m.num_tables * mean_lookups(cfg)
    update = ids * m.embedding_dim * 8
    if cfg.train.optimizer == "rowwise_adagrad":
        update += ids * 8
    mlp_macs = sum(fan_in * fan_out for fan_in, fan_out in m.bottom_layers + m.top_layers)
    features = m.num_tables + 1
    pairs = features * (features - 1) // 2
    interaction_macs = features * features * m.embedding_dim
    element = 2 if cfg.train.precision == Precision.BF16 else 4  # bf16 features: the fewest bytes a loop moves
    inputs, outputs = batch * features * m.embedding_dim * element, batch * (m.embedding_dim + pairs) * element
    return {
        "ids_per_iteration": ids,
        "embedding_forward_bytes": ids * embedding_row_bytes(cfg),
        "embedding_update_bytes": update,
        "mlp_flops": 6.0 * batch * mlp_macs,
        "interaction_flops": 6.0 * batch * interaction_macs,
        "interaction_pair_flops": 6.0 * batch * pairs * m.embedding_dim,
        "interaction_forward_bytes": float(inputs + outputs),
        "interaction_backward_bytes": float(2 * inputs + outputs),
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


def fastest_gemm(limits: dict[str, float]) -> float:
    """The best GEMM rate measured (square or at any layer shape, fp32 or bf16), GFLOP/s: the most
    arithmetic this machine was seen to do, which no dot-product loop is taken to beat."""
    return max(value for key, value in limits.items() if key.startswith("gemm_") and "_gflops" in key)


def interaction_ms(cfg: Config, limits: dict[str, float]) -> dict[str, float]:
    """ms the interaction needs at least, forward and backward: the slower of its FLOPs at the fastest
    GEMM rate and its bytes at the stream rate at its footprint (either alone is a bound; both hold)."""
    work, stream = iteration_work(cfg), rate(limits, accesses(cfg)["interaction"].key)
    flops = {"forward": work["interaction_pair_flops"] / 3, "backward": work["interaction_pair_flops"] * 2 / 3}
    return {
        p: max(flops[p] / fastest_gemm(limits), work[f"interaction_{p}_bytes"] / stream) / 1e6
        for p in ("forward", "backward")
    }


def bound_ms(cfg: Config, limits: dict[str, float]) -> dict[str, float]:
    """Lower bound on ms per iteration: embedding bytes at their access's rate + each GEMM at its shape's rate."""
    work, rows = iteration_work(cfg), accesses(cfg)
    gather = rows["gather_bf16" if cfg.train.precision == Precision.BF16 else "gather_fp32"]
    forward = work["embedding_forward_bytes"] / rate(limits, gather.key) / 1e6
    update = work["embedding_update_bytes"] / rate(limits, rows["update"].key) / 1e6
    mlp = mlp_gemm_ms(cfg, limits, gemm_precision(cfg, limits))
    mlp += sum(interaction_ms(cfg, limits).values())
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
    Gather and update: random rows of the config's tables, as fp32 rows and as bf16 Split-SGD rows
    (whose update moves an fp32 row's bytes: the same rate).
    """
    rows = accesses(cfg)
    flops = sum(f for _, _, f in gemm_work(cfg))
    fields = {}
    for precision in (Precision.FP32, Precision.BF16):
        if precision == Precision.FP32 or "gemm_bf16_gflops" in limits:
            fields[f"roofline_gemm_{precision}_gflops"] = flops / mlp_gemm_ms(cfg, limits, precision) / 1e6
    for precision in ("fp32", "bf16"):
        fields[f"roofline_gather_{precision}_gbps"] = rate(limits, rows[f"gather_{precision}"].key)
        fields[f"roofline_update_{precision}_gbps"] = rate(limits, rows["update"].key)
    return fields


def roofline_report(cfg: Config, limits: dict[str, float]) -> str:
    """A few human-readable lines: the limits used, the work, the bound."""
    work, ms, rows = iteration_work(cfg), bound_ms(cfg, limits), accesses(cfg)
    gather = rows["gather_bf16" if cfg.train.precision == Precision.BF16 else "gather_fp32"]
    gemm = gemm_precision(cfg, limits)
    layers = rates(cfg, limits)[f"roofline_gemm_{gemm}_gflops"]
    t = cfg.train
    lines = gather.lines_per_s(limits[gather.key])
    latency = limits.get(gather.latency_key)
    flight = f", {lines * latency * 1e-9:.0f} misses in flight at {latency:.0f} ns each" if latency else ""
    return "\n".join(
        [
            f"machine ({limits.get(col.THREADS, 0):.0f} threads), {gather.rows:,} random rows of {gather.stride} B: "
            f"gather {limits[gather.key]:.2f} GB/s ({gather.read} B of each), "
            f"update {limits[rows['update'].key]:.2f} GB/s (read + written); "
            f"GEMM {gemm} {layers:.0f} GFLOP/s at the layers' shapes ({limits[f'gemm_{gemm}_gflops']:.0f} square)",
            f"gather: {lines / 1e6:.0f} M cache lines/s{flight} (Little's law)",
            f"work per iteration ({cfg.name}, {t.precision}, {t.optimizer}, batch {t.batch_size}): "
            f"{work['ids_per_iteration'] / 1e6:.3g} M ids, {work['embedding_forward_bytes'] / 1e6:.4g} MB forward, "
            f"{work['embedding_update_bytes'] / 1e6:.4g} MB update, "
            f"{(sum(f for _, _, f in gemm_work(cfg)) + work['interaction_pair_flops']) / 1e9:.4g} GFLOP",
            f"bound: {ms[col.ROOFLINE_MS]:.4g} ms/it = embedding {ms['roofline_embedding_ms']:.4g} "
            f"(forward {ms['roofline_embedding_forward_ms']:.4g} + update {ms['roofline_embedding_update_ms']:.4g}) "
            f"+ MLP {ms['roofline_mlp_ms']:.4g}; at most {t.batch_size / ms[col.ROOFLINE_MS] * 1e3:,.0f} samples/s",
        ]
    )
