"""Checkpoints that resume a run exactly: config, step, model, optimizer state.

Batches are a pure function of (seed, index), so the step number is all the data
state there is; plain SGD keeps no optimizer state, but whatever a sparse arch or the
dense optimizer keeps is saved too: the fused arch's tables, bf16 halves and Adagrad
accumulators are buffers in the model's state dict, Split-SGD's lower halves are its state.

The file carries its format (`FORMAT`): 2 since bf16 tables are one [hi | lo] matrix. A
checkpoint without one (format 1, two arrays) loads, its tables converted; a newer one is
refused in one line.
"""

import os
from collections.abc import Callable
from pathlib import Path

import torch

from dlrm_study.config import Config
from dlrm_study.embeddings import SparseArch, make_sparse_arch
from dlrm_study.errors import UsageError
from dlrm_study.train.loop import Run, build

FORMAT = 2


def save(run: Run, path: Path) -> None:
    """Write the checkpoint atomically: a crash mid-write leaves the old one intact."""
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "format": FORMAT,
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
    version = state.get("format", 1)  # format 1 wrote none
    if not isinstance(version, int) or not 1 <= version <= FORMAT:
        raise UsageError(f"{path}: checkpoint format {version!r}, this dlrm-study reads formats 1 to {FORMAT}")
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
