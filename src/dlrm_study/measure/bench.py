"""The benchmark of one run: time training steps, break them down per operator.

Timed span = one training step (forward, loss, backward, update), the span
facebookresearch/dlrm reports as ms/it; taking the next batch is timed beside it as input
time. Synthetic batches come from a ring made before the timing (`data.ring`), Criteo
batches are read as a stream; records say which (`input`). After the timed steps a few
more run under the profiler, whose `dlrm:*` scopes and autograd node names give the
per-operator breakdown (profiled steps are never part of the timing). The gpu loop is
measured by `measure.gpu.measure_training` instead: blocks of many steps over batches
already on the device, one event pair per block.
"""

import contextlib
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from tqdm import tqdm  # a plain bar: no widget warning in notebooks

from dlrm_study import fused_mlp
from dlrm_study.config import Config
from dlrm_study.data import Batch, StagedBatch, make_data, ring, stage
from dlrm_study.data.batch import ids_capacity
from dlrm_study.embeddings import SparseArch, make_sparse_arch
from dlrm_study.measure import roofline
from dlrm_study.measure.operator_bounds import operator_bounds
from dlrm_study.records import columns as col
from dlrm_study.train.gpu_step import takes_staged
from dlrm_study.train.loop import Run, build, native_bf16, place, precision_label, train_step

BACKWARD = "autograd::engine::evaluate_function: "


@dataclass
class Prepared:
    """A built run and its batch stream: what repeats of one measurement share."""

    cfg: Config
    run: Run
    batches: Iterator[Batch]
    # The gpu loop's step (its static buffers and graph) and its ring of device batches, made by the
    # first measurement and reused by the repeats (measure.gpu.measure_training).
    gpu_step: object | None = None
    ring: list | None = None
    input: str = "stream"  # `ring`: the CPU loops' synthetic batches, made up front (`data.ring`)
    ring_batches: int | None = None

    def close(self) -> None:
        self.run.model.sparse_arch.close()


def prepare(cfg: Config, make_arch: Callable[..., SparseArch] = make_sparse_arch) -> Prepared:
    """Build the config's run (validated, fitted, initialised) and its batches: a ring of synthetic
    batches made now (`data.ring`), or the Criteo stream; the gpu loop makes its own ring on the device."""
    run, batches = build(cfg, make_arch), make_data(cfg).batches()
    if cfg.data.source != "synthetic" or cfg.train.loop == "gpu":
        return Prepared(cfg, run, batches)
    count = ring.ring_batches(cfg)
    batches = ring.make_ring(batches, count, lambda batch: as_read(run, batch))
    return Prepared(cfg, run, batches, input="ring", ring_batches=count)


def as_read(run: Run, batch: Batch) -> Batch | StagedBatch:
    """The batch on the run's device, staged where its sparse arch reads staged batches (ids checked now)."""
    if takes_staged(run.model.sparse_arch):
        m, t = run.cfg.model, run.cfg.train
        batch = stage(batch, m.table_rows, ids_capacity(t.batch_size, m.table_rows, run.cfg.data.lookups_per_table))
    return place(run, batch)


def bench(
    cfg: Config,
    steps: int,
    warmup: int = 3,
    profile_steps: int = 2,
    progress: bool = True,
    limits: dict[str, float] | None = None,
    make_arch: Callable[..., SparseArch] = make_sparse_arch,
) -> dict[str, object]:
    """Build the config's run and measure it once (`measure_prepared`): the measured fields."""
    prepared = prepare(cfg, make_arch)
    try:
        return measure_prepared(prepared, steps, warmup, profile_steps, progress, limits)
    finally:
        prepared.close()


def measure_prepared(
    prepared: Prepared,
    steps: int,
    warmup: int = 3,
    profile_steps: int = 2,
    progress: bool = True,
    limits: dict[str, float] | None = None,
) -> dict[str, object]:
    """Warm the run up, time `steps` training steps, profile a few more: the measured fields.

    The fields say what ran (loop, sparse arch, precision, whether bf16 was native) and how
    long it took; `results.record` (through `measure.runner`) turns them into a record. With
    the machine's measured `limits` (`roofline.measure_limits`) they carry the roofline bound
    and the achieved fraction of it. A run measured again (the next repeat) warms up again.
    """
    cfg, run, batches = prepared.cfg, prepared.run, prepared.batches
    if cfg.train.loop == "gpu":  # block timing over device-resident batches, the step captured
        from dlrm_study.measure import gpu  # it builds on this module

        fields = gpu.measure_training(prepared, steps, warmup, profile_steps)
        bound = roofline.bound_ms(cfg, limits) if limits else {}
        if bound:
            bound["roofline_fraction"] = bound[col.ROOFLINE_MS] / fields[col.MS_MEDIAN]
        return {**fields, **bound}
    reset_peak_memory(run.device)
    bar = tqdm(total=warmup + steps + profile_steps, desc=f"bench {cfg.name} {cfg.train.loop}", disable=not progress)
    step_ms, input_ms = [], []
    arch = run.model.sparse_arch
    for i in range(warmup + steps):
        if i == warmup:
            arch.stats()  # counters (a cache's hits) from here on only
        batch, input_time = timed_batch(batches, run)
        ms = timed_step(run, batch)
        if i >= warmup:
            step_ms.append(ms)
            input_ms.append(input_time * 1e3)
        bar.update()
    counters = arch.stats()
    operators = breakdown(run, batches, profile_steps, bar)
    bar.close()
    times = step_times(step_ms, cfg.train.batch_size)
    bound = roofline.bound_ms(cfg, limits) if limits else {}
    if bound:
        bound["roofline_fraction"] = bound[col.ROOFLINE_MS] / times[col.MS_MEDIAN]
        bound |= roofline.rates(cfg, limits) | operator_bounds(cfg, limits)
    return {
        **what_ran(run),
        col.STEPS: steps,
        col.WARMUP: warmup,
        **times,
        col.INPUT_MS_MEDIAN: statistics.median(input_ms),
        "input": prepared.input,
        "ring_batches": prepared.ring_batches,
        **counters,
        **col.Breakdown(operators).fields(),
        **peak_memory(run.device),
        **bound,
    }


def what_ran(run: Run) -> dict[str, object]:
    """A record's fields saying what ran: loop, sparse arch, placement, kernels, precision, device."""
    cfg, arch = run.cfg, run.model.sparse_arch
    return {
        col.LOOP: cfg.train.loop,
        col.SPARSE_ARCH: arch.name,
        col.PLACEMENT: arch.placement,
        col.KERNEL_PATH: arch.kernel_path,
        "mlp_kernels": fused_mlp.kernels(run.model),
        "optimizer": cfg.train.optimizer,
        col.PRECISION: cfg.train.precision,  # what ran: build() refuses rather than changes it
        col.NATIVE_BF16: native_bf16(run.device) if cfg.train.precision == "bf16" else None,
        col.PRECISION_LABEL: precision_label(cfg.train.precision, run.device),  # `bf16 (emulated)` where no bf16
        col.DEVICE: run.device.type,
        col.THREADS: torch.get_num_threads(),
        col.BATCH_SIZE: cfg.train.batch_size,
    }


def step_times(step_ms: list[float], batch_size: int) -> dict[str, float]:
    """A record's timing fields from its timed steps (`records.columns.Timing`)."""
    return col.Timing.of_steps(step_ms, batch_size).fields()


def timed_batch(batches: Iterator[Batch], run: Run) -> tuple[Batch, float]:
    """The next batch on the run's device, and the seconds it took to make and move it."""
    start = time.perf_counter()
    batch = place(run, next(batches))
    synchronize(run.device)
    return batch, time.perf_counter() - start


def timed_step(run: Run, batch: Batch) -> float:
    """Milliseconds of one training step."""
    return elapsed_ms(lambda: train_step(run, batch), run.device)


def elapsed_ms(fn: Callable[[], object], device: torch.device) -> float:
    """Milliseconds `fn()` takes: CUDA events on a GPU (never the launch alone), the wall clock on the CPU."""
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)
    start_s = time.perf_counter()
    fn()
    return (time.perf_counter() - start_s) * 1e3


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


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    """File descriptor 2 to /dev/null for the block (log lines written by C++ code, not Python's)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


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


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak_memory(device: torch.device) -> None:
    """Start the peak anew, so a record made in a long-lived process reports its own run."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:  # Linux: writing 5 resets the process's peak resident set (VmHWM)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass  # elsewhere the peak covers the whole process


def peak_memory(device: torch.device) -> dict[str, object]:
    """Peak GPU memory allocated, or the process's peak resident set on the CPU."""
    if device.type == "cuda":
        return {"peak_mem_bytes": torch.cuda.max_memory_allocated(device), "peak_mem_kind": "cuda_allocated"}
    return {"peak_mem_bytes": peak_rss(), "peak_mem_kind": "process_rss"}


def peak_rss() -> int:
    """Peak resident set since the last reset (VmHWM), else since the process started."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
