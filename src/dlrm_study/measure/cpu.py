"""The CPU loops' benchmark: one training step timed at a time, then a few profiled for the breakdown.

Timed span = one training step (forward, loss, backward, update), the span facebookresearch/dlrm
reports as ms/it; taking the next batch is timed beside it as input time (synthetic batches come from
a ring made before the timing, `data.ring`; Criteo batches are read as a stream). After the timed steps a few
more run under the profiler, whose `dlrm:*` scopes and autograd node names give the per-operator
breakdown (profiled steps are never part of the timing).
"""

import statistics
import time
from collections.abc import Iterator

import torch
from tqdm import tqdm

from dlrm_study.data import Batch
from dlrm_study.measure import settle
from dlrm_study.measure.prepared import Prepared, what_ran
from dlrm_study.measure.timing import elapsed_ms, peak_memory, quiet_stderr, reset_peak_memory, step_times, synchronize
from dlrm_study.model.tables.base import counters
from dlrm_study.records import columns as col
from dlrm_study.train.run import Run, place, train_step

BACKWARD = "autograd::engine::evaluate_function: "
# The autograd nodes of the sparse archs' backward (what tells embedding backward from dense backward):
# nn.EmbeddingBag's (reference), the fused archs' `FusedLookup` (update inside backward), fbgemm's TBE
# (`CppNode<SplitLookupFunction_{sgd,rowwise_adagrad}_Op_pt2>`, torchrec), remote tables' `RemoteLookup`,
# and the sharded arch's all-to-all.
EMBEDDING_BACKWARD = ("EmbeddingBag", "FusedLookup", "SplitLookupFunction", "RemoteLookup", "AllToAll")


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
    for event in prof.events():
        if event.cpu_parent is not None and event.cpu_parent.name != "dlrm:step":
            continue  # only the step's top-level operations, each counted once
        name = operator_of(event.name)
        if name:
            totals[name] += event.cpu_time_total / 1e3
    totals["other"] = max(0.0, wall * 1e3 - sum(totals.values()))
    return {name: ms / steps for name, ms in totals.items()}


def operator_of(event: str) -> str | None:
    """The `col.OPERATORS` column a top-level profiler event belongs to (None: not part of a step)."""
    if event.startswith("dlrm:"):
        name = event.removeprefix("dlrm:")
        if name == "embedding_update":
            return "embedding_backward_update"
        return name if name in col.OPERATORS else None
    if event.startswith(BACKWARD):
        return "embedding_backward_update" if any(node in event for node in EMBEDDING_BACKWARD) else "dense_backward"
    if event.startswith("Optimizer.zero_grad"):
        return "optimizer_step"
    return None


def measure_steps(
    prepared: Prepared, steps: int, warmup: int, profile_steps: int, progress: bool = True
) -> dict[str, object]:
    """One batch at a time: untimed steps until the step time settles (at least `warmup`, `settle.warm_up`),
    `steps` timed ones (the batch made and placed beside each, timed as input), then `profile_steps` under
    the profiler for the breakdown: a record's fields."""
    cfg, run, batches = prepared.cfg, prepared.run, prepared.batches
    reset_peak_memory(run.device)
    bar = tqdm(total=warmup + steps + profile_steps, desc=f"bench {cfg.name} {cfg.train.loop}", disable=not progress)
    arch = run.model.sparse_arch

    def one() -> tuple[float, float]:
        batch, input_time = timed_batch(batches, run)
        ms = timed_step(run, batch)
        bar.update()
        return ms, input_time * 1e3

    warmed = settle.warm_up(lambda: one()[0], warmup)
    counters(arch)  # counters (a cache's hits) from here on only
    step_ms, input_ms = map(list, zip(*(one() for _ in range(steps)), strict=True))
    counts = counters(arch)
    operators = breakdown(run, batches, profile_steps, bar)
    bar.close()
    return {
        **what_ran(cfg, run.model.sparse_arch, run.device, run.model),
        col.STEPS: steps,
        col.WARMUP: warmed,
        **step_times(step_ms, cfg.train.batch_size),
        col.INPUT_MS_MEDIAN: statistics.median(input_ms),
        "input": prepared.input,
        "ring_batches": prepared.ring_batches,
        **counts,
        **col.Breakdown(operators).fields(),
        **peak_memory(run.device),
    }
