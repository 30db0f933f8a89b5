"""TODO docstring (dlrm_study.measure.cpu)."""

import time
from collections.abc import Iterator

import torch
from tqdm import tqdm

from dlrm_study.data import Batch
from dlrm_study.measure.timing import elapsed_ms, quiet_stderr, synchronize
from dlrm_study.records import columns as col
from dlrm_study.train.run import Run, place, train_step

BACKWARD = "autograd::engine::evaluate_function: "


def timed_batch(batches: Iterator[Batch], run: Run) -> tuple[Batch, float]:
    """The next batch on the run's device, and the seconds it took to make and move it."""
    start = time.perf_counter()
    batch = place(run, next(batches))
    synchronize(run.device)
    return batch, time.perf_counter() - start


def timed_step(run: Run, batch: Batch) -> float:
    """Milliseconds of one training step."""
    return elapsed_ms(lambda: train_step(run, batch), run.device)


def breakdown(run: Run, batches: Iterator[Batch], steps: int, bar: tqdm) -> dict[str, float]:
    """Mean ms per step of each operator in `col.OPERATORS`, from `steps` profiled steps (none: {})."""
    if steps <= 0:
        return {}  # no columns rather than zeros that would read as measured
    totals = dict.fromkeys(col.OPERATORS, 0.0)
    wall = 0.0
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    with quiet_stderr():  # the profiler's C++ side logs its start and stop there
        prof.start()
    try:
        for _ in range(steps):
            batch, _ = timed_batch(batches, run)
            start = time.perf_counter()
            with torch.profiler.record_function("dlrm:step"):
                train_step(run, batch)
            synchronize(run.device)
            wall += time.perf_counter() - start
            bar.update()
    finally:
        with quiet_stderr():
            prof.stop()
    backward_node = run.model.sparse_arch.backward_node
    for event in prof.events():
        if event.cpu_parent is not None and event.cpu_parent.name != "dlrm:step":
            continue  # only the step's top-level operations, each counted once
        name = operator_of(event.name, backward_node)
        if name:
            totals[name] += event.cpu_time_total / 1e3
    totals["other"] = max(0.0, wall * 1e3 - sum(totals.values()))
    return {name: ms / steps for name, ms in totals.items()}


def operator_of(event: str, backward_node: str) -> str | None:
    """The `col.OPERATORS` column a top-level profiler event belongs to (None: not part of a step)."""
    if event.startswith("dlrm:"):
        name = event.removeprefix("dlrm:")
        if name == "embedding_update":
            return "embedding_backward_update"
        return name if name in col.OPERATORS else None
    if event.startswith(BACKWARD):
        return "embedding_backward_update" if backward_node in event else "dense_backward"
    if event.startswith("Optimizer.zero_grad"):
        return "optimizer_step"
    return None
