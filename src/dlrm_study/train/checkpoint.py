"""Checkpoints that resume a run exactly: config, step, model, optimizer state.

Batches are a pure function of (seed, index), so the step number is all the data
state there is; plain SGD keeps no optimizer state, but whatever a sparse arch or the
dense optimizer keeps is saved too: the fused arch's tables, bf16 halves and Adagrad
accumulators are buffers in the model's state dict, Split-SGD's lower halves are its state.
"""

import os
from collections.abc import Callable
from pathlib import Path

import torch

from dlrm_study.config import Config
from dlrm_study.errors import UsageError
from dlrm_study.model.tables import SparseArch, make_sparse_arch
from dlrm_study.train.run import Run, build


def save(run: Run, path: Path) -> None:
    """Write the checkpoint atomically: a crash mid-write leaves the old one intact."""
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "config": run.cfg.to_dict(),
        "step": run.step,
        "losses": run.losses,
        "model": run.model.state_dict(),
        "dense_optimizer": run.dense_optimizer.state_dict(),
    }
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def load(path: Path, device: str | None = None, make_arch: Callable[..., SparseArch] = make_sparse_arch) -> Run:
    """Rebuild the run a checkpoint was saved from, at the step it was saved."""
    if not path.is_file():
        raise UsageError(f"checkpoint not found: {path}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        cfg = Config.from_dict(state["config"])
    except Exception as err:  # a truncated or foreign file: say which, not how torch failed
        raise UsageError(f"{path} is not a dlrm-study checkpoint ({type(err).__name__})") from None
    if device:
        cfg.train.device = device
    run = build(cfg, make_arch)
    try:
        run.model.load_state_dict(state["model"])
        run.dense_optimizer.load_state_dict(state["dense_optimizer"])
        run.step, run.losses = int(state["step"]), list(state["losses"])
    except (KeyError, ValueError, RuntimeError, TypeError) as err:  # parts missing or not of its own config
        raise UsageError(f"{path}: its state does not match its config ({type(err).__name__})") from None
    return run
