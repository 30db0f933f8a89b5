"""`dlrm-study train`'s run: train to a number of steps, checkpoint, evaluate, and record the result.

Unlike a benchmark, the time of a training run includes making its batches (the rate a user
of `train` gets); its record carries what ran, the last losses, the held-out metrics and the
samples per second, data included.
"""

import itertools
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm  # a plain bar: no widget warning in notebooks

from dlrm_study.data import make_data
from dlrm_study.measure.prepared import what_ran
from dlrm_study.records import columns as col
from dlrm_study.records import store
from dlrm_study.records.record import make_record
from dlrm_study.train import checkpoint as ckpt
from dlrm_study.train import evaluate, train
from dlrm_study.train.run import Run

LOSS_TAIL = 20  # the record's final loss: the mean of the last steps' losses


def train_and_record(
    run: Run,
    out: Path | None,
    checkpoint: Path | None = None,
    checkpoint_every: int = 0,
    log_every: int = 50,
    progress: bool = True,
) -> dict[str, object]:
    """Train `run` up to its config's `train.steps`, saving `checkpoint` every `checkpoint_every` steps and
    at the end, then evaluate on held-out batches; append the record to `out` (None: keep it) and return it."""
    cfg = run.cfg
    data = make_data(cfg)
    bar = tqdm(total=cfg.train.steps, initial=run.step, desc=f"train {cfg.name}", disable=not progress)
    on_step = step_logger(bar, cfg.train.steps, log_every, checkpoint, checkpoint_every)
    start, first_step = time.perf_counter(), run.step
    losses = train(run, data.batches(start=run.step), cfg.train.steps, on_step)
    seconds = time.perf_counter() - start
    bar.close()
    if getattr(data, "bad_lines", 0):
        print(f"skipped {data.bad_lines} malformed line(s) of {cfg.data.path}", file=sys.stderr)
    if checkpoint:
        ckpt.save(run, checkpoint)
    metrics = evaluate(run, itertools.islice(make_data(cfg, "eval").batches(), cfg.train.eval_batches))
    rate = col.samples_per_s((run.step - first_step) * cfg.train.batch_size, seconds)
    print(
        f"validation AUC {metrics['auc']:.4f}  logloss {metrics['logloss']:.4f}  "
        f"accuracy {metrics['accuracy']:.4f}  ({cfg.train.eval_batches} batches of {cfg.train.batch_size})"
    )
    print(f"trained {run.step} steps, {rate:,.0f} samples/s (data included)")
    tail = losses[-min(len(losses), LOSS_TAIL) :] or [float("nan")]
    fields = {
        **what_ran(cfg, run.model.sparse_arch, run.device),
        col.STEPS: run.step,
        col.FINAL_LOSS: sum(tail) / len(tail),
        **{f"eval_{key}": value for key, value in metrics.items()},
        col.SAMPLES_PER_S: rate,
    }
    record = make_record("train", fields, cfg, run.device)
    if out:
        store.append(out, record)
        print(f"record appended to {out}")
    return record


def step_logger(
    bar: tqdm, steps: int, log_every: int, checkpoint: Path | None, checkpoint_every: int
) -> Callable[[Run, float], None]:
    """What happens after each step: the bar moves, every `log_every` steps the loss is printed, and every
    `checkpoint_every` steps the run is saved."""

    def on_step(run: Run, loss: float) -> None:
        bar.update()
        if run.step % log_every == 0 or run.step == steps:
            bar.write(f"step {run.step}/{steps}  loss {loss:.4f}")
        if checkpoint and checkpoint_every and run.step % checkpoint_every == 0:
            ckpt.save(run, checkpoint)

    return on_step
