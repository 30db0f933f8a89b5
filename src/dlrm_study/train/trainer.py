"""`train`: a run trained by its device's trainer, the CPU loops' (`train.cpu`) or the gpu loop's (`train.gpu`)."""

from collections.abc import Callable, Iterable

from dlrm_study.config import Loop
from dlrm_study.data import Batch
from dlrm_study.train import cpu, gpu
from dlrm_study.train.run import Run


def train(
    run: Run, batches: Iterable[Batch], steps: int, on_step: Callable[[Run, float], None] | None = None
) -> list[float]:
    """Train until `run.step == steps`; returns the losses of the steps taken (`on_step` sees each)."""
    trainer = gpu.train if run.cfg.train.loop == Loop.GPU else cpu.train
    return trainer(run, batches, steps, on_step)
