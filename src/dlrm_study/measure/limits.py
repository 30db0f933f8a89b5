"""This machine's limits, measured: random-row gather and update rates (`membench`), GEMM throughput in
fp32 and bf16 at the model's layer shapes; what the roofline's bound (`perfmodel.roofline`) is computed from.

Each is measured on the CPU, on torch's current thread count, after a warm-up, as the best of its
repeats (on a shared machine another job only adds time, and a limit is what the machine can do),
and kept between runs (`limits_cache`: once per machine, threads, torch and measuring code).
GEMMs run through the ops the loops run: torch's (nn.Linear's addmm, autograd's mm) and, where
oneDNN is there, the fused layers' matmuls (`model.fused_mlp`); the faster counts. Quick mode uses
fewer ids and repeats: rougher. No rate depends on which path a torch op takes, and no buffer on
the cache size a VM reports: each is as large as the bound needs.

Limits are a quiet machine's: a measurement taken while other work keeps the cores busy (the
load average, less this process, above `load_max()`) is refused as a limit, with one line: it
serves this process's bound but is never cached. A step or operator that beats its bound has the
limits behind that bound measured again at once (`remeasured`), before its record is written: a bound a
loop beats is not this machine's limit, and a record is bounded by limits no part of it beat.

The gather and update probes also find this machine's best prefetch distance in rows; `use_prefetch` runs
the fused kernels at it (the kernels' own default where no probe ran) and says so in the record.
"""

import functools
import os
import statistics
import sys

import torch
import torch.nn.functional as F

from dlrm_study import platform, settings
from dlrm_study.config import Config, Precision
from dlrm_study.measure import context, limits_cache, membench
from dlrm_study.measure.timing import best_s
from dlrm_study.model import fused_mlp, kernels
from dlrm_study.model.tables import SparseArch
from dlrm_study.perfmodel import operator_bounds, roofline
from dlrm_study.perfmodel.roofline import GEMM_PASSES, Access, layer_key
from dlrm_study.records import columns as col

GEMM_SHAPE = (2048, 1024, 1024)  # M, K, N: one square-ish GEMM, reported beside the layer rates
IDS = {True: 2**18, False: 2**21}  # random rows per timed membench call, quick and full
LOAD_SHARE = 0.5  # of the cores: more runnable work than this beside this process is a loaded machine
# Record fields: the fused kernels' prefetch distances (rows ahead) and whence (`probe`, or the kernels' `default`).
PREFETCH_GATHER, PREFETCH_UPDATE, PREFETCH_FROM = "prefetch_rows_gather", "prefetch_rows_update", "prefetch_from"
# Record fields of the paired check `versus_embedding_bag` (a roofline record's; not a limit).
PAIRED_FUSED_MS, PAIRED_BAG_MS = "paired_fused_gather_ms", "paired_embedding_bag_ms"
PAIRED_SPEEDUP, PAIRED_ROUNDS = "paired_fused_gather_speedup", "paired_rounds"


class Limits(dict[str, float]):
    """Measured limits, flat, units in the key names (what `measure_limits` returns), and how they were
    measured (`quick`): what a re-measurement repeats. A plain dict of limits is one given by hand."""

    def __init__(self, values: dict[str, float], quick: bool) -> None:
        super().__init__(values)
        self.quick = quick


def measure_limits(
    accesses: list[Access] | None = None,
    quick: bool = False,
    layers: list[tuple[int, int, int]] | None = None,
    fresh: bool = False,
) -> Limits:
    """Measured limits of this machine, flat, units in the key names: each measured once, then cached.

    `accesses`: the random-row accesses whose rates to measure (`membench.Access`); `layers`:
    (batch, fan_in, fan_out) whose GEMMs to time. `needs(cfg)` gives both. `fresh`: measure them
    all now (the cache keeps the higher of each rate).
    """
    accesses, shapes = sorted(set(accesses or ())), sorted(set(layers or ()))
    threads, repeats = torch.get_num_threads(), 3 if quick else 7
    measured = context.current().limits  # this process's measurements (the cache may be off)
    have = {} if fresh else limits_cache.load(threads, quick) | measured.get((threads, quick), {})
    loaded_before = load_beside_me()
    squares = [f"gemm_{name}_gflops" for name in gemm_dtypes()]
    layer_keys = {s: [layer_key(p, s, g) for p in gemm_dtypes() for g in GEMM_PASSES] for s in shapes}
    new = membench.measure([a for a in accesses if a.key not in have], IDS[quick], repeats)
    if any(key not in have for key in squares):
        new |= gemm_limits(repeats)
    new |= layer_gemm_limits(tuple(s for s in shapes if any(k not in have for k in layer_keys[s])), repeats)
    if new and quiet(loaded_before):
        limits_cache.store(threads, quick, new)
    measured.setdefault((threads, quick), {}).update(new)
    have |= new
    if fresh:  # the best of now and before
        have = limits_cache.merge(have, limits_cache.load(threads, quick))
    wanted = [a.key for a in accesses] + squares + [k for keys in layer_keys.values() for k in keys]
    wanted += [a.latency_key for a in accesses if a.latency_key in have]  # C++ probes only
    wanted += [membench.ahead_key(a) for a in accesses if membench.ahead_key(a) in have]
    reused = sum(key not in new for key in wanted)
    if reused:
        print(f"dlrm-study: {reused} of {len(wanted)} machine limits reused, measured earlier "
              f"({limits_cache.path() or 'in this process'})", file=sys.stderr)  # fmt: skip
    return Limits({col.THREADS: float(threads), **{key: have[key] for key in wanted}}, quick)


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


def layer_gemms(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, grad: torch.Tensor) -> dict[str, list]:
    """One Linear layer's three GEMMs, through the ops the loops run (see the module docstring): torch's
    (nn.Linear's addmm, autograd's mm) and, where oneDNN is there, the fused layers' matmuls (`fused_mlp`;
    in fp32 torch's GEMMs are MKL's, at half oneDNN's rate on AMD CPUs): the faster counts."""
    gemms = {
        "forward": [functools.partial(F.linear, x, weight, bias)],  # aten::addmm
        "grad_input": [functools.partial(torch.mm, grad, weight)],
        "grad_weight": [functools.partial(torch.mm, x.t(), grad)],  # autograd's mat1.t().mm(grad)
    }
    if fused_mlp.available():
        gemms["forward"].append(functools.partial(torch.ops.mkldnn._linear_pointwise, x, weight, bias, "none", [], ""))
        gemms["grad_input"].append(functools.partial(fused_mlp.matmul, grad, weight.t()))
        gemms["grad_weight"].append(functools.partial(fused_mlp.matmul, grad.t(), x.t()))
    return gemms


def layer_gemm_limits(shapes: tuple[tuple[int, int, int], ...], repeats: int) -> dict[str, float]:
    """GFLOP/s of each layer shape's forward and backward GEMMs, in each of `gemm_dtypes`."""
    limits = {}
    for precision, dtype in gemm_dtypes().items():
        for layer in shapes:
            batch, fan_in, fan_out = layer
            x, grad = torch.randn(batch, fan_in, dtype=dtype), torch.randn(batch, fan_out, dtype=dtype)
            weight, bias = torch.randn(fan_out, fan_in, dtype=dtype), torch.randn(fan_out, dtype=dtype)
            flops = 2 * batch * fan_in * fan_out
            for gemm_pass, fns in layer_gemms(x, weight, bias, grad).items():
                limits[layer_key(precision, layer, gemm_pass)] = flops / min(best_s(fn, repeats) for fn in fns) / 1e9
    return limits


def load_max() -> float:
    """Runnable processes beside this one allowed while measuring: DLRM_STUDY_LOAD_MAX, else LOAD_SHARE of the cores."""
    most = settings.current().load_max
    return LOAD_SHARE * (os.cpu_count() or 1) if most is None else most


def load_beside_me() -> float:
    """The last minute's load average, less this process (one runnable thread while it measures)."""
    return max(0.0, os.getloadavg()[0] - 1.0)


def quiet(before: float) -> bool:
    """Whether limits measured between a load of `before` and now may be kept; one line where not."""
    load = max(before, load_beside_me())
    if load <= load_max():
        return True
    print(f"dlrm-study: limits measured while the machine was loaded (load average {load:.1f} beside this process, "
          f"more than {load_max():.1f}): used by this process, not kept as this machine's limits "
          f"({settings.LOAD_MAX} sets the load allowed)", file=sys.stderr)  # fmt: skip
    return False


def use_prefetch(cfg: Config, limits: dict[str, float] | None, arch: SparseArch) -> dict[str, int | str]:
    """Run the fused C++ kernels at the prefetch distances this machine's probes found for `cfg`'s rows
    (`membench.ahead_key`; each distance the kernels' default where none was measured); return the distances
    they run, in rows ahead, as a record's fields. Nothing where `arch` does not run the C++ kernels."""
    if "cpp" not in arch.kernel_path.split(","):
        return {}
    return set_prefetch(cfg, limits)


def set_prefetch(cfg: Config, limits: dict[str, float] | None) -> dict[str, int | str]:
    """Set the C++ kernels' prefetch distances for `cfg`'s rows from `limits` (see `use_prefetch`)."""
    rows = roofline.accesses(cfg)
    gather, update = rows["gather_bf16" if cfg.train.precision == Precision.BF16 else "gather_fp32"], rows["update"]
    found = [(limits or {}).get(membench.ahead_key(access)) for access in (gather, update)]
    ops = kernels.load()
    ops.set_prefetch_rows(*(-1 if rows_ahead is None else int(rows_ahead) for rows_ahead in found))
    ran = ops.prefetch_rows(gather.read, update.read)
    return {
        PREFETCH_GATHER: ran[0],
        PREFETCH_UPDATE: ran[1],
        PREFETCH_FROM: "probe" if all(rows_ahead is not None for rows_ahead in found) else "default",
    }


def versus_embedding_bag(cfg: Config, limits: dict[str, float] | None, quick: bool = False) -> dict[str, float]:
    """The paired check of the fused gather against torch's EmbeddingBag at `cfg`'s shape (its precision's rows,
    bags of its mean pooling factor), the kernels at the probes' distance (`membench.versus_embedding_bag`):
    each one's median seconds over the rounds, in ms, and the median of the rounds' ratios (EmbeddingBag's
    time over the fused gather's: > 1, the fused gather is faster). A check to run on a quiet machine, not a
    limit: nothing is cached. Empty without the C++ kernels."""
    if kernels.load() is None:
        return {}
    set_prefetch(cfg, limits)
    rows = roofline.accesses(cfg)
    access = rows["gather_bf16" if cfg.train.precision == Precision.BF16 else "gather_fp32"]
    bag = max(1, round(roofline.mean_lookups(cfg)))
    times = membench.versus_embedding_bag(access, bag, IDS[quick], 3 if quick else 7)
    ratios = [theirs / ours for ours, theirs in zip(times["fused"], times["embedding_bag"], strict=True)]
    return {
        PAIRED_FUSED_MS: statistics.median(times["fused"]) * 1e3,
        PAIRED_BAG_MS: statistics.median(times["embedding_bag"]) * 1e3,
        PAIRED_SPEEDUP: statistics.median(ratios),
        PAIRED_ROUNDS: float(len(ratios)),
    }


def paired_line(paired: dict[str, float]) -> str:
    """One line of the paired check (`versus_embedding_bag`): its medians and the median ratio."""
    return (f"paired check, fused gather vs torch's EmbeddingBag at this shape: {paired[PAIRED_FUSED_MS]:.3g} ms vs "
            f"{paired[PAIRED_BAG_MS]:.3g} ms, EmbeddingBag / fused {paired[PAIRED_SPEEDUP]:.2f}x (median of "
            f"{paired[PAIRED_ROUNDS]:.0f} paired rounds; a check on a quiet machine, not a result)")  # fmt: skip


def behind(cfg: Config, part: str) -> list[str]:
    """The limits a bounded part of `cfg`'s step is made of (`operator_bounds.BOUNDED`, or "step": all)."""
    rows = roofline.accesses(cfg)
    gather = rows["gather_bf16" if cfg.train.precision == Precision.BF16 else "gather_fp32"]
    layers = [layer_key(p, s, g) for p in gemm_dtypes() for s in roofline.layer_shapes(cfg) for g in GEMM_PASSES]
    gemms = layers + [f"gemm_{p}_gflops" for p in gemm_dtypes()]
    parts = {
        "embedding_forward": [gather.key],
        "embedding_backward_update": [rows["update"].key],
        "interaction": [rows["interaction"].key, *gemms],
    }
    if part == "step":
        return sorted({key for keys in parts.values() for key in keys} | set(gemms))
    return parts.get(part, gemms)  # the MLPs' parts and the dense backward: the GEMM rates


def remeasured(cfg: Config, limits: dict[str, float], fields: dict[str, object]) -> dict[str, float]:
    """The limits of `cfg`'s bound measured again now, where a part of a record's `fields` (an operator, or
    the step: `operator_bounds.beaten`) ran faster than its bound: the limits behind those parts are dropped
    (cache and process) and measured anew in `limits`' mode, with one line. Empty where no part beat its
    bound, or where `limits` were given by hand (not a `Limits`: nothing of this machine to measure again)."""
    parts = operator_bounds.beaten(fields)
    if not parts or not isinstance(limits, Limits):
        return {}
    threads = torch.get_num_threads()
    stale = sorted({key for part in parts for key in behind(cfg, part)})
    limits_cache.forget(threads, stale)
    for quick in (True, False):
        for key in stale:
            context.current().limits.get((threads, quick), {}).pop(key, None)
    print(f"dlrm-study: {', '.join(parts)} ran faster than the roofline's bound: its {len(stale)} limits are "
          "measured again before the record is written", file=sys.stderr)  # fmt: skip
    return measure_limits(**roofline.needs(cfg), quick=limits.quick)
