"""Training: a run and its step (`run`), a trainer per device (`cpu`, `gpu`), Split-SGD, evaluation, checkpoints."""

from dlrm_study.train.evaluate import auc, evaluate
from dlrm_study.train.run import Run, build, resolve_device, train_step
from dlrm_study.train.trainer import train

__all__ = ["Run", "auc", "build", "evaluate", "resolve_device", "train", "train_step"]
