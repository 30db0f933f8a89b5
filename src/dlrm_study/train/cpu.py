"""The trainer of the CPU loops (reference, optimized, torchrec): one step after another, a loss read each step."""

import math
from collections.abc import Callable, Iterable

from dlrm_study.data import Batch
from dlrm_study.data.loader import Prefetcher, device_feed
from dlrm_study.train.run import Run, place, train_step


def train(
    run: Run,
    batches: Iterable[Batch],
    steps: int,
    on_step: Callable[[Run, float], None] | None = None,
) -> list[float]:
    """Train until `run.step == steps`; returns the losses of the steps taken.

    With `train.prefetch` > 0 the next batches are made on a background thread (one
    intra-op thread) while the current step computes; on a GPU each batch is copied on a
    side stream while the previous one trains.
    """
    losses = []
    if run.cfg.train.prefetch:
        batches = Prefetcher(iter(batches), depth=run.cfg.train.prefetch)
    try:
        for batch in device_feed(batches, lambda b: place(run, b), run.device):
            if run.step >= steps:
                break
            loss = train_step(run, batch).item()
            if not math.isfinite(loss):
                raise RuntimeError(f"loss became {loss} at step {run.step}")
            losses.append(loss)
            if on_step:
                on_step(run, loss)
    finally:
        if isinstance(batches, Prefetcher):
            batches.close()
    run.losses += losses
    return losses
