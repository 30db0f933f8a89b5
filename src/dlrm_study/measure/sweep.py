"""Sweeps measured: a sweep's points (`plans.sweep`) run through `measure.runner`.

The points and variants run through `measure.runner`: run after run, each repeat after repeat, the
variants of a point interleaved in a rotated order drawn per run, one record per measurement appended
at once. Run again, a sweep skips every measurement already recorded for the same config, variant,
machine, library versions, code fingerprint and run slot (`records.store.resume_key`), whichever sweep
made it: a point two sweeps share (a sensitivity study's base point) is measured once per run. After a
change to the timed code every measurement is made again (the old records are kept). A variant that fails at a
point (invalid, out of memory, unsupported here) is recorded with its error, and the sweep
goes on. On a CPU without native bf16 the CPU loops' bf16 variants are skipped, with a note.
"""

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from dlrm_study import config
from dlrm_study.errors import UsageError
from dlrm_study.measure import runner
from dlrm_study.measure.bench import measure_prepared
from dlrm_study.measure.prepared import Prepared, prepare
from dlrm_study.plans.sweep import Sweep, plan, skip_note


def tasks(sweep: Sweep) -> list[runner.Task]:
    return runner.schedule(plan(sweep)[0], sweep.repeats, runner.machine_of, runs=sweep.runs,
                           claim_runs=sweep.claim_runs, deciding=sweep.decides)  # fmt: skip


def run(
    sweep: Sweep,
    retry_errors: bool = False,
    progress: bool = True,
    limit: int | None = None,
    deadline: float | None = None,
) -> runner.Counts:
    """Measure what is not yet recorded; `limit` and `deadline` stop early (see `runner.run`)."""
    return run_together([sweep], sweep.name, retry_errors, progress, limit, deadline)


def run_together(
    sweeps: Sequence[Sweep],
    study: str,
    retry_errors: bool = False,
    progress: bool = True,
    limit: int | None = None,
    deadline: float | None = None,
    only: Callable[[str, config.Config], bool] | None = None,
) -> runner.Counts:
    """Several sweeps measured as one run named `study`: each (config, variant) once (`merged_plan`),
    all in one repeat-major schedule, so any two points of any of the sweeps pair within a repeat.

    A one-knob sweep's ends are its own values; the base point it compares them with is shared by
    every sweep. Run one sweep at a time, the base is measured in the first sweep's run only, and
    the other sweeps' values have nothing of their own run to pair with. `only(variant, config)`:
    measure just these of the sweeps' points (a GPU session's targets first), under their own labels.
    """
    protocols = {(s.repeats, s.runs, s.claim_runs, s.steps, s.warmup, s.profile_steps, s.out) for s in sweeps}
    if len(protocols) != 1:
        names = ", ".join(s.name for s in sweeps)
        raise UsageError(
            f"sweeps run together share repeats, runs, steps, warm-up, profiling and records file: {names} do not"
        )
    first = sweeps[0]
    points_, skipped = merged_plan(sweeps, only)
    if skipped:
        print(skip_note(skipped), file=sys.stderr)
    devices = {cfg.train.device for _, cfgs in points_ for cfg in cfgs.values()}
    if "cuda" in devices and not torch.cuda.is_available():
        raise UsageError(f"sweep {study} runs on cuda but no CUDA GPU is available (set train.device=cpu)")

    def measure_run(prepared: Prepared, task: runner.Task) -> dict[str, object]:
        return measure_prepared(prepared, first.steps, first.warmup, first.profile_steps, progress=False)

    schedule = runner.schedule(points_, first.repeats, runner.machine_of, runs=first.runs,
                               claim_runs=first.claim_runs,
                               deciding=lambda p, v: any(s.decides(p, v) for s in sweeps))  # fmt: skip
    todo = runner.pending(schedule, Path(first.out), retry_errors=retry_errors)
    configs = list({(t.point, t.variant): t.cfg for t in todo}.values())  # the runs to build: what is left
    measure, kept = runner.with_kept_runs(points_, prepare, release, measure_run, configs)
    try:
        return runner.run(schedule, measure, Path(first.out), study, retry_errors=retry_errors,
                          progress=progress, limit=limit, deadline=deadline)  # fmt: skip
    finally:
        kept.clear()


def merged_plan(
    sweeps: Sequence[Sweep], only: Callable[[str, config.Config], bool] | None = None
) -> tuple[list[runner.Point], list[str]]:
    """The sweeps' points as one plan (see `plan`): each (config, variant) once, in the first sweep
    that has it; a label another sweep already gave to other configs gets its sweep's name.
    `only(variant, config)`: keep just these."""
    merged: dict[str, dict[str, config.Config]] = {}
    seen: set[tuple[str, str]] = set()
    skipped: list[str] = []
    for spec in sweeps:
        points_, skips = plan(spec)
        skipped += [v for v in skips if v not in skipped]
        for label, cfgs in points_:
            new = {v: cfg for v, cfg in cfgs.items() if (cfg.hash(), v) not in seen and (only is None or only(v, cfg))}
            if not new:
                continue
            seen |= {(cfg.hash(), v) for v, cfg in new.items()}
            merged[f"{spec.name}: {label}" if label in merged else label] = new
    return list(merged.items()), skipped


def release(prepared: Prepared) -> None:
    prepared.close()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()  # the next run starts from an empty cache, as a fresh process would
