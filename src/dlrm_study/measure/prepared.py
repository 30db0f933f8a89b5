"""What a measurement starts from (`Prepared`: a built run and its batches) and what its record says ran."""

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from dlrm_study.config import Config, Precision
from dlrm_study.data import Batch, make_data
from dlrm_study.model.tables import SparseArch, make_sparse_arch
from dlrm_study.records import columns as col
from dlrm_study.train.run import Run, build, native_bf16, precision_label


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

    def close(self) -> None:
        self.run.model.sparse_arch.close()


def prepare(cfg: Config, make_arch: Callable[..., SparseArch] = make_sparse_arch) -> Prepared:
    """Build the config's run (validated, fitted, initialised) and its synthetic or Criteo batches."""
    return Prepared(cfg, build(cfg, make_arch), make_data(cfg).batches())


def what_ran(cfg: Config, arch: SparseArch, device: torch.device) -> dict[str, object]:
    """A record's fields saying what ran: loop, sparse arch, placement, kernels, precision, device
    (of a training run: `what_ran(run.cfg, run.model.sparse_arch, run.device)`)."""
    return {
        col.LOOP: cfg.train.loop,
        col.SPARSE_ARCH: arch.name,
        col.PLACEMENT: arch.placement,
        col.KERNEL_PATH: arch.kernel_path,
        "optimizer": cfg.train.optimizer,
        col.PRECISION: cfg.train.precision,  # what ran: build() refuses rather than changes it
        col.NATIVE_BF16: native_bf16(device) if cfg.train.precision == Precision.BF16 else None,
        col.PRECISION_LABEL: precision_label(cfg.train.precision, device),  # `bf16 (emulated)` where no bf16
        col.DEVICE: device.type,
        col.THREADS: torch.get_num_threads(),
        col.BATCH_SIZE: cfg.train.batch_size,
    }
