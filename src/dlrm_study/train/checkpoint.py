"""Checkpoints that resume a run exactly: config, step, model, optimizer state.

Batches are a pure function of (seed, index), so the step number is all the data
state there is; plain SGD keeps no optimizer state, but whatever a sparse arch or the
dense optimizer keeps is saved too: the fused arch's tables, bf16 halves and Adagrad
accumulators are buffers in the model's state dict, Split-SGD's lower halves are its state.

The file carries its format (`FORMAT`): 2 since bf16 tables are one [hi | lo] matrix. A
checkpoint without one (format 1, two arrays) loads, its tables converted; a newer one is
refused in one line.
"""

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import torch

from dlrm_study.config import Config
from dlrm_study.errors import Fault, UsageError
from dlrm_study.model.tables import SparseArch, make_sparse_arch
from dlrm_study.train.run import Run, build

FORMAT = 2


def save(run: Run, path: Path) -> None:
    """Write the checkpoint atomically: a crash or a write fault mid-write leaves the old one intact (a `Fault`
    names the fault), and an interrupted write leaves no temporary file behind."""
    state = {
        "format": FORMAT,
        "config": run.cfg.to_dict(),
        "step": run.step,
        "losses": run.losses,
        "model": run.model.state_dict(),
        "dense_optimizer": run.dense_optimizer.state_dict(),
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            write(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as err:
        kept = "the last one saved is as it was" if path.exists() else "none saved"
        raise Fault(f"cannot write the checkpoint {path}: {err.strerror or err}; {kept}") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
    clear_dead_writes(path)


def clear_dead_writes(path: Path) -> None:
    """Remove temporary files of `path` whose writer is gone: a writer killed with kill -9 cannot remove
    its own, so the next writer of the checkpoint does (a live writer's file is left alone)."""
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        pid = stale.name.removeprefix(f".{path.name}.").removesuffix(".tmp")
        if pid.isdigit() and not alive(int(pid)):
            with contextlib.suppress(OSError):
                stale.unlink()


def alive(pid: int) -> bool:
    """Whether process `pid` exists (one of another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Watched:
    """A file whose write errors are kept: torch.save reports a failed write as a RuntimeError without its cause."""

    def __init__(self, f: BinaryIO) -> None:
        self.f, self.error = f, None

    def write(self, data: bytes) -> int:
        try:
            return self.f.write(data)
        except OSError as err:
            self.error = err
            raise

    def flush(self) -> None:
        self.f.flush()


def write(state: dict, f: BinaryIO) -> None:
    """torch.save into `f`; a failed write raises the OSError that failed it (a full disk says so)."""
    watched = Watched(f)
    try:
        torch.save(state, watched)
    except RuntimeError:
        if watched.error is not None:
            raise watched.error from None
        raise


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
