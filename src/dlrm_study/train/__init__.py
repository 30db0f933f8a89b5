"""Training loops, evaluation and checkpoints."""

from dlrm_study.train.loop import Run, build, evaluate, resolve_device, train, train_step
from dlrm_study.train.metrics import auc

__all__ = ["Run", "auc", "build", "evaluate", "resolve_device", "train", "train_step"]
