"""The scaling study measured (`plans.scaling`: its points): 1 and 2 ranks under torchrun, one core per rank.

Every measurement is one `dlrm-study bench --distributed` process group, through `measure.runner`:
repeats, interleaved, resumable, one record each (machine key at one thread: one core per rank).
"""

from pathlib import Path

from dlrm_study.distributed.processes import launch_fields
from dlrm_study.measure import runner
from dlrm_study.plans.profiles import RANKS, RUNS
from dlrm_study.plans.scaling import plan, points, preset, ranks_variant
from dlrm_study.records import columns as col


def measure(profile: str, out: Path, progress: bool = True) -> runner.Counts:
    """Measure the points not yet recorded, each repeat in its own torchrun (read them with `analysis.scaling`)."""
    path, study, p = out / "scaling.csv", f"scaling-{profile}", RANKS[profile]
    overrides = {(label, ranks_variant(r)): o for label, by_ranks in points(profile) for r, o in by_ranks.items()}

    def measure_one(task: runner.Task) -> dict[str, object]:
        ranks = int(task.variant.split()[0])
        args = ["bench", "--distributed", "--config", preset(profile), "--steps", str(p.steps)]
        args += [
            "--warmup",
            str(p.warmup),
            *(item for o in overrides[task.point, task.variant] for item in ("--set", o)),
        ]
        return {**launch_fields(ranks, args), col.BUILDS: "every repeat (own processes)"}

    tasks = runner.schedule(plan(profile), p.repeats, runner.machine_of, threads=lambda _: 1, runs=RUNS[profile])
    return runner.run(tasks, measure_one, path, study, record_errors=False, progress=progress)
