"""A kernel change measured paired: the fused CPU kernels of a commit against this tree's, side by side.

Both builds of `model/kernels/fused_cpu.cpp` are loaded in one process and run a preset's own steps (its
synthetic batches, table-batched ids, tables on huge pages as the optimized loop keeps them): the forward's
gather and the fused update, in fp32 and in Split-SGD bf16. Each round times every case once, the order of
the cases reversed every other round, so a slow window of the shared host falls on both. Each kernel updates
its own copy of the same tables with the same gradients, and the two copies are compared bit for bit at the
end: a change that keeps the update's order must leave them identical.

    python scripts/kernel_pair.py --against HEAD                 # HEAD's kernels against the working tree's
    python scripts/kernel_pair.py --against HEAD --ahead 16,32   # also at these update prefetch distances
    python scripts/kernel_pair.py --against variant.cpp          # an experiment's source against the tree's

Prints, per precision and kernel, the median ms a step [least, most] over the rounds and the median of the
rounds' ratios (before / after: > 1, the tree's kernel is faster). A tool for a kernel's commit message, not a
record: run it on a quiet machine.
"""

import argparse
import hashlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch

from dlrm_study.config import Precision, preset
from dlrm_study.data.batch import batched_ids, table_starts
from dlrm_study.data.synthetic import SyntheticData
from dlrm_study.errors import UsageError
from dlrm_study.model import kernels
from dlrm_study.model.kernels import torch_ops
from dlrm_study.model.tables import hugepages

REPO = Path(__file__).resolve().parents[1]
SOURCE = "src/dlrm_study/model/kernels/fused_cpu.cpp"
LR = 0.01


def source_at(revision: str) -> str:
    """The kernel source at `revision`, a commit or a .cpp file (one line naming it where neither is found)."""
    if revision.endswith(".cpp"):
        if not Path(revision).is_file():
            raise UsageError(f"no kernel source {revision}")
        return Path(revision).read_text()
    done = subprocess.run(["git", "-C", str(REPO), "show", f"{revision}:{SOURCE}"], capture_output=True, text=True)
    if done.returncode:
        raise UsageError(f"no {SOURCE} at {revision!r} in {REPO}")
    return done.stdout


def build_before(text: str) -> ModuleType:
    """The given kernel source, built under a name of its own (its digest): cached by torch like the tree's."""
    from torch.utils import cpp_extension

    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    folder = Path(tempfile.gettempdir()) / f"dlrm-study-kernel-pair-{digest}"
    folder.mkdir(exist_ok=True)
    source = folder / "fused_cpu.cpp"
    source.write_text(text)
    print(f"building the kernels of {digest} (once per source)", file=sys.stderr)
    name = f"kernel_pair_{digest}_{kernels.cpu_fingerprint()}"
    return cpp_extension.load(name=name, sources=[str(source)], extra_cflags=kernels.CFLAGS,
                              extra_ldflags=["-fopenmp"], build_directory=str(folder))  # fmt: skip


def steps_of(config: str, steps: int) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], list[int], int, int]:
    """The preset's first `steps` batches as the kernels take them, its table rows, dim and batch size."""
    cfg = preset(config)
    data, rows = SyntheticData(cfg), list(cfg.model.table_rows)
    starts = table_starts(rows)
    batches = [batched_ids(b.indices, b.offsets, starts) for b in (data.batch(i) for i in range(steps))]
    return batches, rows, cfg.model.embedding_dim, cfg.train.batch_size


def tables(rows: list[int], dim: int, precision: Precision, seed: int = 0) -> torch.Tensor:
    """One table-batched matrix as the loop holds it: fp32 rows, or [hi | lo] int16 rows; on huge pages."""
    total, generator = sum(rows), torch.Generator().manual_seed(seed)
    shape, dtype = ((total, 2 * dim), torch.int16) if precision == Precision.BF16 else ((total, dim), torch.float32)
    table = hugepages.empty(*shape, dtype=dtype)
    for start in range(0, total, 1 << 20):  # in slices: no full fp32 copy of a bf16 table
        part = torch.rand(min(1 << 20, total - start), dim, generator=generator) * 0.02 - 0.01
        table[start : start + len(part)] = torch_ops.interleave(part) if precision == Precision.BF16 else part
    return table


Calls = dict[str, Callable[[], object]]


def step_calls(ops: ModuleType, table: torch.Tensor, precision: Precision, batch: int, tables_n: int,
               ids: torch.Tensor, starts: torch.Tensor, grad: torch.Tensor) -> Calls:  # fmt: skip
    """The gather and the update of one step, as the optimized loop calls them."""
    if precision == Precision.BF16:
        return {"gather": lambda: ops.forward_bf16(torch_ops.upper(table), ids, starts, batch, tables_n),
                "update": lambda: ops.sgd_split_bf16(table, ids, starts, grad, LR, batch, tables_n)}  # fmt: skip
    return {"gather": lambda: ops.forward_fp32(table, ids, starts, batch, tables_n),
            "update": lambda: ops.sgd_fp32(table, ids, starts, grad, LR, batch, tables_n)}  # fmt: skip


def compare(before: ModuleType, after: ModuleType, args: argparse.Namespace) -> bool:
    """Time every case paired, round after round; print the table; whether the tables ended identical."""
    batches, rows, dim, batch = steps_of(args.config, args.steps)
    grads = [torch.randn(batch, len(rows), dim, generator=torch.Generator().manual_seed(i)) * 1e-3
             for i in range(args.steps)]  # fmt: skip
    aheads = [int(a) for a in args.ahead.split(",")] if args.ahead else [-1]
    identical = True
    for precision in (Precision.BF16, Precision.FP32):
        built = {"before": (before, tables(rows, dim, precision)), "after": (after, tables(rows, dim, precision))}
        cases = [(kind, name, ahead) for kind in ("gather", "update") for name in built for ahead in aheads]
        times: dict[tuple[str, str, int], list[float]] = {case: [] for case in cases}
        for r in range(args.rounds + 1):  # round 0 warms (page faults, the pairs' buffers), untimed
            for kind, name, ahead in cases if r % 2 else cases[::-1]:
                ops, table = built[name]
                ops.set_prefetch_rows(-1, ahead)
                ids, starts = batches[r % args.steps]
                call = step_calls(ops, table, precision, batch, len(rows), ids, starts, grads[r % args.steps])[kind]
                start = time.perf_counter()
                call()
                if r:
                    times[(kind, name, ahead)].append(time.perf_counter() - start)
        same = torch.equal(built["before"][1], built["after"][1])
        identical &= same
        report(precision, times, aheads, same)
        del built
    return identical


def report(precision: Precision, times: dict[tuple[str, str, int], list[float]], aheads: list[int], same: bool) -> None:
    print(f"\n{precision.value}: ms a step, median [least, most]; before / after, the median of the rounds' ratios")
    for kind, name, ahead in times:
        ms = [t * 1e3 for t in times[(kind, name, ahead)]]
        line = f"  {kind:6} {name:6} ahead {'default' if ahead < 0 else ahead:>7}: {statistics.median(ms):7.2f} "
        line += f"[{min(ms):.2f}, {max(ms):.2f}]"
        if name == "after":
            ratios = [b / a for b, a in zip(times[(kind, "before", ahead)], times[(kind, name, ahead)], strict=True)]
            line += f"   before / after {statistics.median(ratios):.3f}x"
        print(line)
    print(f"  tables after every round: {'bit for bit identical' if same else 'DIFFERENT'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--against", default="HEAD", help="the 'before' kernels: a commit or a .cpp (default HEAD)")
    parser.add_argument("--config", default="dlrm-benchmark", help="a preset (default dlrm-benchmark)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--steps", type=int, default=4, help="batches taken in turn")
    parser.add_argument("--ahead", default="", help="update prefetch distances in rows, e.g. 16,32")
    args = parser.parse_args(argv)
    try:
        if args.rounds < 1 or args.steps < 1:
            raise UsageError("--rounds and --steps are at least 1")
        preset(args.config)  # an unknown preset refused before any build
        text = source_at(args.against)
        if text == kernels.SOURCE.read_text():
            raise UsageError(f"the kernels at {args.against} are this tree's: nothing to compare")
        after = kernels.load()
        if after is None:
            raise UsageError("the fused CPU kernels do not build here")
        identical = compare(build_before(text), after, args)
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
