"""GPU performance model: one training step's work, as the CPU roofline counts it, on a described GPU.

A step costs the larger (perfect overlap) or the sum (none) of two times:

- GPU time: embedding bytes at the placement's bandwidth (HBM, or the host link) plus GEMM
  FLOPs at the tensor-core rate, divided by an efficiency `e` (the share of those peaks a
  real step reaches), plus one kernel floor per kernel;
- host time: the PyTorch ops one step dispatches (counted on the CPU, `count_ops`) times the
  host cost of one op.

The efficiency comes from a published measurement (`PUBLISHED`, checked by `published_check`):
NVIDIA's DLRM on one A100-80GB reaches `e` of its bound, and no plainer implementation should
do better; the low end allows this study's eager PyTorch + Triton step a factor `SLACK` less.
A predicted range runs from the optimistic corner (highest `e`, cheapest op, overlap) to the
pessimistic one (lowest `e`, dearest op, no overlap).

Work per step (the `gpu` loop: fp32 tables, bf16 autocast for the dense part):
- embedding: each looked-up id reads its fp32 row (forward) and reads and writes it (fused
  backward + update); row-wise Adagrad adds its 4-byte state read and written;
- MLPs and the interaction's bmm: 6 FLOPs per multiply-accumulate per sample (forward, and
  two backward GEMMs), at the bf16 tensor rate for bf16, the plain fp32 rate for fp32 (torch
  leaves TF32 off for matmuls by default);
- placements: `hbm` moves the embedding bytes over HBM; `uvm` over the host link; `host` does
  them on the host CPU (`host_gbps`) and sends pooled vectors and their gradients over the
  link; `cached` moves the hits over HBM and, per miss, one row in and one victim out (with
  its Adagrad state) over the link; it waits for the host once a step (no overlap then).

Left out, so inside `e`: activations' elementwise traffic, the loss, the dense optimizer,
the index and pooled-output traffic.
"""

import dataclasses
import functools
import json
import os

import pandas as pd

from dlrm_study import config
from dlrm_study.config import Config, Placement, Precision
from dlrm_study.data import make_data
from dlrm_study.perfmodel.roofline import iteration_work
from dlrm_study.train import run as loop

SLACK = 3.0  # the low end: this study's step may reach a third of the published efficiency
HOST_OP_US = (5.0, 15.0)  # host time to dispatch one eager PyTorch op with autograd (CUDA launch included)
HOST_GBPS_SPREAD = 2.0  # the host's random-row bandwidth is assumed, not specified: x / this to x * this
SYNCED = ("cached",)  # placements whose step waits for the device
KERNEL_FLOOR_US = 2.0  # GPU time of the smallest kernel, launch to launch, when queued


@dataclasses.dataclass(frozen=True)
class Device:
    """A GPU as the model sees it: peak rates from its public specification."""

    name: str
    hbm_gbps: float  # device memory bandwidth
    bf16_tflops: float  # dense bf16/fp16 tensor-core rate (without structured sparsity)
    tf32_tflops: float  # dense TF32 tensor-core rate
    fp32_tflops: float  # plain fp32 (CUDA cores)
    link_gbps: float  # host <-> device, each direction
    host_gbps: float  # random-row bandwidth of the host's memory for `host` (assumed; +-HOST_GBPS_SPREAD)
    source: str

    def with_measured(self, copy_gbps: float | None = None, h2d_gbps: float | None = None) -> "Device":
        """The description with the GPU script's measured copy bandwidths in place of the specification's."""
        return dataclasses.replace(
            self,
            hbm_gbps=copy_gbps or self.hbm_gbps,
            link_gbps=h2d_gbps or self.link_gbps,
            name=self.name + (" (measured bandwidths)" if copy_gbps or h2d_gbps else ""),
        )


DEVICES = {
    # NVIDIA H200 Tensor Core GPU datasheet (SXM): 141 GB HBM3e at 4.8 TB/s; BF16 1,979 and TF32
    # 989 TFLOPS *with sparsity* (halved here), FP32 67 TFLOPS; PCIe Gen5 x16, 128 GB/s both ways.
    # https://www.nvidia.com/en-us/data-center/h200/
    "h200": Device("NVIDIA H200 SXM", 4800.0, 989.0, 494.5, 67.0, 64.0, 20.0, "nvidia.com/en-us/data-center/h200"),
    # NVIDIA H100 Tensor Core GPU datasheet (SXM): 80 GB HBM3 at 3.35 TB/s; the H200's compute (BF16 1,979 and
    # TF32 989 TFLOPS with sparsity, halved here; FP32 67 TFLOPS) and its PCIe Gen5 x16.
    # https://www.nvidia.com/en-us/data-center/h100/
    "h100": Device("NVIDIA H100 SXM", 3350.0, 989.0, 494.5, 67.0, 64.0, 20.0, "nvidia.com/en-us/data-center/h100"),
    # NVIDIA A100 datasheet (80GB SXM): HBM2e 2,039 GB/s; BF16 312, TF32 156 (dense), FP32 19.5
    # TFLOPS; PCIe Gen4 x16, 64 GB/s both ways.
    # https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf
    "a100-80gb": Device(
        "NVIDIA A100-SXM4-80GB", 2039.0, 312.0, 156.0, 19.5, 32.0, 20.0, "nvidia.com A100 datasheet (80GB SXM)"
    ),
}


def device_of(machine: object) -> str:
    """The `perfmodel.gpu.DEVICES` key of the GPU a machine key names: "" for none (a dry run on the CPU), the
    GPU's own name where the model lacks it."""
    parts = str(machine).split("/")
    gpu = parts[3] if len(parts) == 4 else ""
    return next((key for key in DEVICES if gpu.startswith(f"nvidia-{key}")), gpu)


@dataclasses.dataclass(frozen=True)
class Published:
    """A published single-GPU DLRM training throughput and the configuration behind it."""

    source: str
    device: str
    math: str  # "bf16" (AMP: fp16 tensor cores, same peak) or "tf32"
    samples_per_s: float
    overrides: tuple[str, ...]


# NVIDIA DeepLearningExamples, PyTorch/Recommendation/DLRM/README.md, "Training performance:
# NVIDIA DGX A100 (8x A100 80GB)", 1 GPU, "small" model, batch 64k per GPU, `--amp --cuda_graphs`:
# 4,020,000 records/s mixed precision, 2,880,000 TF32, averaged over an epoch. The model: Criteo
# 1TB, 26 one-hot categorical features, dim 128, bottom 512-256-128, top 1024-1024-512-256-1,
# SGD, the tables in HBM (the "small" model, about 15 GB, fits one GPU). It is mlperf-scaled's
# shape at batch 65,536 (the row counts do not enter the bound).
_DLE = "NVIDIA DeepLearningExamples PyTorch/Recommendation/DLRM README (DGX A100 80GB, 1 GPU, small, 64k)"
PUBLISHED = (
    Published(_DLE, "a100-80gb", "bf16", 4_020_000.0, ("train.batch_size=65536",)),
    Published(_DLE, "a100-80gb", "tf32", 2_880_000.0, ("train.batch_size=65536",)),
)


def gpu_work(cfg: Config) -> dict[str, float]:
    """Embedding bytes and FLOPs of one step of the `gpu` loop (fp32 tables), and pooled bytes."""
    work = iteration_work(cfg)
    m, batch = cfg.model, cfg.train.batch_size
    ids, dim = work["ids_per_iteration"], m.embedding_dim
    state = 8.0 if cfg.train.optimizer == "rowwise_adagrad" else 0.0  # 4-byte state read and written
    return {
        "ids": ids,
        "embedding_bytes": ids * (dim * 4 + dim * 8 + state),
        "row_bytes": dim * 4 + state / 2,
        "pooled_bytes": batch * m.num_tables * dim * 4,
        "flops": work["mlp_flops"] + work["interaction_flops"],
    }


def gemm_tflops(device: Device, math_: str) -> float:
    return {"bf16": device.bf16_tflops, "tf32": device.tf32_tflops, "fp32": device.fp32_tflops}[math_]


def bound_ms(
    cfg: Config, device: Device, placement: str = "hbm", hit_rate: float = 1.0, math_: str | None = None
) -> dict[str, float]:
    """Lower bound on one step's GPU and host-link time (ms), by term, at the device's peaks."""
    w = gpu_work(cfg)
    math_ = math_ or ("bf16" if cfg.train.precision == Precision.BF16 else "fp32")
    dense = w["flops"] / gemm_tflops(device, math_) / 1e9
    hbm, link, host = w["embedding_bytes"] / device.hbm_gbps / 1e6, 0.0, 0.0
    if placement == Placement.UVM:
        hbm, link = 0.0, w["embedding_bytes"] / device.link_gbps / 1e6
    elif placement == Placement.HOST:
        hbm, host = 0.0, w["embedding_bytes"] / device.host_gbps / 1e6
        link = 2 * w["pooled_bytes"] / device.link_gbps / 1e6  # pooled vectors down, their gradients up
    elif placement == Placement.CACHED:
        misses = w["ids"] * (1.0 - hit_rate)
        link = 2 * misses * w["row_bytes"] / device.link_gbps / 1e6  # the missed row in, a victim out
    elif placement != Placement.HBM:
        raise ValueError(f"no GPU model for placement {placement!r} (hbm, uvm, host, cached)")
    return {"dense_ms": dense, "hbm_ms": hbm, "link_ms": link, "host_embedding_ms": host}


def step_range_ms(
    cfg: Config,
    device: Device,
    efficiency: tuple[float, float],
    placement: str = "hbm",
    hit_rate: float = 1.0,
    ops: float | None = None,
    host_ops: float | None = None,
) -> tuple[float, float]:
    """(fastest, slowest) predicted ms per step: the optimistic and pessimistic corners.

    `ops`: kernels a step runs (the kernel floor); `host_ops`: ops the host dispatches per step
    (default `ops`; a captured step dispatches one graph replay, whatever its kernels).
    """
    terms = bound_ms(cfg, device, placement, hit_rate)
    ops = count_ops(cfg, placement) if ops is None else ops
    host_ops = ops if host_ops is None else host_ops
    gpu_work_ms = terms["dense_ms"] + terms["hbm_ms"] + terms["link_ms"]
    floor_ms = ops * KERNEL_FLOOR_US / 1e3
    host_ms = [
        host_ops * us / 1e3 + terms["host_embedding_ms"] * spread
        for us, spread in zip(HOST_OP_US, (1 / HOST_GBPS_SPREAD, HOST_GBPS_SPREAD), strict=True)
    ]
    e_low, e_high = efficiency
    fast_gpu, slow_gpu = gpu_work_ms / e_high + floor_ms, gpu_work_ms / e_low + floor_ms
    # `cached` waits for the device once a step (the size of its unique ids): no overlap there.
    fast = fast_gpu + host_ms[0] if placement in SYNCED else max(fast_gpu, host_ms[0])
    slow = slow_gpu + host_ms[1]  # no overlap: every step waits for its dispatch
    return fast, slow


def published_table() -> pd.DataFrame:
    """`published_check` as a table (notebook 03): each published rate beside this model's bound and efficiency."""
    columns = ["device", "math", "batch", "published_samples_per_s", "bound_samples_per_s", "dense_ms", "embedding_ms",
               "efficiency"]  # fmt: skip
    return pd.DataFrame(published_check())[columns]


def published_check(device_name: str | None = None) -> list[dict[str, object]]:
    """Each published throughput against this model's bound for it: the efficiency e = bound / measured."""
    rows = []
    for pub in PUBLISHED:
        if device_name and pub.device != device_name:
            continue
        cfg = config.load("mlperf-scaled", list(pub.overrides))
        device = DEVICES[pub.device]
        terms = bound_ms(cfg, device, "hbm", math_=pub.math)
        bound = terms["dense_ms"] + terms["hbm_ms"]
        measured_ms = cfg.train.batch_size / pub.samples_per_s * 1e3
        rows.append(
            {
                "source": pub.source,
                "device": device.name,
                "math": pub.math,
                "batch": cfg.train.batch_size,
                "published_samples_per_s": pub.samples_per_s,
                "bound_samples_per_s": cfg.train.batch_size / bound * 1e3,
                "bound_ms": bound,
                "dense_ms": terms["dense_ms"],
                "embedding_ms": terms["hbm_ms"],
                "published_ms": measured_ms,
                "efficiency": bound / measured_ms,
            }
        )
    return rows


def efficiency_range() -> tuple[float, float]:
    """(low, high) share of the bound a step reaches: the published efficiencies, the low one / SLACK."""
    values = [row["efficiency"] for row in published_check()]
    return min(values) / SLACK, max(values)


# aten ops that make the host wait for the device: a value read back, or an output whose size is
# the data's (the host must learn it before it can allocate).
READS_BACK = {
    "aten::_local_scalar_dense", "aten::item", "aten::nonzero", "aten::_unique", "aten::_unique2",
    "aten::unique_dim", "aten::unique_consecutive", "aten::masked_select", "aten::equal",
    "aten::is_nonzero", "aten::allclose", "aten::bincount", "aten::histc",
}  # fmt: skip
# aten ops that bring host data to the device: a tensor made from Python values, a pinned copy.
COPIES_IN = {"aten::lift_fresh", "aten::lift_fresh_copy", "aten::_pin_memory", "aten::pin_memory"}


def host_traffic(fn) -> dict[str, list[str]]:
    """The device-to-host reads and host-to-device copies `fn()` makes, by aten op (what a CUDA graph
    cannot hold and what stalls an eager GPU step), counted on whatever device `fn` runs on.

    A read: an op in READS_BACK, `repeat_interleave` without its output size, indexing by a boolean
    mask, or `Tensor.tolist` (which reads a CPU tensor without an aten op). A copy in: an op in
    COPIES_IN, or a copy between two devices.
    """
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    found: dict[str, list[str]] = {"reads_back": [], "copies_in": []}

    def devices(tree) -> set[str]:
        return {str(t.device) for t in torch.utils._pytree.tree_leaves(tree) if isinstance(t, torch.Tensor)}

    class Traffic(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = func._schema.name
            out = func(*args, **kwargs)
            tensors = [a for a in torch.utils._pytree.tree_leaves(args) if isinstance(a, torch.Tensor)]
            if (
                name in READS_BACK
                or (name == "aten::repeat_interleave" and kwargs.get("output_size") is None and len(args) < 3)
                or (name.startswith("aten::index") and any(t.dtype == torch.bool for t in tensors[1:]))
            ):
                found["reads_back"].append(name)
            if name in COPIES_IN or (name in ("aten::_to_copy", "aten::copy_") and len(devices((args, out))) > 1):
                found["copies_in"].append(name)
            return out

    tolist = torch.Tensor.tolist

    def counted_tolist(self):
        found["reads_back"].append("Tensor.tolist")
        return tolist(self)

    torch.Tensor.tolist = counted_tolist
    try:
        with Traffic():
            fn()
    finally:
        torch.Tensor.tolist = tolist
    return found


@functools.cache
def _count_ops(cfg_json: str) -> int:
    from torch.utils._python_dispatch import TorchDispatchMode

    cfg = Config.from_dict(json.loads(cfg_json))

    class Count(TorchDispatchMode):
        ops = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.ops += 1
            return func(*args, **(kwargs or {}))

    run = loop.build(cfg)
    batches = make_data(cfg).batches()
    loop.train_step(run, loop.place(run, next(batches)))  # the first step allocates
    batch = loop.place(run, next(batches))
    with Count():
        loop.train_step(run, batch)
    return Count.ops


def count_ops(cfg: Config, placement: str = "hbm") -> int:
    """PyTorch ops one step of the `gpu` loop dispatches: counted on the CPU at a small size.

    The count depends on the layers and the placement, not on batch or table sizes, so the
    config runs with 64 samples and at most 1,000 rows per table, PyTorch's embedding kernels
    (where a GPU runs one Triton kernel, they run a few ops: the count is a little high).
    """
    small = config.load(
        "tiny",
        [
            f"model.dense_features={cfg.model.dense_features}",
            f"model.bottom_mlp={'-'.join(map(str, cfg.model.bottom_mlp))}",
            f"model.top_mlp={'-'.join(map(str, cfg.model.top_mlp))}",
            f"model.embedding_dim={cfg.model.embedding_dim}",
            "model.table_rows=" + "-".join(str(min(rows, 1000)) for rows in cfg.model.table_rows),
            f"data.lookups_per_table={cfg.data.lookups_per_table}",
            f"data.pooling={cfg.data.pooling}",
            "train.batch_size=64",
            "train.loop=gpu",
            "train.device=cpu",
            f"train.precision={cfg.train.precision}",
            f"train.optimizer={cfg.train.optimizer}",
            # uvm runs the hbm kernels on other memory: the same ops (and it needs Triton to run)
            f"train.placement={'hbm' if placement == 'uvm' else placement}",
            "train.cache_fraction=0.9",
        ],
    )
    # Triton's kernels are made for the interpreter or a GPU when first imported: import them before
    # the interpreter is switched off here, or a later caller would get kernels that need a GPU.
    from dlrm_study.model.kernels import triton_ops  # noqa: F401

    saved = os.environ.pop("TRITON_INTERPRET", None)  # count PyTorch ops, not interpreted kernels
    try:
        return _count_ops(json.dumps(small.to_dict(), sort_keys=True))
    finally:
        if saved is not None:
            os.environ["TRITON_INTERPRET"] = saved
