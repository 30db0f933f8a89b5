"""Side-by-side CPU comparison: reference, optimized fp32 / bf16 and torchrec, in one run (`dlrm-study compare`).

The presets are the points and the loops the variants of one `measure.runner` schedule: repeats,
variants interleaved and rotated within each, one record per measurement; `analysis.compare` reads
the paired speedups and their targets.
"""

import sys
from collections.abc import Sequence
from pathlib import Path

from dlrm_study import config
from dlrm_study.config.variants import CPU_LOOPS, REGISTRY
from dlrm_study.measure import limits as machine_limits
from dlrm_study.measure import runner
from dlrm_study.measure.bench import measure_prepared
from dlrm_study.measure.prepared import Prepared, prepare
from dlrm_study.perfmodel import roofline
from dlrm_study.plans.sweep import runnable, skip_note


def compare(
    presets: Sequence[str],
    variants: Sequence[str] = CPU_LOOPS,
    repeats: int = 3,
    steps: int = 10,
    warmup: int = 2,
    out: Path | None = None,
    progress: bool = True,
    limits: dict[str, float] | None = None,
    quick_limits: bool = False,
) -> list[dict[str, object]]:
    """Bench every variant of every preset in `repeats` interleaved repeats; return the records.

    The machine's limits are measured first (full mode, or quick) unless given. Not resumed: its ratios pair
    variants within one run, so a compare killed or interrupted leaves the whole records it made (its run's
    id marks them) and, run again, measures every cell anew in a run of its own.
    """
    kept, skipped = runnable(variants)
    if skipped:
        print(skip_note(skipped), file=sys.stderr)
    points = [(p, {v: config.load(p, [*REGISTRY[v], f"train.steps={steps}"]) for v in kept}) for p in presets]
    if limits is None:
        needs = roofline.needs(*[cfg for _, cfgs in points for cfg in cfgs.values()])
        limits = machine_limits.measure_limits(**needs, quick=quick_limits)

    def measure_run(prepared: Prepared, task: runner.Task) -> dict[str, object]:
        return measure_prepared(prepared, steps, warmup, profile_steps=0, progress=False, limits=limits)

    measure, kept = runner.with_kept_runs(points, prepare, Prepared.close, measure_run)
    records: list[dict[str, object]] = []
    tasks = runner.schedule(points, repeats, runner.machine_of)
    try:
        runner.run(tasks, measure, out, "cpu-compare", resume=False, record_errors=False, progress=progress,
                   on_record=records.append)  # fmt: skip
    finally:
        kept.clear()
    return records
