"""The training loop: build a run from a config, step it, evaluate it.

One step is forward, loss, backward, update — the span facebookresearch/dlrm times as
ms/it. The dense parameters are trained by `torch.optim.SGD` (in bf16 runs by Split-SGD,
which keeps their fp32 masters); the sparse arch applies its own update (inside backward,
or in `update()`), which for the reference arch is the same `torch.optim.SGD` over sparse
gradients that dlrm uses.
"""

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch.autograd.profiler import record_function
from torch.nn import functional as F

from dlrm_study import platform
from dlrm_study.config import Config, Loop, Placement, Precision, check_fits, resolve_placement, validate
from dlrm_study.data import Batch, StagedBatch
from dlrm_study.errors import UsageError
from dlrm_study.model import fused_mlp
from dlrm_study.model.dlrm import DLRM
from dlrm_study.model.interaction import interaction_for
from dlrm_study.model.tables import SparseArch, make_sparse_arch
from dlrm_study.train.split_sgd import PlainBF16SGD, SplitSGD, drop_lower_halves


@dataclass
class Run:
    """Everything that changes while a config trains."""

    cfg: Config
    model: DLRM
    dense_optimizer: torch.optim.Optimizer
    device: torch.device
    autocast: bool = False  # gpu loop in bf16: the dense part under bf16 autocast
    step: int = 0
    losses: list[float] = field(default_factory=list)


def resolve_device(name: str) -> torch.device:
    """`auto` means cuda when a GPU is present; asking for an absent GPU is an error."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError("train.device is cuda but no CUDA GPU is available (use --device cpu)")
    return torch.device(name)


def build(cfg: Config, make_arch: Callable[..., SparseArch] = make_sparse_arch) -> Run:
    """Validate the config, check it fits, then initialise the model from `train.seed`.

    `make_arch(cfg, generator, device)` makes the sparse arch (remote tables pass their own).
    """
    validate(cfg)
    device = resolve_device(cfg.train.device)
    if cfg.train.placement == Placement.AUTO:
        cfg.train.placement = resolve_placement(cfg, device.type)
        print(f"dlrm-study: train.placement auto -> {cfg.train.placement}", file=sys.stderr)
    check_fits(cfg, device.type)
    if not cfg.train.split_sgd and not (cfg.train.loop == Loop.OPTIMIZED and cfg.train.precision == Precision.BF16):
        raise UsageError("train.split_sgd=false (plain bf16 SGD) needs train.loop=optimized and train.precision=bf16")
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    if cfg.train.precision == Precision.BF16 and not native_bf16(device):
        if device.type == "cuda":
            raise UsageError(f"train.precision bf16: {torch.cuda.get_device_name(device)} has no bf16; use fp32")
        # Run what was asked, and say so: a bf16 label on an fp32 run would be a false record.
        print(
            "dlrm-study: this CPU has no native bf16 (no avx512_bf16 or amx_bf16): bf16 runs emulated, "
            "and its records say precision_label='bf16 (emulated)', native_bf16=False",
            file=sys.stderr,
        )
    generator = torch.Generator().manual_seed(cfg.train.seed)
    sparse_arch = make_arch(cfg, generator, device)
    model = DLRM(cfg.model, sparse_arch, generator, interaction_for(cfg)).to_device(device)
    if cfg.train.loop == Loop.GPU:  # fp32 parameters; in bf16 the dense math runs under autocast
        optimizer = torch.optim.SGD(model.dense_parameters(), lr=cfg.train.learning_rate)
        return Run(cfg, model, optimizer, device, autocast=cfg.train.precision == Precision.BF16)
    if plain_bf16(cfg):  # the control: bf16 weights with no lower halves, dense and tables alike
        optimizer = PlainBF16SGD.from_fp32([model.bottom_mlp, model.top_mlp], cfg.train.learning_rate)
        drop_lower_halves(model.sparse_arch)
    elif cfg.train.precision == Precision.BF16:  # bf16 MLPs on oneDNN/AMX, fp32 masters kept by Split-SGD
        optimizer = SplitSGD.from_fp32([model.bottom_mlp, model.top_mlp], cfg.train.learning_rate)
    else:
        optimizer = torch.optim.SGD(model.dense_parameters(), lr=cfg.train.learning_rate)
    if fuses_mlp(cfg, device):  # oneDNN's matmuls, bias and ReLU inside them (`fused_mlp`)
        for mlp in (model.bottom_mlp, model.top_mlp):
            fused_mlp.fuse(mlp)
    return Run(cfg, model, optimizer, device)


def fuses_mlp(cfg: Config, device: torch.device) -> bool:
    """Whether the run's MLP layers are oneDNN matmuls: the optimized loop's fused dense path, switched with
    the fused interaction (`train.fused_interaction`), where oneDNN is there and bf16, if asked, is native."""
    t = cfg.train
    native = t.precision == Precision.FP32 or native_bf16(device)
    return (
        t.loop == Loop.OPTIMIZED and t.fused_interaction and device.type == "cpu" and native and fused_mlp.available()
    )


def native_bf16(device: torch.device) -> bool:
    """bf16 math in hardware: AVX512-BF16 or AMX-BF16 on the CPU, or a GPU with bf16."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return platform.native_bf16()


def plain_bf16(cfg: Config) -> bool:
    """Whether a run keeps bf16 weights with no lower halves (`train.split_sgd=false`): plain bf16 SGD."""
    return cfg.train.precision == Precision.BF16 and not cfg.train.split_sgd


def precision_label(precision: str, device: torch.device, split_sgd: bool = True) -> str:
    """What ran, as records and output name it: `bf16 (emulated)` where the hardware has no bf16, and
    `bf16 plain SGD (no lower halves)` for the control that drops Split-SGD's lower halves.

    The config keeps `train.precision=bf16` (its hash names the experiment, not the machine).
    """
    label = str(precision) if precision != Precision.BF16 or split_sgd else "bf16 plain SGD (no lower halves)"
    return f"{label} (emulated)" if precision == Precision.BF16 and not native_bf16(device) else label


def place(run: Run, batch: Batch | StagedBatch) -> Batch | StagedBatch:
    """The batch on the run's device, pinned and copied without blocking on a GPU; a batch of per-table
    bags has its ids where the sparse arch wants them."""
    if run.device.type == "cuda":
        batch = batch.pin_memory()
    if isinstance(batch, StagedBatch):  # read by a kernel arch, ids and all, on the run's device
        return batch.to(run.device, non_blocking=True)
    return batch.to(run.device, ids_device=run.model.sparse_arch.ids_device, non_blocking=True)


def train_step(run: Run, batch: Batch | StagedBatch) -> torch.Tensor:
    """Forward, loss, backward and update on one batch; returns the loss (detached)."""
    loss = step_math(run, batch)
    run.step += 1
    return loss


def step_math(run: Run, batch: Batch | StagedBatch) -> torch.Tensor:
    """The step's device work alone (no Python state changes): what a CUDA graph captures."""
    # No autocast weight cache: a captured step must recast each replay, and eager does the same.
    with torch.autocast(run.device.type, dtype=torch.bfloat16, enabled=run.autocast, cache_enabled=False):
        logits = run.model(batch)
    with record_function("dlrm:loss"):
        loss = F.binary_cross_entropy_with_logits(logits.float(), batch.labels)
    run.dense_optimizer.zero_grad(set_to_none=True)
    run.model.sparse_arch.clear_grad()
    loss.backward()
    with record_function("dlrm:optimizer_step"):
        run.dense_optimizer.step()
    with record_function("dlrm:embedding_update"):
        run.model.sparse_arch.update()
    return loss.detach()
