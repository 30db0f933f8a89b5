"""Triton kernels of the GPU placements: pooled lookup, fused SGD / row-wise Adagrad, row copy.

Same arguments and results as their twins in `torch_ops` (up to the order of float
additions), so an arch can use either. On a GPU they also read and write tables held in
pinned host memory, through unified virtual addressing: that is the `uvm` placement.
On the CPU they run in Triton's interpreter when TRITON_INTERPRET=1 is set before Triton
is imported, which is how CI tests their logic without a GPU.

Layout: all tables stacked in one (rows, dim) matrix; bags table-major (bag = t * B + b)
with `bag_starts` holding T*B+1 positions into `ids`; pooled output sample-major (B, T, D).
`ids` may run past the last bag (a staged batch's padding): no kernel reads that as a bag's.
"""

import os

import torch

from dlrm_study.model.kernels import torch_ops

try:
    import triton
    import triton.language as tl
except ImportError:  # the torch twins serve instead
    triton = None


# Whether the kernels below were made for the interpreter (decided when Triton wraps them, at import).
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"


NAME = "triton"  # what records say ran (`kernel_path`): every kernel module names itself


def available(device: torch.device) -> bool:
    """Whether these kernels can run for tensors on `device` (CPU only in the interpreter)."""
    if triton is None:
        return False
    if device.type == "cuda":
        return True
    return device.type == "cpu" and INTERPRETED and os.environ.get("TRITON_INTERPRET") == "1"


if triton is not None:

    @triton.jit
    def _pool_kernel(
        weight, ids, bag_starts, out, bags, batch, tables, dim, BLOCK_BAGS: tl.constexpr, BLOCK_D: tl.constexpr
    ):
        # A block of bags per program. Step j loads the j-th row of every bag in the block at once,
        # one [BLOCK_BAGS, BLOCK_D] tile: the loads are independent, so they are in flight together,
        # and one-hot bags (most of mlperf's) fill whole tiles instead of one row per program.
        bag = tl.program_id(0) * BLOCK_BAGS + tl.arange(0, BLOCK_BAGS)
        cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
        live_bag, live_col = bag < bags, cols < dim
        # Bags as a [BLOCK_BAGS, 1] column, not a vector: every tensor of the loop then has the tile's layout
        # (with vectors, Triton 3.6 for sm_90 gave the mask and the pointers of the id load two layouts).
        bags_col, live_col_bag = bag[:, None], live_bag[:, None]
        start = tl.load(bag_starts + bags_col, mask=live_col_bag, other=0)
        length = tl.load(bag_starts + bags_col + 1, mask=live_col_bag, other=0) - start
        acc = tl.zeros([BLOCK_BAGS, BLOCK_D], dtype=tl.float32)
        for j in range(0, tl.max(tl.max(length, axis=1), axis=0)):
            live = j < length
            row = tl.load(ids + start + j, mask=live, other=0).to(tl.int64)
            acc += tl.load(weight + row * dim + cols[None, :], mask=live & live_col[None, :], other=0.0)
        dst = ((bag % batch) * tables + bag // batch).to(tl.int64)  # bags table-major, output sample-major
        tl.store(out + dst[:, None] * dim + cols[None, :], acc, mask=live_bag[:, None] & live_col[None, :])

    @triton.jit
    def _grad_rows(grad, id_bag, at, live, bags, batch, tables, dim, cols, live_col):
        # The pooled-output gradient rows of the ids at positions `at` (zero where not `live`, and for
        # padding, whose bag is T*B): a [len(at), BLOCK_D] tile, its loads in flight together.
        bag = tl.load(id_bag + at, mask=live, other=bags)
        use = live & (bag < bags)
        src = ((bag % batch) * tables + bag // batch).to(tl.int64)  # bags table-major, grad sample-major
        return tl.load(grad + src[:, None] * dim + cols[None, :], mask=use[:, None] & live_col[None, :], other=0.0)

    @triton.jit
    def _chunk_head_kernel(rows, id_bag, grad, heads, count, bags, batch, tables, dim,
                           CHUNK: tl.constexpr, BLOCK_D: tl.constexpr):  # fmt: skip
        # Chunk k of the sorted positions: the gradient sum, inside the chunk, of the segment that holds
        # its first position (which may have begun in an earlier chunk). A segment longer than a chunk
        # is then finished by its head from these partial sums, not one repeat at a time.
        k = tl.program_id(0)
        pos = k * CHUNK + tl.arange(0, CHUNK)
        cols = tl.arange(0, BLOCK_D)
        live_col = cols < dim
        inside = pos < count
        first_row = tl.load(rows + k * CHUNK)
        same = inside & (tl.load(rows + pos, mask=inside, other=-1) == first_row)
        part = tl.sum(_grad_rows(grad, id_bag, pos, same, bags, batch, tables, dim, cols, live_col), axis=0)
        tl.store(heads + k.to(tl.int64) * dim + cols, part, mask=live_col)

    @triton.jit
    def _segment_update_kernel(
        weight, momentum, rows, id_bag, grad, heads, lr, eps, count, table_rows, bags, batch, tables, dim,
        ADAGRAD: tl.constexpr, CHUNK: tl.constexpr, BLOCK_CHUNKS: tl.constexpr, BLOCK_D: tl.constexpr,
    ):  # fmt: skip
        # `rows` are the ids sorted, so a row's repeats sit side by side (a segment). Program k takes chunk k,
        # one position a lane. Each lane at a segment's first position (its head) sums the segment's gradient
        # rows inside the chunk, all heads one repeat a step, CHUNK steps at most. Only the chunk's last
        # segment can run on past it: its head adds the partial sums of the chunks it covers (`heads`, from
        # _chunk_head_kernel), BLOCK_CHUNKS of them a step, so a row of 21,845 repeats takes 11 steps, not
        # 21,845. Each row is then written once, by its head: no atomics, however often the batch names it.
        # Padding (ids from `table_rows` on: no row) sorts last and is never written.
        k = tl.program_id(0)
        lane = tl.arange(0, CHUNK)
        pos = k * CHUNK + lane
        end = tl.minimum((k + 1) * CHUNK, count)
        cols = tl.arange(0, BLOCK_D)
        live_col = cols < dim
        inside = pos < count
        row = tl.load(rows + pos, mask=inside, other=-1)
        first = inside & (row < table_rows) & (row != tl.load(rows + pos - 1, mask=inside & (pos > 0), other=-1))
        acc = tl.zeros([CHUNK, BLOCK_D], dtype=tl.float32)
        at, live = pos, first
        while tl.sum(live.to(tl.int32), axis=0) > 0:
            acc += _grad_rows(grad, id_bag, at, live, bags, batch, tables, dim, cols, live_col)
            at += 1
            live = live & (at < end) & (tl.load(rows + at, mask=live & (at < end), other=-1) == row)
        last = tl.max(tl.where(first, lane, -1), axis=0)  # the head of the chunk's last segment (-1: none here)
        last_row = tl.sum(tl.where(lane == last, row, 0), axis=0)
        chunk = k + 1 + tl.arange(0, BLOCK_CHUNKS)
        at_chunk = chunk * CHUNK
        more = (at_chunk < count) & (chunk * 0 + last >= 0)  # (a vector: the interpreter's masks must be)
        more = more & (tl.load(rows + at_chunk, mask=more, other=-1) == last_row)
        tail = tl.zeros([BLOCK_D], dtype=tl.float32)
        while tl.sum(more.to(tl.int32), axis=0) > 0:  # sorted: the chunks it covers come first, then none
            parts = heads + chunk.to(tl.int64)[:, None] * dim + cols[None, :]
            tail += tl.sum(tl.load(parts, mask=more[:, None] & live_col[None, :], other=0.0), axis=0)
            chunk += BLOCK_CHUNKS
            at_chunk = chunk * CHUNK
            more = more & (at_chunk < count)
            more = more & (tl.load(rows + at_chunk, mask=more, other=-1) == last_row)
        acc += tl.where((lane == last)[:, None], tail[None, :], 0.0)
        where = weight + row.to(tl.int64)[:, None] * dim + cols[None, :]
        write = first[:, None] & live_col[None, :]
        if ADAGRAD:
            m = tl.load(momentum + row, mask=first, other=0.0) + tl.sum(acc * acc, axis=1) / dim
            tl.store(momentum + row, m, mask=first)
            scale = lr / (tl.sqrt(m) + eps)
            tl.store(where, tl.load(where, mask=write) - scale[:, None] * acc, mask=write)
        else:
            tl.store(where, tl.load(where, mask=write) - lr * acc, mask=write)

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


BLOCK_BAGS = 32  # bags per program of the lookup: a 32 x 128 fp32 tile is 32 registers a thread
BLOCK_COLS = 128  # widest column block of the lookup; wider rows take more programs
CHUNK = 32  # sorted positions per program of the update (a lane each): a head walks at most this many repeats
BLOCK_CHUNKS = 32  # chunks' partial sums a long segment's head adds per step


def forward_fp32(weight, ids, bag_starts, batch: int, tables: int) -> torch.Tensor:
    """Pooled rows (B, T, D) of the bags; ids past the last bag (padding) are never read."""
    dim = weight.shape[1]
    out = torch.empty(batch, tables, dim, device=ids.device)
    bags, cols = batch * tables, min(block(dim), BLOCK_COLS)
    if bags:
        grid = (triton.cdiv(bags, BLOCK_BAGS), triton.cdiv(dim, cols))
        _pool_kernel[grid](weight, ids, bag_starts, out, bags, batch, tables, dim, BLOCK_BAGS=BLOCK_BAGS, BLOCK_D=cols)
    return out


def update_fp32(
    weight, momentum, ids, bag_starts, grad, lr: float, eps: float, batch: int, tables: int, bag_size: int = 0
) -> None:
    """SGD (momentum None) or row-wise Adagrad from the pooled-output gradient, once per distinct row.

    Sort the ids (torch, fixed size: int32 keys from staging; a position's bag by division where
    every bag holds `bag_size` ids), then per chunk of sorted positions the partial sum of its first
    segment, and one segment-sum and one write per row (Triton): no atomics, no host read, every
    buffer sized by len(ids), so it runs inside a CUDA graph. A segment's repeats are summed in id
    order within a chunk, then chunk by chunk.
    """
    if not len(ids) or not batch * tables:
        return
    rows, id_bag = torch_ops.sorted_ids(ids, bag_starts, bag_size)
    dim, count = weight.shape[1], len(ids)
    chunks = triton.cdiv(count, CHUNK)
    grad = grad.float().contiguous()
    heads = torch.empty(chunks, dim, device=grad.device)  # on the training device (uvm's weight is in host memory)
    sizes = (batch * tables, batch, tables, dim)
    _chunk_head_kernel[(chunks,)](rows, id_bag, grad, heads, count, *sizes, CHUNK=CHUNK, BLOCK_D=block(dim))
    adagrad = momentum is not None
    _segment_update_kernel[(chunks,)](
        weight, momentum if adagrad else weight, rows, id_bag, grad, heads, lr, eps, count, len(weight), *sizes,
        ADAGRAD=adagrad, CHUNK=CHUNK, BLOCK_CHUNKS=BLOCK_CHUNKS, BLOCK_D=block(dim),
    )  # fmt: skip


def sgd_fp32(weight, ids, bag_starts, grad, lr: float, batch: int, tables: int) -> None:
    update_fp32(weight, None, ids, bag_starts, grad, lr, 0.0, batch, tables)


def rowwise_adagrad_fp32(weight, momentum, ids, bag_starts, grad, lr: float, eps: float, batch: int, tables: int):
    update_fp32(weight, momentum, ids, bag_starts, grad, lr, eps, batch, tables)


def copy_rows(src: torch.Tensor, src_rows: torch.Tensor, dst: torch.Tensor, dst_rows: torch.Tensor) -> None:
    """dst[dst_rows] = src[src_rows]; either side may be pinned host memory on a GPU."""
    if len(src_rows):
        dim = src.shape[1]
        _copy_rows_kernel[(len(src_rows),)](src, src_rows, dst, dst_rows, dim, BLOCK_D=block(dim))
