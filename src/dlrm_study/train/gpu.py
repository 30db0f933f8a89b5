"""The gpu loop's training step: static batch buffers, the step eager or captured as a CUDA graph.

Inside one step nothing reads from the device and nothing is copied to it: batches are
staged on the host (ids checked, stacked, padded to a fixed size: `data.stage`), copied to
the device ahead of the step, and copied device-to-device into the step's static buffers;
losses are kept on the device and read every `LOSS_READ_EVERY` steps.

Why `torch.cuda.CUDAGraph` and not `torch.compile(mode="reduce-overhead")`: the step runs
hand-written Triton kernels inside a custom autograd Function (`FusedLookup`) and an eager
optimizer; a CUDA graph records exactly the kernels the eager step launches, so the eager
step stays the reference (variant `gpu-eager`; captured == eager is a GPU test), with no
compiler whose graph breaks would split the capture, and nothing the GPU machine lacks.

Everything but `torch.cuda.graph` itself runs on the CPU too: the same buffers, the same
step function (`train_step`); the CPU tests count its host reads and copies.
"""

import math
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, runtime_checkable

import torch

from dlrm_study.config.memory import available_memory, ring_batches
from dlrm_study.data import Batch, StagedBatch, stage
from dlrm_study.data.batch import fixed_bag_size, ids_capacity
from dlrm_study.data.loader import Prefetcher, device_feed
from dlrm_study.errors import UsageError
from dlrm_study.model.tables.base import SparseArch
from dlrm_study.train.run import Run, place, step_math

LOSS_READ_EVERY = 50  # steps between reads of the losses (one host sync each)
EAGER_BEFORE_CAPTURE = 3  # eager steps on a side stream first: lazy inits (cuBLAS, Triton's JIT) stay out of the graph


def takes_staged(arch: SparseArch) -> bool:
    """Whether the arch reads staged batches (the kernel archs: hbm, uvm, cached)."""
    return type(arch).staged is not SparseArch.staged


@runtime_checkable
class Capturable(Protocol):
    """A sparse arch that knows whether its step can be captured as a CUDA graph: `capture_blocker`
    is "" where its shapes are fixed and nothing is read back to the host, else the reason."""

    capture_blocker: str


def not_captured(run: Run) -> str:
    """Why this run's step is not captured as a CUDA graph ('' where it is)."""
    arch = run.model.sparse_arch
    if run.device.type != "cuda":
        return "not a CUDA device"
    if not run.cfg.train.cuda_graph:
        return "train.cuda_graph is false (the gpu-eager variant)"
    if not takes_staged(arch):
        # host (and per-table mixes with it): the CPU kernels look up and update the rows, so the
        # pooled rows cross to the device and their gradient back inside every step, by design.
        return f"the {arch.placement} placement takes per-table bags on the host"
    if not isinstance(arch, Capturable):
        return f"the {arch.placement} placement has data-dependent shapes"
    return arch.capture_blocker


class GpuStep:
    """One training step of `run` over static batch buffers; captured as a CUDA graph where it can be.

    Call `stage` on the host (or on the prefetch thread), `place` to start the copy to the device,
    then the step object itself with the placed batch: it returns the step's loss, on the device.
    """

    def __init__(self, run: Run) -> None:
        self.run = run
        arch = run.model.sparse_arch
        self.staged = takes_staged(arch)
        self.reason = not_captured(run)  # '' where the step is captured (train.cuda_graph and a fixed-shape arch)
        self.capture = not self.reason
        m, d = run.cfg.model, run.cfg.data
        self.capacity = ids_capacity(run.cfg.train.batch_size, m.table_rows, d.lookups_per_table)
        self.static: StagedBatch | None = None
        self.graph: torch.cuda.CUDAGraph | None = None
        self.loss: torch.Tensor | None = None
        self.eager_steps = 0

    @property
    def kind(self) -> str:
        """What the step runs as: `graph` or `eager` (a record's `capture` field)."""
        return "graph" if self.capture else "eager"

    def stage(self, batch: Batch) -> Batch | StagedBatch:
        """The batch as the arch reads it; staged batches have their ids checked here, on the host."""
        if self.staged:
            m, d = self.run.cfg.model, self.run.cfg.data
            return stage(batch, m.table_rows, self.capacity, fixed_bag_size(d.pooling, d.lookups_per_table))
        return batch

    def place(self, batch: Batch | StagedBatch) -> Batch | StagedBatch:
        """The batch on the device (`train.run.place`: pinned and copied without blocking on a GPU)."""
        return place(self.run, batch)

    def __call__(self, batch: Batch | StagedBatch) -> torch.Tensor:
        """Train one step on a placed batch; the loss stays on the device."""
        if not isinstance(batch, StagedBatch):  # per-table bags (host): the eager step as it is
            return self.eager(batch)
        if self.static is None:
            self.static = batch.map(torch.empty_like)  # the step's buffers, allocated once
        self.static.copy_(batch)
        if not self.capture:
            return self.eager(self.static)
        if self.graph is None:
            if self.eager_steps < EAGER_BEFORE_CAPTURE:
                return self.eager_on_side_stream()
            self.graph = self.capture_graph()
        self.graph.replay()
        self.run.step += 1
        return self.loss

    def eager(self, batch: Batch | StagedBatch) -> torch.Tensor:
        loss = step_math(self.run, batch)
        self.run.step += 1
        self.eager_steps += 1
        return loss

    def eager_on_side_stream(self) -> torch.Tensor:
        """An ordinary step, on a side stream as the warm-up before a capture must run."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            loss = self.eager(self.static)
        torch.cuda.current_stream().wait_stream(side)
        return loss

    def capture_graph(self) -> torch.cuda.CUDAGraph:
        """Record the whole step on the static buffers (nothing runs until `replay`)."""
        graph = torch.cuda.CUDAGraph()
        # thread_local: the prefetch thread may allocate host memory while this thread captures.
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            self.loss = step_math(self.run, self.static)
        return graph


class LossLog:
    """Losses kept on the device, read every `every` steps (the only host sync of training)."""

    def __init__(self, every: int, on_read: Callable[[int, float], None]) -> None:
        self.every, self.on_read = every, on_read
        self.pending: list[tuple[int, torch.Tensor]] = []

    def add(self, step: int, loss: torch.Tensor) -> None:
        self.pending.append((step, loss.detach().clone()))  # a captured step reuses its loss buffer
        if len(self.pending) >= self.every:
            self.read()

    def read(self) -> None:
        if not self.pending:
            return
        values = torch.stack([loss for _, loss in self.pending]).tolist()
        steps = [step for step, _ in self.pending]
        self.pending = []
        for step, value in zip(steps, values, strict=True):
            if not math.isfinite(value):
                raise RuntimeError(f"loss became {value} at step {step}")
            self.on_read(step, value)


def train(
    run: Run, batches: Iterable[Batch], steps: int, on_step: Callable[[Run, float], None] | None = None
) -> list[float]:
    """The gpu loop's `train`: staged batches, the step captured where it can be, losses read in blocks.

    With `on_step` (progress, logging, checkpoints: each wants the run as it is after that step)
    losses are read every step; without it, every `LOSS_READ_EVERY` steps.
    """
    step = GpuStep(run)
    losses: list[float] = []

    def on_read(_step: int, value: float) -> None:
        losses.append(value)
        if on_step:
            on_step(run, value)

    log = LossLog(1 if on_step else LOSS_READ_EVERY, on_read)
    host: Iterator = map(step.stage, batches)
    if run.cfg.train.prefetch:  # staging (the id check included) on the background thread too
        host = Prefetcher(host, depth=run.cfg.train.prefetch)
    try:
        for batch in device_feed(host, step.place, run.device):
            if run.step >= steps:
                break
            log.add(run.step + 1, step(batch))
        log.read()
    finally:
        if isinstance(host, Prefetcher):
            host.close()
    run.losses += losses
    return losses


def ring_size(capacity: int) -> int:
    """Batches in a benchmark's ring: 2 to 8, fewer the larger they are (they are made on the host)."""
    return ring_batches(capacity)  # the memory estimate counts them too


def make_ring(step: GpuStep, batches: Iterator[Batch], count: int) -> list[Batch | StagedBatch]:
    """`count` batches staged and already on the device, for benchmarks: input is never timed.

    Checked against the device's free memory before the first is made.
    """
    first = step.stage(next(batches))
    size = sum(t.numel() * t.element_size() for t in first.tensors())
    device = step.run.device
    have = available_memory(device.type)
    if count * size > have // 2:
        raise UsageError(
            f"a ring of {count} batches needs {count * size / 2**30:.1f} GiB on {device.type}, "
            f"more than half of the {have / 2**30:.1f} GiB free (lower train.batch_size)"
        )
    ring = [step.place(first)] + [step.place(step.stage(next(batches))) for _ in range(count - 1)]
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return ring
