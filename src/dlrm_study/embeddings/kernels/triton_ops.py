"""Triton kernels of the GPU placements: pooled lookup, fused SGD, row-wise Adagrad, row copy.

Same arguments and results as their twins in `torch_ops` (up to the order of float
additions), so an arch can use either. On a GPU they also read and write tables held in
pinned host memory, through unified virtual addressing: that is the `uvm` placement.
On the CPU they run in Triton's interpreter when TRITON_INTERPRET=1 is set before Triton
is imported, which is how CI tests their logic without a GPU.

Layout: all tables stacked in one (rows, dim) matrix; bags table-major (bag = t * B + b)
with `bag_starts` holding T*B+1 positions into `ids`; pooled output sample-major (B, T, D).
"""

import os

import torch

from dlrm_study.embeddings.kernels import torch_ops

try:
    import triton
    import triton.language as tl
except ImportError:  # the torch twins serve instead
    triton = None


def available(device: torch.device) -> bool:
    """Whether these kernels can run for tensors on `device` (CPU only in the interpreter)."""
    if triton is None:
        return False
    if device.type == "cuda":
        return True
    return device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1"


if triton is not None:

    @triton.jit
    def _pool_kernel(weight, ids, bag_starts, out, batch, tables, dim, BLOCK_D: tl.constexpr):
        bag = tl.program_id(0)
        cols = tl.arange(0, BLOCK_D)
        mask = cols < dim
        start = tl.load(bag_starts + bag)
        end = tl.load(bag_starts + bag + 1)
        acc = tl.zeros([BLOCK_D], dtype=tl.float32)
        for i in range(start, end):
            row = tl.load(ids + i).to(tl.int64)
            acc += tl.load(weight + row * dim + cols, mask=mask, other=0.0)
        table = bag // batch
        sample = bag % batch
        tl.store(out + (sample * tables + table).to(tl.int64) * dim + cols, acc, mask=mask)

    @triton.jit
    def _sgd_kernel(weight, ids, bag_starts, grad, lr, batch, tables, dim, BLOCK_D: tl.constexpr):
        # One program per bag: the bag's gradient, scaled once, added to each of its rows.
        # Atomics make repeated ids (within and across bags) sum, in no fixed order.
        bag = tl.program_id(0)
        cols = tl.arange(0, BLOCK_D)
        mask = cols < dim
        table = bag // batch
        sample = bag % batch
        step = -lr * tl.load(grad + (sample * tables + table).to(tl.int64) * dim + cols, mask=mask, other=0.0)
        start = tl.load(bag_starts + bag)
        end = tl.load(bag_starts + bag + 1)
        for i in range(start, end):
            row = tl.load(ids + i).to(tl.int64)
            tl.atomic_add(weight + row * dim + cols, step, mask=mask)

    @triton.jit
    def _sgd_rows_kernel(weight, rows, grad, lr, dim, BLOCK_D: tl.constexpr):
        # One program per distinct row (gradient summed over repeats): plain stores, no atomics.
        r = tl.program_id(0)
        cols = tl.arange(0, BLOCK_D)
        mask = cols < dim
        row = tl.load(rows + r).to(tl.int64)
        g = tl.load(grad + r.to(tl.int64) * dim + cols, mask=mask, other=0.0)
        w = tl.load(weight + row * dim + cols, mask=mask)
        tl.store(weight + row * dim + cols, w - lr * g, mask=mask)

    @triton.jit
    def _adagrad_rows_kernel(weight, momentum, rows, grad, lr, eps, dim, BLOCK_D: tl.constexpr):
        # One program per distinct row, with its gradient already summed over repeats.
        r = tl.program_id(0)
        cols = tl.arange(0, BLOCK_D)
        mask = cols < dim
        row = tl.load(rows + r).to(tl.int64)
        g = tl.load(grad + r.to(tl.int64) * dim + cols, mask=mask, other=0.0)
        m = tl.load(momentum + row) + tl.sum(g * g, axis=0) / dim
        tl.store(momentum + row, m)
        w = tl.load(weight + row * dim + cols, mask=mask)
        tl.store(weight + row * dim + cols, w - (lr / (tl.sqrt(m) + eps)) * g, mask=mask)

    @triton.jit
    def _copy_rows_kernel(src, src_rows, dst, dst_rows, dim, BLOCK_D: tl.constexpr):
        r = tl.program_id(0)
        cols = tl.arange(0, BLOCK_D)
        mask = cols < dim
        s = tl.load(src_rows + r).to(tl.int64)
        d = tl.load(dst_rows + r).to(tl.int64)
        tl.store(dst + d * dim + cols, tl.load(src + s * dim + cols, mask=mask), mask=mask)


def block(dim: int) -> int:
    return triton.next_power_of_2(dim)


def forward_fp32(weight, ids, bag_starts, batch: int, tables: int) -> torch.Tensor:
    dim = weight.shape[1]
    out = torch.empty(batch, tables, dim, device=ids.device)
    if batch * tables:
        _pool_kernel[(batch * tables,)](weight, ids, bag_starts, out, batch, tables, dim, BLOCK_D=block(dim))
    return out


def sgd_fp32(weight, ids, bag_starts, grad, lr: float, batch: int, tables: int) -> None:
    dim = weight.shape[1]
    if batch * tables:
        _sgd_kernel[(batch * tables,)](weight, ids, bag_starts, grad, lr, batch, tables, dim, BLOCK_D=block(dim))


def sgd_rows_fp32(weight, ids, bag_starts, grad, lr: float, batch: int, tables: int) -> None:
    """SGD on each distinct row once, its repeats summed first: no atomics on the weights.

    For tables in pinned host memory (`uvm`), where GPU atomics would have to cross PCIe
    (and need the platform's PCIe atomics); the result equals `sgd_fp32` up to summation order.
    """
    rows, summed = torch_ops.summed_rows(ids, bag_starts, grad)
    if len(rows):
        dim = weight.shape[1]
        _sgd_rows_kernel[(len(rows),)](weight, rows, summed, lr, dim, BLOCK_D=block(dim))


def rowwise_adagrad_fp32(weight, momentum, ids, bag_starts, grad, lr: float, eps: float, batch: int, tables: int):
    # Adagrad is not linear in the gradient: sum each row's repeats first (torch), then update (Triton).
    rows, summed = torch_ops.summed_rows(ids, bag_starts, grad)
    if len(rows):
        dim = weight.shape[1]
        _adagrad_rows_kernel[(len(rows),)](weight, momentum, rows, summed, lr, eps, dim, BLOCK_D=block(dim))


def copy_rows(src: torch.Tensor, src_rows: torch.Tensor, dst: torch.Tensor, dst_rows: torch.Tensor) -> None:
    """dst[dst_rows] = src[src_rows]; either side may be pinned host memory on a GPU."""
    if len(src_rows):
        dim = src.shape[1]
        _copy_rows_kernel[(len(src_rows),)](src, src_rows, dst, dst_rows, dim, BLOCK_D=block(dim))
