"""A lending's first phase: the GPU's embedding kernels against their PyTorch stand-ins, at every embedding shape
the lending's headline measures, before any record is made.

The first lending found its Triton lookup wrong at the targets' row widths only after its verdict runs (issue 52):
a kernel that fails at some shapes puts a wrong number in a record. Here,
per shape (batch, tables, ids a bag, row width, from each target and H1 knob end the plan measures; rows capped at
`ROWS_CAP`, which changes no indexing), the pooled lookup, the SGD update and the row-wise Adagrad update of
`ops` (Triton's) against `torch_ops`'s on the same inputs. Gradients are whole numbers and the learning rate a power
of two, so every sum is exact whatever its order: the lookup and SGD must agree bit for bit, Adagrad to a few
roundings (`ADAGRAD_TOL`).

Each shape's outcome is a record in `gpu_numerics.csv` (`run`) beside the lending's other records, under the lending's
invocation; the court leaves out the Triton records of an invocation whose check failed (`analysis.readers
.checked_kernels`), so no verdict pairs a wrong kernel's numbers.
"""

import dataclasses
import time
from pathlib import Path
from types import ModuleType

import torch

from dlrm_study.config import Config, Loop
from dlrm_study.model.kernels import torch_ops, triton_ops
from dlrm_study.plans.sensitivity import NUMERICS_RECORDS
from dlrm_study.records import columns as col
from dlrm_study.records import store
from dlrm_study.records.record import make_record

STUDY = "gpu-numerics"
ROWS_CAP = 100_000  # rows a table of the check holds: enough for every shape's ids to collide and to spread
ADAGRAD_TOL = 1e-6  # relative: sqrt(m) + eps rounded two ways (a GPU's and PyTorch's), and m's sum of squares


@dataclasses.dataclass(frozen=True)
class Shape:
    """What an embedding kernel's launch depends on: the batch, the tables, ids a bag (0: bags of 1 to
    `lookups` ids, uniform pooling), the row width, the rows."""

    batch: int
    tables: int
    bag_size: int
    lookups: int
    dim: int
    rows: int

    @property
    def name(self) -> str:
        bags = f"{self.bag_size} ids a bag" if self.bag_size else f"1-{self.lookups} ids a bag"
        return f"batch {self.batch}, {self.tables} tables, {bags}, rows of {self.dim}"


def shape_of(cfg: Config) -> Shape:
    fixed = cfg.data.pooling == "fixed"
    lookups = cfg.data.lookups_per_table
    rows = min(ROWS_CAP, max(cfg.model.table_rows))
    return Shape(cfg.train.batch_size, len(cfg.model.table_rows), lookups if fixed else 0, lookups,
                 cfg.model.embedding_dim, rows)  # fmt: skip


def shapes(configs: list[Config]) -> list[Shape]:
    """The distinct embedding shapes of these configs' GPU steps, in their order."""
    return list(dict.fromkeys(shape_of(cfg) for cfg in configs if cfg.train.loop == Loop.GPU))


def inputs(shape: Shape, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch of the shape: int32 ids, bag starts, whole-number gradients, and a table of rows."""
    gen = torch.Generator().manual_seed(seed)
    bags = shape.batch * shape.tables
    if shape.bag_size:
        starts = torch.arange(bags + 1, dtype=torch.int64) * shape.bag_size
    else:
        lengths = torch.randint(1, shape.lookups + 1, (bags,), generator=gen)
        starts = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    ids = torch.randint(0, shape.rows, (int(starts[-1]),), generator=gen, dtype=torch.int32)
    grad = torch.randint(-4, 5, (shape.batch, shape.tables, shape.dim), generator=gen).float()
    weight = torch.randint(-8, 9, (shape.rows, shape.dim), generator=gen).float()  # whole: every sum exact
    return ids, starts, grad, weight


def differences(ops: ModuleType, shape: Shape, device: torch.device, seed: int = 0) -> dict[str, float]:
    """Per kernel (`lookup`, `sgd`, `adagrad`), the largest relative difference between `ops` on `device` and the
    PyTorch stand-ins on the CPU, on one batch of the shape."""
    ids, starts, grad, weight = inputs(shape, seed)
    batch, tables = shape.batch, shape.tables
    on = [t.to(device) for t in (ids, starts, grad, weight)]
    found = {"lookup": gap(ops.forward_fp32(on[3], on[0], on[1], batch, tables),
                           torch_ops.forward_fp32(weight, ids.long(), starts, batch, tables))}  # fmt: skip
    for name, momentum in (("sgd", None), ("adagrad", torch.zeros(shape.rows))):
        mine, theirs = on[3].clone(), weight.clone()
        m_mine = None if momentum is None else momentum.to(device)
        m_theirs = None if momentum is None else momentum.clone()
        ops.update_fp32(mine, m_mine, on[0], on[1], on[2], 0.5, 1e-8, batch, tables, shape.bag_size)
        torch_ops.update_fp32(theirs, m_theirs, ids, starts, grad, 0.5, 1e-8, batch, tables, shape.bag_size)
        found[name] = gap(mine, theirs)
    return found


def gap(mine: torch.Tensor, theirs: torch.Tensor) -> float:
    """The largest difference relative to the reference's scale (an exact kernel: 0.0); inf where shapes differ."""
    mine = mine.detach().float().cpu()
    if mine.shape != theirs.shape or not torch.isfinite(mine).all():
        return float("inf")
    return float((mine - theirs).abs().max() / theirs.abs().max().clamp_min(1e-30))


def allowed(kernel: str) -> float:
    return ADAGRAD_TOL if kernel == "adagrad" else 0.0


def check(ops: ModuleType, found: list[Shape], device: torch.device) -> list[dict[str, object]]:
    """One row per shape and kernel: its difference, what is allowed, and whether it passed (an error is a fail)."""
    rows = []
    for shape in found:
        start = time.monotonic()
        try:
            gaps = differences(ops, shape, device)
            error = ""
        except Exception as err:  # a kernel that does not launch at a shape fails it, said
            gaps, error = dict.fromkeys(("lookup", "sgd", "adagrad"), float("inf")), f"{type(err).__name__}: {err}"
        for kernel, value in gaps.items():
            rows.append({"shape": shape.name, "kernel": kernel, col.KERNEL_PATH: ops.NAME, "max_rel_diff": value,
                         "allowed": allowed(kernel), col.NUMERICS_PASSED: value <= allowed(kernel),
                         "failure": error[:200], "seconds": round(time.monotonic() - start, 3)})  # fmt: skip
    return rows


def said(rows: list[dict[str, object]]) -> str:
    """The check in one line: how many shapes, and each failure."""
    failed = [f"{r['kernel']} at {r['shape']} ({r['failure'] or format(r['max_rel_diff'], '.3g')})"
              for r in rows if not r[col.NUMERICS_PASSED]]  # fmt: skip
    shapes_n = len({r["shape"] for r in rows})
    if not failed:
        path = rows[0][col.KERNEL_PATH] if rows else "no"
        return f"numerics: {path} kernels match their stand-ins at {shapes_n} shapes"
    return f"NUMERICS FAILED: {len(failed)} of {len(rows)}: " + "; ".join(failed[:4])


def run(out: Path, found: list[Shape], device: torch.device) -> str:
    """The check of Triton's kernels at these shapes on `device`, its rows recorded in `out`/gpu_numerics.csv (under
    the lending's invocation); a line saying how it went. Where Triton cannot run, nothing to check, said."""
    if not triton_ops.available(device):
        return f"numerics: Triton's kernels cannot run on {device.type} here: their stand-ins run, nothing to check"
    rows = check(triton_ops, found, device)
    store.append_many(out / NUMERICS_RECORDS, [make_record(STUDY, row, device=device) for row in rows])
    return said(rows)
