"""The bound's update probe over three walks of a preset's steps: does the order of the rows matter?

`dlrm-study bound` times its update probe (`measure/probes.cpp`: a read-modify-write of every word of a row,
nothing else) over each step's unique rows, sorted and as first drawn, and keeps the faster. The fused update
walks neither: it applies every id, repeats included, in bag order. This times the probe over all three walks
at every prefetch distance and hint, at the given thread count, and prints each walk's fastest, so a kernel's
gap to the bound can be split into what its walk costs and what its work per id costs.

    python scripts/update_walks.py                       # dlrm-benchmark, 4 steps, torch's threads
    python scripts/update_walks.py --config tiny --steps 1 --threads 1

A diagnostic printed, not a record: run it on a quiet machine.
"""

import argparse
import sys

import torch

from dlrm_study.config import preset
from dlrm_study.data.batch import batched_ids, table_starts
from dlrm_study.data.synthetic import SyntheticData
from dlrm_study.errors import UsageError
from dlrm_study.measure import membench, physical
from dlrm_study.measure.timing import best_s
from dlrm_study.model.tables import hugepages

TRIES = 3  # timed calls per case after a warm-up one, the fastest kept


def walks(config: str, steps: int) -> tuple[dict[str, torch.Tensor], int, int]:
    """The three walks of the preset's first `steps` steps (stacked rows), its row bytes and total rows."""
    cfg = preset(config)
    found = {f"{order} unique rows": torch.cat(rows) for order, rows in physical.step_walks(cfg, steps).items()}
    data, rows = SyntheticData(cfg), list(cfg.model.table_rows)
    starts = table_starts(rows)
    batches = (data.batch(i) for i in range(steps))
    found["every id in bag order"] = torch.cat([batched_ids(b.indices, b.offsets, starts)[0] for b in batches])
    return found, 4 * cfg.model.embedding_dim, sum(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="dlrm-benchmark", help="a preset (default dlrm-benchmark)")
    parser.add_argument("--steps", type=int, default=physical.STEPS, help="steps of ids walked")
    parser.add_argument("--threads", type=int, default=0, help="threads (default: torch's)")
    args = parser.parse_args(argv)
    try:
        if args.steps < 1 or args.threads < 0:
            raise UsageError("--steps is at least 1 and --threads at least 0")
        found, stride, rows = walks(args.config, args.steps)
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    threads = args.threads or torch.get_num_threads()
    buffer = hugepages.empty(rows * stride // 4, dtype=torch.int32)
    buffer.fill_(membench.ONES)  # touched here, not in a timed call
    update = physical.load().lines_update
    said = f"{args.config}, {args.steps} step{'s' * (args.steps != 1)}, {threads} thread{'s' * (threads != 1)}"
    print(f"{said}: the update probe's fastest case per walk")
    for name, walk in found.items():
        calls = {(hint, ahead): lambda w=walk, h=h, a=ahead: update(buffer, w, stride, stride, a, h, threads)
                 for hint, h in physical.UPDATE_HINTS.items() for ahead in membench.DISTANCES}  # fmt: skip
        cases = {case: best_s(call, TRIES) for case, call in calls.items()}
        (hint, ahead), seconds = min(cases.items(), key=lambda kv: kv[1])
        lines = len(walk) * -(-stride // 64)
        print(f"  {name:22} {len(walk) / args.steps:>12,.0f} ids a step  {seconds / args.steps * 1e3:8.2f} ms a step  "
              f"{lines / seconds / 1e6:6.1f} M lines/s  ({hint}, {ahead} rows ahead)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
