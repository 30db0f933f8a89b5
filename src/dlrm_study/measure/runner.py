"""The one runner of timed studies: points x variants x repeats, interleaved, resumable.

Every timed study goes through `run`: `dlrm-study bench` and `compare`, sweeps, the studies
behind the notebooks, distributed bench and the GPU script. A study has `runs` runs (its profile's
RUNS, `plans.profiles`), and the points a claim's rule reads may have more (`claim_runs`, the
claim's design). A run is a process: `studies.runs` starts one process per run of each study, and
that process measures its slot alone (`context.one_run`) under its own `run_id`, so the runs a
verdict treats as clusters share no interpreter, allocator, page cache or kernel build. Outside
such a process (a test, `dlrm-study bench`) the slots run one after the other in this one, each
under its own run id (its records say which process measured them). Order within a run:
repeat-major across the whole comparison. Repeat r runs every point of the study (the knob
values a finding compares) and, within each point, its variants back to back; both orders rotate
between repeats (points p, q, s then q, s, p ...; variants ABC then BCA ...), and the order they
start from is drawn anew for every run, seeded by its run id (`arranged`; the variant's position is
the record's `order`), so no point or variant runs first in every run. Each variant warms up
untimed until its step time settles (`measure.settle`), so every timed repeat counts, repeat 0 too.
A ratio between two variants or between two knob values is a ratio of two measurements made
minutes apart at most, within one repeat of one run.

A measurement (the `measure` function a study passes) warms its run up and times its steps;
its fields become one record (`records.record.make_record`), appended at once, with the run's id. Built
runs are kept across repeats where all of the study's runs fit in memory together
(`KeptRuns`), so a repeat's spread is the machine's, not a rebuild's; otherwise each task
builds its own (records say which, `builds`); a run never reuses another run's builds. Started
again after a kill, `run` skips every task whose record is stored (`records.store.resume_key`: of
this code, `records.provenance.today_code`, and this run slot), so it loses at most the task it
was measuring and duplicates nothing; the resumed tasks carry the new run's id. Records of other code
are never reused: their tasks are measured again, and the old records stay where they are. Nor are the
records of a run that holds a record of one of its tasks made by other code or libraries beside today's
(one loop's code changed, the others' not): its slot is measured again whole, so the unchanged loops are
measured beside the changed one and every pair stays within one run (`pending`, `records.store.mixed_runs`).
"""

import dataclasses
import gc
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

import torch
from tqdm import tqdm  # a plain bar: no widget warning in notebooks

from dlrm_study import config, settings
from dlrm_study.config import Config, Loop
from dlrm_study.errors import Fault, UsageError
from dlrm_study.measure import context
from dlrm_study.plans.sweep import Planned
from dlrm_study.records import code_identity, provenance, selfcheck, store
from dlrm_study.records import columns as col
from dlrm_study.records.machine import machine_key
from dlrm_study.records.record import make_record


@dataclass(frozen=True)
class Task:
    """One measurement: a variant of a point, in one repeat of one run (its slot, 1..runs)."""

    point: str  # the point's label: its grid assignments, or its config's name
    variant: str
    repeat: int
    order: int  # the variant's position within its point's repeat (`arranged` sets it for the run)
    cfg: Config
    machine: str
    threads: int = 0
    slot: int = 1  # which of the study's runs
    versions: dict[str, str] = field(default_factory=provenance.versions, compare=False)
    code: str = field(default="", compare=False)  # its loop's code (`records.code_identity.today`)

    def __post_init__(self) -> None:
        if not self.code:
            object.__setattr__(self, "code", provenance.today_code(self.cfg.train.loop))

    @property
    def key(self) -> str:
        return store.resume_key(self.cfg.hash(), self.variant, self.machine, self.threads, self.repeat, self.versions,
                                self.code, self.slot)  # fmt: skip

    @property
    def pair(self) -> tuple[str, str, str, str]:
        """What a failure rules out in every repeat and run: this variant of this config on this machine and code."""
        return self.cfg.hash(), self.variant, self.machine, self.code


R = TypeVar("R")


Point = Planned  # a point: its label and its variants' configs, in the order of the first repeat
Measure = Callable[[Task], dict[str, object]]


def schedule(
    points: Sequence[Point],
    repeats: int,
    machine: Callable[[Config], str],
    threads: Callable[[Config], int] | None = None,
    runs: int = 1,
    claim_runs: int = 0,
    deciding: Callable[[str, str], bool] | None = None,
) -> list[Task]:
    """Every task of the study's runs (slots 1..runs), each repeat after repeat, each repeat running every
    point, every point its variants; points and variants rotated by the repeat (see the module docstring).
    Slots runs+1..claim_runs measure only what `deciding(point label, variant)` keeps: the points a claim's
    rule reads get the runs its design asks for, the rest of the study the runs its figures need. In a
    process started for one run (`context.one_run`), only that slot's tasks. `run` draws each run's own starting
    order (`arranged`)."""
    if repeats < 1:
        raise UsageError(f"repeats must be at least 1, got {repeats}")
    if runs < 1:
        raise UsageError(f"runs must be at least 1, got {runs}")
    threads = threads or threads_of
    only = context.current().slot
    tasks = []
    for slot in range(1, max(runs, claim_runs) + 1):
        if only is not None and slot != only:
            continue
        for repeat in range(repeats):
            for label, configs in rotated(list(points), repeat):
                wanted = [v for v in configs if slot <= runs or (deciding is not None and deciding(label, v))]
                for order, variant in enumerate(rotated(wanted, repeat)):
                    cfg = configs[variant]
                    tasks.append(Task(label, variant, repeat, order, cfg, machine(cfg), threads(cfg), slot))
    return tasks


def arranged(tasks: Sequence[Task], seed: str) -> list[Task]:
    """One run's tasks in that run's order: its points, and each point's variants, in an order drawn from
    `seed` (the run's id), then rotated by the repeat as `schedule` rotates them; `order` is the variant's
    position within its point's repeat. Two runs start from different variants (a first-use cost falls
    on a different one), and within a run every variant still takes every position in turn."""
    rng = random.Random(seed)
    points = list(dict.fromkeys(t.point for t in tasks))
    rng.shuffle(points)
    variants = {p: list(dict.fromkeys(t.variant for t in tasks if t.point == p)) for p in points}
    for p in points:
        rng.shuffle(variants[p])

    def place(task: Task) -> tuple[int, int, int]:
        within = variants[task.point]
        at = (within.index(task.variant) - task.repeat) % len(within)
        return task.repeat, (points.index(task.point) - task.repeat) % len(points), at

    return [dataclasses.replace(t, order=place(t)[2]) for t in sorted(tasks, key=place)]


def run_order(tasks: Sequence[Task]) -> list[tuple[str, list[Task]]]:
    """(run id, that run's tasks in its order) per run slot, slot after slot: a fresh run id each."""
    runs: list[tuple[str, list[Task]]] = []
    for slot in dict.fromkeys(t.slot for t in tasks):
        run_id = provenance.new_run_id()
        while any(run_id == other for other, _ in runs):  # two runs drawn within one second: never one id
            run_id = provenance.new_run_id()
        runs.append((run_id, arranged([t for t in tasks if t.slot == slot], run_id)))
    return runs


def rotated(items: list, by: int) -> list:
    """`items` started at position `by` (mod its length): ABC, BCA, CAB, ..."""
    shift = by % len(items) if items else 0
    return items[shift:] + items[:shift]


@dataclass
class Counts:
    tasks: int = 0
    skipped: int = 0
    ran: int = 0
    failed: int = 0
    left: int = 0  # not started: past the deadline or the limit
    runs: int = 1  # the runs (slots) the tasks belong to

    def __str__(self) -> str:
        measurements = f"{self.tasks} measurements" + (f" in {self.runs} runs" if self.runs > 1 else "")
        text = f"{measurements}: {self.skipped} already recorded, {self.ran} run ({self.failed} failed)"
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
    """Measure the tasks, one record each, appended to `out` as it is made: run slot after run slot, each
    under a fresh run id and in the order drawn from it (`run_order`, `arranged`).

    - `resume`: skip tasks whose record `out` holds (a failed variant counts as measured in
      every repeat unless `retry_errors`). `dlrm-study bench` measures anew every time.
    - `record_errors`: a task that fails (bad config, out of memory, unsupported here, a kernel that
      does not compile: any Exception) becomes a record with its `error`, and the rest go on;
      otherwise the error propagates. After a failure on a GPU that leaves its context unusable
      (`cuda_usable`), `DeviceLost` stops the run: every later task would fail the same way.
    - `limit` (a number of new tasks) and `deadline` (`time.monotonic()`) stop early; the rest
      resume next time. `emit=False`: measure, but write nothing (the other ranks of a
      distributed run). `on_record` sees each record (the CLI prints it).
    """
    counts = Counts(tasks=len(tasks), runs=len({t.slot for t in tasks}) or 1)
    failed_pairs = failed(out) if (resume and out and not retry_errors) else set()
    waiting = {t.key for t in pending(tasks, out, resume, retry_errors)}
    todo = [(run_id, t) for run_id, ordered in run_order(tasks) for t in ordered if t.key in waiting]
    counts.skipped = len(tasks) - len(todo)
    context.current().tally(reused=counts.skipped)
    bar = tqdm(todo, desc=study, unit="run", disable=not (progress and emit), leave=False)
    try:
        for i, (run_id, task) in enumerate(bar):
            if (limit is not None and i >= limit) or (deadline is not None and time.monotonic() > deadline):
                counts.left = len(todo) - i
                break
            if task.pair in failed_pairs:
                counts.failed += 1  # failed in an earlier repeat of this run: once is enough
                continue
            bar.set_postfix_str(f"run {task.slot} r{task.repeat} {task.point} {task.variant}"[:60])
            record = measured(task, measure, study, record_errors, run_id)
            if record.get(col.ERROR):
                failed_pairs.add(task.pair)
                counts.failed += 1
            counts.ran += 1
            context.current().tally(measured=1)
            if emit and out:
                store.append(out, record)
            if emit and on_record:
                on_record(record)
            if emit:
                say(progress_line(study, i + 1, len(todo), task, record))
            if record.get(col.ERROR) and device_lost(task.cfg):
                where = f"run {task.slot} r{task.repeat} {task.point}"
                raise DeviceLost(f"the CUDA context is unusable after {record[col.ERROR]} ({where})")
    finally:  # interrupted or failed too: the bar is gone before the line that says why
        bar.close()
    return counts


def say(line: str) -> None:
    """A measurement's line on the console where one is watching a render (`settings.PROGRESS_LINES` set:
    `make reproduce` sets it, since a notebook's bar does not reach its console)."""
    if settings.current().progress_lines:
        print(line, file=sys.stderr, flush=True)


def progress_line(study: str, done: int, total: int, task: Task, record: dict[str, object]) -> str:
    """`sweep 3/40: run 1, repeat 0, point, variant: 12,345 samples/s` (or its error)."""
    head = f"{study} {done}/{total}: run {task.slot}, repeat {task.repeat}, {task.point}, {task.variant}"
    if record.get(col.ERROR):
        return f"{head}: failed ({record[col.ERROR]})"
    rate = record.get(col.SAMPLES_PER_S)
    return f"{head}: {rate:,.0f} samples/s" if isinstance(rate, (int, float)) else f"{head}: recorded"


class DeviceLost(RuntimeError):
    """A point's failure left the CUDA context unusable (an illegal address, say): every later point would fail."""


def device_lost(cfg: Config) -> bool:
    """Whether the config ran on a GPU whose context no longer runs work."""
    return record_device(cfg) == "cuda" and not cuda_usable()


def cuda_usable() -> bool:
    """Whether the CUDA context still runs work: errors like an illegal address are sticky and end it."""
    try:
        torch.cuda.synchronize()
        return torch.ones(1, device="cuda").add_(1).item() == 2.0
    except Exception:  # any failure here means the context is gone
        return False


def pending(tasks: Sequence[Task], out: Path | None, resume: bool = True, retry_errors: bool = False) -> list[Task]:
    """The tasks `run` would measure: those `out` holds no record of (nor a failure of their variant). No record
    is counted of a run that also holds a record of one of these tasks made by other code or libraries
    (`store.mixed_runs`): after a change to one loop's code, a run's slot is measured again whole, so what pairs
    within it is measured side by side again, the unchanged loops beside the changed one."""
    today = {t.key for t in tasks}
    stored = store.stored_keys(out, with_errors=not retry_errors, today=today) if (resume and out) else set()
    failed_pairs = failed(out) if (resume and out and not retry_errors) else set()
    return [t for t in tasks if t.key not in stored and t.pair not in failed_pairs]


def measured(task: Task, measure: Measure, study: str, record_errors: bool, run_id: str = "") -> dict[str, object]:
    """The task's record: its measured fields and flags, or the error that stopped it."""
    cfg = Config.from_dict(task.cfg.to_dict())  # a measurement may adjust its copy (placement auto)
    labels = {col.VARIANT: task.variant, col.REPEAT: task.repeat, col.POINT: task.point, col.ORDER: task.order}
    try:
        fields = measure(dataclasses.replace(task, cfg=cfg))
    except Fault:  # the machine failed, not the measurement: not recorded as the variant's error
        raise
    except Exception as err:  # any failure of the point (Triton's compile and resource errors are no RuntimeError)
        if not record_errors:
            raise
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        error = f"{type(err).__name__}: {message}"
        fields = {col.LOOP: cfg.train.loop, col.PRECISION: cfg.train.precision, col.ERROR: error}
        return make_record(study, fields, task.cfg, record_device(cfg), task.machine, run_id or None, task.slot,
                           **labels)  # fmt: skip
    fields = {**fields, col.FLAGS: selfcheck.flags(fields), col.ERROR: ""}
    device = str(fields.get(col.DEVICE, "cpu"))
    return make_record(study, fields, task.cfg, device, task.machine, run_id or None, task.slot, **labels)


class KeptRuns(Generic[R]):
    """The built runs of a study, kept across its repeats where they all fit in memory together.

    `get(task)` returns the task's run (built on first use) and what the record says of it;
    `done(task)` releases it unless runs are kept. Whether they are is decided once, before
    the first task: when every run of the study (all points and variants) needs at most half
    of the memory free then (host memory, and GPU memory for runs on a GPU), by the configs'
    own estimates. Otherwise every task builds its run anew (repeat-major order visits every
    point in each repeat, so keeping only one point's runs would keep nothing).
    """

    def __init__(self, build: Callable[[Config], R], release: Callable[[R], None]) -> None:
        self.build, self.release = build, release
        self.keep: bool | None = None
        self.runs: dict[tuple[str, str], R] = {}
        self.slot: int | None = None  # the run (slot) the kept runs were built in

    def start(self, configs: Sequence[Config]) -> None:
        if self.keep is None:
            self.keep = fits_together(configs)

    def get(self, task: Task) -> tuple[R, dict[str, object]]:
        if task.slot != self.slot:  # a new run builds its own: runs are independent of each other
            self.clear()
            self.slot = task.slot
        key = (task.point, task.variant)
        if key not in self.runs:
            self.runs[key] = self.build(task.cfg)
        return self.runs[key], {col.BUILDS: "once per run" if self.keep else "every repeat"}

    def done(self, task: Task) -> None:
        key = (task.point, task.variant)
        if not self.keep and key in self.runs:
            self.release(self.runs.pop(key))

    def clear(self) -> None:
        for run in self.runs.values():
            self.release(run)
        self.runs.clear()
        gc.collect()


def with_kept_runs(
    points: Sequence[Point],
    build: Callable[[Config], R],
    release: Callable[[R], None],
    measure_run: Callable[[R, Task], dict[str, object]],
    configs: Sequence[Config] | None = None,
) -> tuple[Measure, KeptRuns[R]]:
    """A `measure` for `run` that keeps the study's runs across its repeats where they fit (`KeptRuns`).

    `configs`: the runs that will be built (default: every point's); a resumed study passes those
    of its pending tasks (`pending`), so runs already measured do not count against the memory.
    Clear the returned `KeptRuns` when the run is over: it may hold every run.
    """
    runs: KeptRuns[R] = KeptRuns(build, release)
    if configs is None:
        configs = [cfg for _, cfgs in points for cfg in cfgs.values()]

    def measure(task: Task) -> dict[str, object]:
        runs.start(configs)
        run, said = runs.get(task)
        try:
            return {**measure_run(run, task), **said}
        finally:
            runs.done(task)

    return measure, runs


def fits_together(configs: Sequence[Config]) -> bool:
    """Whether the configs' runs together need at most half the host (and GPU) memory free now."""
    host = device = 0
    for cfg in configs:
        on_gpu = cfg.train.loop == Loop.GPU and record_device(cfg) == "cuda"
        gpu_bytes, host_bytes = config.split_memory(cfg) if on_gpu else (0, config.estimate_memory(cfg).total)
        host, device = host + host_bytes, device + gpu_bytes
    if device and device > config.available_memory("cuda") / 2:
        return False
    return host <= config.available_memory("cpu") / 2


def failed(out: Path) -> set[tuple[str, str, str, str]]:
    """(config hash, variant, machine, code fingerprint) of the stored records that failed: not retried in
    other repeats or runs of the same code (a failure of other code rules out nothing now)."""
    rows = store.read_rows(Path(out))[1]
    return {
        (
            r.get(col.CONFIG_HASH, ""),
            r.get(col.VARIANT, ""),
            r.get(col.MACHINE, ""),
            code_identity.code_of_record(r.get(col.TRAIN_LOOP), r.get(col.CODE_FINGERPRINT)),
        )
        for r in rows
        if r.get(col.ERROR)
    }


def machine_of(cfg: Config) -> str:
    """The machine key a config is measured on here: this host's (`records.machine.machine_key`)."""
    return machine_key()


def threads_of(cfg: Config) -> int:
    """The threads a config runs with here: its own, else torch's."""
    return cfg.train.threads or torch.get_num_threads()


def record_device(cfg: Config) -> str:
    """The device a record's provenance describes: the GPU where the config asked for one and it exists."""
    wants_gpu = cfg.train.device.startswith("cuda") or cfg.train.device == "auto"
    return "cuda" if wants_gpu and torch.cuda.is_available() else "cpu"
