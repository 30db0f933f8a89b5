"""What a measurement starts from (`Prepared`: a built run and its batches) and what its record says ran.

Synthetic batches of the CPU loops come from a ring made before the timing (`data.ring`): made,
placed and, where the sparse arch reads staged batches (the fused CPU kernels), staged up front,
then reused in turn; Criteo batches are read as a stream; records say which (`input`).
"""

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import nn

from dlrm_study.config import Config, Loop, Precision
from dlrm_study.data import Batch, StagedBatch, make_data, ring, stage
from dlrm_study.data.batch import ids_capacity
from dlrm_study.model import fused_mlp
from dlrm_study.model.tables import SparseArch, make_sparse_arch
from dlrm_study.records import columns as col
from dlrm_study.train.gpu import takes_staged
from dlrm_study.train.run import Run, build, native_bf16, place, precision_label


@dataclass
class Prepared:
    """A built run and its batch stream: what repeats of one measurement share."""

    cfg: Config
    run: Run
    batches: Iterator[Batch]
    # The gpu loop's step (its static buffers and graph) and its ring of device batches, made by the
    # first measurement and reused by the repeats (measure.gpu.measure_training).
    gpu_step: object | None = None
    ring: list | None = None
    input: str = "stream"  # `ring`: the CPU loops' synthetic batches, made up front (`data.ring`)
    ring_batches: int | None = None

    def close(self) -> None:
        self.run.model.sparse_arch.close()


def prepare(cfg: Config, make_arch: Callable[..., SparseArch] = make_sparse_arch) -> Prepared:
    """Build the config's run (validated, fitted, initialised) and its batches: a ring of synthetic
    batches made now (`data.ring`), or the Criteo stream; the gpu loop makes its own ring on the device."""
    run, batches = build(cfg, make_arch), make_data(cfg).batches()
    if cfg.data.source != "synthetic" or cfg.train.loop == Loop.GPU:
        return Prepared(cfg, run, batches)
    count = ring.ring_batches(cfg)
    batches = ring.make_ring(batches, count, lambda batch: as_read(run, batch))
    return Prepared(cfg, run, batches, input="ring", ring_batches=count)


def as_read(run: Run, batch: Batch) -> Batch | StagedBatch:
    """The batch on the run's device, staged where its sparse arch reads staged batches (ids checked now)."""
    if takes_staged(run.model.sparse_arch):
        m, t = run.cfg.model, run.cfg.train
        staged = stage(batch, m.table_rows, ids_capacity(t.batch_size, m.table_rows, run.cfg.data.lookups_per_table))
        # The C++ kernels read int64 ids (staging packs them as int32 for the GPU's sort): cast once, here.
        batch = dataclasses.replace(staged, ids=staged.ids.long())
    return place(run, batch)


def what_ran(cfg: Config, arch: SparseArch, device: torch.device, model: nn.Module | None = None) -> dict[str, object]:
    """A record's fields saying what ran: loop, sparse arch, placement, kernels, precision, device
    (of a training run: `what_ran(run.cfg, run.model.sparse_arch, run.device, run.model)`; the model
    says what ran its MLP layers, `mlp_kernels`)."""
    mlp = {} if model is None else {"mlp_kernels": fused_mlp.kernels(model)}
    return {
        col.LOOP: cfg.train.loop,
        col.SPARSE_ARCH: arch.name,
        col.PLACEMENT: arch.placement,
        col.KERNEL_PATH: arch.kernel_path,
        **mlp,
        "optimizer": cfg.train.optimizer,
        col.PRECISION: cfg.train.precision,  # what ran: build() refuses rather than changes it
        col.NATIVE_BF16: native_bf16(device) if cfg.train.precision == Precision.BF16 else None,
        col.PRECISION_LABEL: precision_label(cfg.train.precision, device),  # `bf16 (emulated)` where no bf16
        col.DEVICE: device.type,
        col.THREADS: torch.get_num_threads(),
        col.BATCH_SIZE: cfg.train.batch_size,
    }
