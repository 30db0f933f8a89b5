"""The one runner of timed studies: points x variants x repeats, interleaved, resumable.

Every timed study goes through `run`: `dlrm-study bench` and `compare`, sweeps, the studies
behind the notebooks, distributed bench and the GPU script. Order (`schedule`) is
repeat-major: in repeat r every point runs each of its variants once, back to back, in an
order rotated by r (ABC, BCA, CAB, ...). A slow drift of a shared machine is then spread over
every point's repeats instead of landing on one point, no variant always runs first, and a
speedup is a ratio of two variants measured side by side within one repeat
(`stats.paired_ratios`).

A measurement (the `measure` function a study passes) builds its own run, warms it up and
times its steps; its fields become one record (`results.record`), appended at once. Started
again after a kill, `run` skips every task whose record is stored (`results.resume_key`),
so it loses at most the task it was measuring and duplicates nothing.
"""

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm import tqdm  # a plain bar: no widget warning in notebooks

from dlrm_study import results
from dlrm_study.config import Config
from dlrm_study.errors import UsageError
from dlrm_study.measure import stats


@dataclass(frozen=True)
class Task:
    """One measurement: a variant of a point, in one repeat."""

    point: str  # the point's label: its grid assignments, or its config's name
    variant: str
    repeat: int
    order: int  # the variant's position within its point's repeat
    cfg: Config
    machine: str
    versions: dict[str, str] = field(default_factory=results.versions, compare=False)

    @property
    def key(self) -> str:
        return results.resume_key(self.cfg.hash(), self.variant, self.machine, self.repeat, self.versions)

    @property
    def pair(self) -> tuple[str, str, str]:
        """What a failure rules out in every repeat: this variant of this config on this machine."""
        return self.cfg.hash(), self.variant, self.machine


# A point: its label and its variants' configs, in the order of the first repeat.
Point = tuple[str, dict[str, Config]]
Measure = Callable[[Task], dict[str, object]]


def schedule(points: Sequence[Point], repeats: int, machine: Callable[[Config], str]) -> list[Task]:
    """Every task in run order: repeat-major, each point's variants rotated by the repeat."""
    if repeats < 1:
        raise UsageError(f"repeats must be at least 1, got {repeats}")
    tasks = []
    for repeat in range(repeats):
        for label, configs in points:
            names = list(configs)
            shift = repeat % len(names) if names else 0
            for order, variant in enumerate(names[shift:] + names[:shift]):
                cfg = configs[variant]
                tasks.append(Task(label, variant, repeat, order, cfg, machine(cfg)))
    return tasks


@dataclass
class Counts:
    tasks: int = 0
    skipped: int = 0
    ran: int = 0
    failed: int = 0
    left: int = 0  # not started: past the deadline or the limit

    def __str__(self) -> str:
        text = f"{self.tasks} measurements: {self.skipped} already recorded, {self.ran} run ({self.failed} failed)"
        return text + (f", {self.left} left for a later run" if self.left else "")


def run(
    tasks: Sequence[Task],
    measure: Measure,
    out: Path | None,
    study: str,
    *,
    resume: bool = True,
    retry_errors: bool = False,
    record_errors: bool = True,
    progress: bool = True,
    limit: int | None = None,
    deadline: float | None = None,
    emit: bool = True,
    on_record: Callable[[dict[str, object]], None] | None = None,
) -> Counts:
    """Measure the tasks in order, one record each, appended to `out` as it is made.

    - `resume`: skip tasks whose record `out` holds (a failed variant counts as measured in
      every repeat unless `retry_errors`). `dlrm-study bench` measures anew every time.
    - `record_errors`: a task that fails (bad config, out of memory, unsupported here) becomes a
      record with its `error`, and the rest go on; otherwise the error propagates.
    - `limit` (a number of new tasks) and `deadline` (`time.monotonic()`) stop early; the rest
      resume next time. `emit=False`: measure, but write nothing (the other ranks of a
      distributed run). `on_record` sees each record (the CLI prints it).
    """
    counts = Counts(tasks=len(tasks))
    stored = results.stored_keys(out, with_errors=not retry_errors) if (resume and out) else set()
    failed_pairs = failed(out) if (resume and out and not retry_errors) else set()
    todo = [t for t in tasks if t.key not in stored and t.pair not in failed_pairs]
    counts.skipped = len(tasks) - len(todo)
    bar = tqdm(todo, desc=study, unit="run", disable=not (progress and emit), leave=False)
    for i, task in enumerate(bar):
        if (limit is not None and i >= limit) or (deadline is not None and time.monotonic() > deadline):
            counts.left = len(todo) - i
            break
        if task.pair in failed_pairs:
            counts.failed += 1  # failed in an earlier repeat of this run: once is enough
            continue
        bar.set_postfix_str(f"r{task.repeat} {task.point} {task.variant}"[:60])
        record = measured(task, measure, study, record_errors)
        if record.get("error"):
            failed_pairs.add(task.pair)
            counts.failed += 1
        counts.ran += 1
        if emit and out:
            results.append(out, record)
        if emit and on_record:
            on_record(record)
    bar.close()
    return counts


def measured(task: Task, measure: Measure, study: str, record_errors: bool) -> dict[str, object]:
    """The task's record: its measured fields and flags, or the error that stopped it."""
    cfg = Config.from_dict(task.cfg.to_dict())  # a measurement may adjust its copy (placement auto)
    labels = {"variant": task.variant, "repeat": task.repeat, "point": task.point, "order": task.order}
    try:
        fields = measure(Task(task.point, task.variant, task.repeat, task.order, cfg, task.machine, task.versions))
    except (UsageError, RuntimeError, MemoryError) as err:
        if not record_errors:
            raise
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        fields = {"loop": cfg.train.loop, "precision": cfg.train.precision, "error": f"{type(err).__name__}: {message}"}
        return results.record(study, fields, task.cfg, record_device(cfg), task.machine, **labels)
    fields = {**fields, "flags": stats.flags(fields), "error": ""}
    return results.record(study, fields, task.cfg, str(fields.get("device", "cpu")), task.machine, **labels)


def failed(out: Path) -> set[tuple[str, str, str]]:
    """(config hash, variant, machine) of the stored records that failed: not retried in other repeats."""
    rows = results.read_rows(Path(out))[1]
    return {(r.get("config_hash", ""), r.get("variant", ""), r.get("machine", "")) for r in rows if r.get("error")}


def machine_of(cfg: Config, threads: int | None = None) -> str:
    """The machine key a config is measured on here: its threads (or torch's), and the GPU it uses."""
    device = cfg.train.device
    gpu = ""
    if device.startswith("cuda") or (device == "auto" and torch.cuda.is_available()):
        gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "cuda-unavailable"
    return results.machine_key(threads or cfg.train.threads or torch.get_num_threads(), gpu)


def record_device(cfg: Config) -> str:
    """The device a record's provenance describes: the GPU where the config asked for one and it exists."""
    wants_gpu = cfg.train.device.startswith("cuda") or cfg.train.device == "auto"
    return "cuda" if wants_gpu and torch.cuda.is_available() else "cpu"
