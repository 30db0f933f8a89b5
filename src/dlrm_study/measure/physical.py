"""This CPU's physical limits, probed (`probes.cpp`), and a config's physical bound (`perfmodel.physical`).

- **Peaks**, per precision, on `threads` threads: fp32 from an FMA probe (AVX-512, else AVX2), bf16 from
  VDPBF16PS and AMX tiles where the CPU has them (the faster counts). Each probe runs long enough to time
  (`PEAK_S`), best of `REPEATS`. Beside them, the best library GEMM rate measured at the model's layer
  shapes (`measure.limits`): the bound charges the faster, so no GEMM of any library can beat it.
- **Lines**: the unique rows each table's ids touch in a step, drawn as the config draws them (the loops'
  own batches, `data.SyntheticData`, over STEPS steps), in tables stacked as the loops stack them, walked
  by the line probes: gathered (the bytes the forward reads of each row) and read-modified-written (the
  update's whole row), in every order of ORDERS, at every prefetch distance of `membench.DISTANCES` and every
  hint, ROUNDS rounds interleaved, fewest seconds kept. Little's law from the pointer-chase latency at the same
  footprint: misses in flight = lines/s x latency.

A probe's time is a floor, not a kernel's: each is the fewest seconds seen, on a quiet machine's terms
(another job only adds time).
"""

import functools
import hashlib
import sys
from pathlib import Path
from types import ModuleType

import torch

from dlrm_study import platform
from dlrm_study.config import Config, Precision
from dlrm_study.data import SyntheticData
from dlrm_study.errors import UsageError
from dlrm_study.measure import membench
from dlrm_study.measure.limits import measure_limits
from dlrm_study.measure.timing import best_s
from dlrm_study.model import kernels
from dlrm_study.model.tables import hugepages
from dlrm_study.perfmodel import physical
from dlrm_study.perfmodel.physical import Lines, Peaks
from dlrm_study.perfmodel.roofline import Access, layer_key, layer_shapes
from dlrm_study.records import columns as col

SOURCE = Path(__file__).with_name("probes.cpp")
PEAK_S = 0.05  # seconds a timed peak call runs at least
REPEATS = 5  # timed calls per probe, the fewest seconds kept
ROUNDS = 3  # interleaved rounds of the line probes
STEPS = 4  # steps of the config's ids a line probe walks
GATHER_HINTS = {"t0": 0, "t1": 1, "t2": 2, "nta": 3}
# The orders a probe walks a step's unique rows in, each table's after the last's. A loop may walk them in any
# order, so the bound is the faster: sorted (a loop that sorts its ids first), or drawn (in the order the batch
# first names each row, as a loop that walks its bags does, less the repeats).
ORDERS = ("sorted", "drawn")
UPDATE_HINTS = {"t0": 0, "w": 4}
# FLOPs one iteration of a peak probe does on one thread (its chains x lanes x FLOPs a lane).
FLOPS_PER_ITERATION = {
    "fma_avx512": 16 * 16 * 2,
    "fma_avx2": 12 * 8 * 2,
    "dpbf16_avx512": 16 * 16 * 4,
    "amx_bf16": 4 * 16 * 16 * 32 * 2,
}
NEEDS = {  # the CPU flags a probe's instructions need
    "fma_avx512": ("avx512f",),
    "fma_avx2": ("avx2", "fma"),
    "dpbf16_avx512": ("avx512f", "avx512_bf16"),
    "amx_bf16": ("amx_tile", "amx_bf16"),
}
PROBES = {"fp32": ("fma_avx512", "fma_avx2"), "bf16": ("amx_bf16", "dpbf16_avx512")}


@functools.cache
def load() -> ModuleType:
    """The compiled probes (built once per CPU kind and checkout, under torch's extension cache)."""
    from torch.utils import cpp_extension

    checkout = hashlib.sha256(str(SOURCE.resolve()).encode()).hexdigest()[:6]
    name = f"dlrm_study_probes_{kernels.cpu_fingerprint()}_{checkout}"
    folder = Path(cpp_extension._get_build_directory(name, verbose=False))
    print("dlrm-study: loading the hardware probes (compiled once, then cached)", file=sys.stderr)
    try:
        with kernels.build_lock(folder, kernels.wait_s()):
            kernels.clear_dead_build(folder, kernels.wait_s())
            flags = ["-O3", "-march=native", "-fopenmp"]  # per CPU kind, as the kernels (the name says which)
            return cpp_extension.load(
                name=name, sources=[str(SOURCE)], extra_cflags=flags, extra_ldflags=["-fopenmp"],
                build_directory=str(folder), verbose=False,
            )  # fmt: skip
    except (OSError, RuntimeError, ImportError) as err:
        raise UsageError(f"the hardware probes do not build here ({type(err).__name__}): a physical bound needs "
                         "a C++ compiler") from None  # fmt: skip


def probes_here(precision: str) -> list[str]:
    """The peak probes this CPU's flags allow for a precision, fastest kind first."""
    flags = platform.cpu_flags()
    return [name for name in PROBES[precision] if all(flag in flags for flag in NEEDS[name])]


def peak_gflops(probe: str, threads: int) -> float:
    """GFLOP/s of one peak probe on `threads` threads (0.0 where the OS refuses its instructions)."""
    run = getattr(load(), probe)
    iterations = 1 << 12
    while (seconds := run(iterations, threads)) < PEAK_S:  # long enough to time; a refusal returns < 0
        if seconds < 0:
            return 0.0
        iterations *= 2
    fewest = min([seconds] + [run(iterations, threads) for _ in range(REPEATS)])
    return FLOPS_PER_ITERATION[probe] * iterations * threads / fewest / 1e9


def thread_counts(threads: int) -> range:
    """The thread counts a bound on `threads` threads probes. A loop on n threads may leave some idle, so what n
    threads can do is the best that any count up to n did: on an AMX core, one thread ran 2,313 GFLOP/s where two
    ran 1,851 together, and a bound at two threads of 1,851 could be beaten."""
    return range(1, threads + 1)


def peaks(threads: int) -> dict[str, object]:
    """`peak_<precision>_gflops`, the probe and the thread count that gave it, fp32 always, bf16 where the CPU has
    bf16 instructions (none: the bf16 loops run on fp32 arithmetic, so their peak is fp32's)."""
    fields: dict[str, object] = {}
    for precision in ("fp32", "bf16"):
        best: tuple[float, str, int] | None = None
        for probe in probes_here(precision):
            rate, n = max((peak_gflops(probe, n), n) for n in thread_counts(threads))
            if rate <= 0:
                continue  # the OS refused its instructions
            fields[f"probe_{probe}_gflops"] = rate
            best = max(best or (rate, probe, n), (rate, probe, n))
        if best:
            for field, value in zip(("gflops", "probe", "threads"), best, strict=True):
                fields[f"peak_{precision}_{field}"] = value
    if "peak_bf16_gflops" not in fields:
        fields["peak_bf16_gflops"], fields["peak_bf16_probe"] = fields["peak_fp32_gflops"], "fp32 (no bf16 here)"
        fields["peak_bf16_threads"] = fields["peak_fp32_threads"]
    return fields


def library_gflops(cfg: Config, limits: dict[str, float]) -> dict[str, float]:
    """`library_<precision>_gflops`: the best rate torch and oneDNN reached at any of the model's GEMMs."""
    fields = {}
    for precision in ("fp32", "bf16"):
        rates = [limits[key] for shape in layer_shapes(cfg) for g in ("forward", "grad_input", "grad_weight")
                 if (key := layer_key(precision, shape, g)) in limits]  # fmt: skip
        if rates:
            fields[f"library_{precision}_gflops"] = max(rates)
    return fields


def step_rows(cfg: Config, steps: int = STEPS, order: str = "sorted") -> list[torch.Tensor]:
    """Per step, the unique rows its ids touch in the stacked tables, each table's in `order` (ORDERS)."""
    if order not in ORDERS:
        raise ValueError(f"order {order!r}: one of {', '.join(ORDERS)}")
    return step_walks(cfg, steps)[order]


def step_walks(cfg: Config, steps: int = STEPS) -> dict[str, list[torch.Tensor]]:
    """Per order of ORDERS, per step, the unique rows its ids touch in the stacked tables, drawn by the loops' own
    data (`SyntheticData`, the training stream): each batch drawn once, every order derived from it."""
    data, starts = SyntheticData(cfg), torch.tensor([0, *cfg.model.table_rows[:-1]]).cumsum(0)
    walks: dict[str, list[torch.Tensor]] = {order: [] for order in ORDERS}
    for index in range(steps):
        tables = [orders_of(ids) for ids in data.batch(index).indices]
        for order, found in walks.items():
            found.append(torch.cat([rows[order] + start for rows, start in zip(tables, starts, strict=True)]))
    return walks


def orders_of(ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """The distinct values of `ids` in every order of ORDERS, from one pass of `torch.unique`: sorted, and in the
    order each first appears."""
    unique, inverse = torch.unique(ids, return_inverse=True)
    where = torch.arange(len(ids))
    first = torch.full((len(unique),), len(ids), dtype=torch.long).scatter_reduce(0, inverse, where, "amin")
    return {"sorted": unique, "drawn": unique[first.argsort()]}


def first_seen(ids: torch.Tensor) -> torch.Tensor:
    """The distinct values of `ids` in the order each first appears."""
    return orders_of(ids)["drawn"]


def gather_bytes(cfg: Config) -> int:
    """Bytes the forward reads of each row: the whole fp32 row, or the upper half of a [hi | lo] bf16 row."""
    dim = cfg.model.embedding_dim
    return 4 * dim if cfg.train.precision == Precision.FP32 else -(-2 * dim // 4) * 4


def line_probes(cfg: Config, threads: int, steps: int = STEPS) -> dict[str, object]:
    """ms a step's unique rows take, gathered and updated, at the best order, distance, hint and thread count up
    to `threads`; the lines and Little's law beside them."""
    walks = {order: torch.cat(found) for order, found in step_walks(cfg, steps).items()}
    ids = walks[ORDERS[0]]  # every order walks the same rows
    stride, read = 4 * cfg.model.embedding_dim, gather_bytes(cfg)
    buffer = hugepages.empty(sum(cfg.model.table_rows) * stride // 4, dtype=torch.int32)
    buffer.fill_(membench.ONES)  # touched here, not in a timed call
    ops = load()
    gather, update = ops.lines_gather, ops.lines_update
    counts = thread_counts(threads)
    calls = {("gather", order, hint, ahead, n):
             (lambda w=walk, h=h, a=ahead, n=n: gather(buffer, w, stride, read, a, h, n))
             for order, walk in walks.items() for hint, h in GATHER_HINTS.items() for ahead in membench.DISTANCES
             for n in counts}  # fmt: skip
    calls |= {("update", order, hint, ahead, n):
              (lambda w=walk, h=h, a=ahead, n=n: update(buffer, w, stride, stride, a, h, n))
              for order, walk in walks.items() for hint, h in UPDATE_HINTS.items() for ahead in membench.DISTANCES
              for n in counts}  # fmt: skip
    seconds = dict.fromkeys(calls, float("inf"))
    for _ in range(ROUNDS):
        for key, call in calls.items():
            seconds[key] = min(seconds[key], best_s(call, 2))
    fields: dict[str, object] = {"unique_rows_per_step": len(ids) / steps, "steps_probed": steps}
    for kind, bytes_ in (("gather", read), ("update", stride)):
        (_, order, hint, ahead, n), fewest = min(((k, s) for k, s in seconds.items() if k[0] == kind),
                                                 key=lambda ks: ks[1])  # fmt: skip
        lines = len(ids) * -(-bytes_ // 64)
        fields |= {f"{kind}_ms": fewest / steps * 1e3, f"{kind}_order": order, f"{kind}_hint": hint,
                   f"{kind}_ahead_rows": ahead, f"{kind}_threads": n, f"{kind}_lines_per_step": lines / steps,
                   f"{kind}_mlines_per_s": lines / fewest / 1e6}  # fmt: skip
    if kernels.load() is not None:  # the walk is the fused kernels' (membench_chase)
        access = Access("gather", read, stride, sum(cfg.model.table_rows))
        latency = membench.latency_ns(buffer, access, access.rows, torch.Generator().manual_seed(0))
        fields |= {"chase_ns": latency, "misses_in_flight": fields["gather_mlines_per_s"] * 1e6 * latency * 1e-9}
    return fields


def lines_of(fields: dict[str, object]) -> Lines:
    return Lines(float(fields["gather_ms"]), float(fields["update_ms"]))  # type: ignore[arg-type]


def measure_bound(cfg: Config, threads: int, quick: bool = False) -> dict[str, object]:
    """A bound record's fields for `cfg` on `threads` threads: the peaks, the library's best, the line probes
    (fewer steps when `quick`) and the bound they give (`perfmodel.physical.bound_fields`)."""
    torch.set_num_threads(threads)
    say = functools.partial(print, file=sys.stderr)
    say(f"dlrm-study: physical bound of {cfg.name} {cfg.train.precision} on {threads} threads: the peak probes")
    precision = physical.compute_precision(cfg)
    fields: dict[str, object] = {col.THREADS: threads, col.PRECISION: precision, "quick": quick, **peaks(threads)}
    say("dlrm-study: the library's GEMMs at the model's layer shapes")
    fields |= library_gflops(cfg, measure_limits(layers=layer_shapes(cfg), quick=quick))
    say("dlrm-study: the line probes over the config's own ids (two orders, every distance and hint; a few minutes)")
    fields |= line_probes(cfg, threads, 2 if quick else STEPS)
    return fields | physical.bound_fields(cfg, Peaks.of(fields, precision), lines_of(fields))  # type: ignore[arg-type]


def probed(fields: dict[str, object], kind: str) -> str:
    """One line probe's result: its time a step, its rate and the form that reached it."""
    ms, rate, hint = fields[f"{kind}_ms"], fields[f"{kind}_mlines_per_s"], fields[f"{kind}_hint"]
    order = fields.get(f"{kind}_order", "sorted")  # records before ORDERS walked sorted rows only
    form = f"{order}, {hint} {fields[f'{kind}_ahead_rows']} rows ahead on {fields[f'{kind}_threads']}"
    return f"{kind} {ms:.2f} ms ({rate:.0f} M lines/s, {form})"


def report(cfg: Config, fields: dict[str, object]) -> str:
    """A few lines: the peaks, the lines and Little's law, each operator's bound and the two step bounds."""
    precision = physical.compute_precision(cfg)
    peak = Peaks.of(fields, precision)  # type: ignore[arg-type]
    lines = [
        f"{cfg.name}, {precision}, {fields[col.THREADS]} threads: peak {peak.gflops:,.0f} GFLOP/s "
        f"({fields[f'peak_{precision}_probe']} {peak.probe:,.0f} on {fields[f'peak_{precision}_threads']}, "
        f"best library GEMM {peak.library:,.0f})",
        f"{fields['unique_rows_per_step']:,.0f} unique rows a step: {probed(fields, 'gather')}, "
        f"{probed(fields, 'update')}",
    ]
    if "chase_ns" in fields:
        lines.append(f"Little's law: {fields['misses_in_flight']:.1f} misses in flight at {fields['chase_ns']:.0f} ns")
    lines += [f"  {name:<26} {fields[physical.op_column(name)]:9.3f} ms" for name in physical.OPERATORS]
    sequential, overlapped = fields[physical.SEQUENTIAL], fields[physical.OVERLAPPED]
    lines.append(f"step: {sequential:.2f} ms in sequence, {overlapped:.2f} ms overlapped")
    return "\n".join(lines)
