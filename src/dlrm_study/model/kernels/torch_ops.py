"""Pure-PyTorch twins of the fused C++ kernels: same arguments, same results.

Used where no compiler is present (and in tests, as the second opinion). They are
slower: they build the per-id gradient rows the fused kernels never materialise.
Repeated ids are summed before the update, which matches the C++ path up to the
order of float additions.
"""

import torch
from torch.nn import functional as F

NAME = "torch"  # what records say ran (`kernel_path`): every kernel module names itself


def join(hi: torch.Tensor, lo: torch.Tensor) -> torch.Tensor:
    """fp32 values from their upper and lower 16 bits (int16 tensors)."""
    bits = (hi.to(torch.int32) << 16) | (lo.to(torch.int32) & 0xFFFF)
    return bits.view(torch.float32)


def split(value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Upper 16 bits (the bf16 weight, truncated) and lower 16 bits of fp32 values."""
    bits = value.contiguous().view(torch.int32)
    return (bits >> 16).to(torch.int16), (bits & 0xFFFF).to(torch.int16)


def interleave(value: torch.Tensor) -> torch.Tensor:
    """A Split-SGD table from fp32 weights (rows, dim): int16 rows [hi | lo], one random access per id."""
    return torch.cat(split(value), dim=1)


def upper(table: torch.Tensor) -> torch.Tensor:
    """The bf16 weights (int16 bits) of a Split-SGD table: the first half of each row, a view."""
    return table[:, : table.shape[1] // 2]


def master(table: torch.Tensor) -> torch.Tensor:
    """The fp32 master weights of a Split-SGD table's rows."""
    dim = table.shape[1] // 2
    return join(table[:, :dim], table[:, dim:])


def bags(offsets: torch.Tensor) -> torch.Tensor:
    """The bag of every id, from the T*B+1 bag starts."""
    return torch.repeat_interleave(torch.arange(len(offsets) - 1, device=offsets.device), offsets.diff())


def to_sample_major(per_bag: torch.Tensor, batch: int, tables: int) -> torch.Tensor:
    """(T*B, D) table-major bags -> (B, T, D)."""
    return per_bag.view(tables, batch, -1).transpose(0, 1).contiguous()


def grad_per_bag(grad: torch.Tensor) -> torch.Tensor:
    """(B, T, D) gradient -> (T*B, D), table-major like the bags."""
    return grad.transpose(0, 1).reshape(-1, grad.shape[-1])


def forward_fp32(weight, ids, offsets, batch: int, tables: int) -> torch.Tensor:
    # The last offset ends the last bag: ids past it (a staged batch's padding) are never read, but may be
    # checked against the table, so the padding id (one past the last row) is clamped into it.
    ids = ids.clamp(max=len(weight) - 1)
    pooled = F.embedding_bag(ids, weight, offsets.to(ids.dtype), mode="sum", include_last_offset=True)
    return to_sample_major(pooled, batch, tables)


def forward_bf16(hi, ids, offsets, batch: int, tables: int) -> torch.Tensor:
    """`hi`: bf16 bits (rows, dim), a plain table or a Split-SGD table's `upper` view."""
    rows = hi[real_ids(ids, offsets)].view(torch.bfloat16).float()
    pooled = torch.zeros(len(offsets) - 1, hi.shape[1]).index_add_(0, bags(offsets), rows)
    return to_sample_major(pooled, batch, tables)


def real_ids(ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """The ids in bags: a staged batch's padding past the last bag is never read."""
    return ids[: int(offsets[-1])]


def summed_rows(ids, offsets, grad) -> tuple[torch.Tensor, torch.Tensor]:
    """Distinct rows touched and each one's gradient summed over its repeats."""
    rows, inverse = torch.unique(real_ids(ids, offsets), return_inverse=True)
    per_id = grad_per_bag(grad)[bags(offsets)]
    return rows, torch.zeros(len(rows), grad.shape[-1], device=grad.device).index_add_(0, inverse, per_id)


def sgd_fp32(weight, ids, offsets, grad, lr: float, batch: int, tables: int) -> None:
    rows, g = summed_rows(ids, offsets, grad)
    weight[rows] -= lr * g


def sgd_split_bf16(table, ids, offsets, grad, lr: float, batch: int, tables: int) -> None:
    """`table`: a Split-SGD table (`interleave`), rows [hi | lo]."""
    rows, g = summed_rows(ids, offsets, grad)
    table[rows] = interleave(master(table[rows]) - lr * g)


def id_bags(bag_starts: torch.Tensor, count: int) -> torch.Tensor:
    """The bag of each of `count` id positions; positions past the last bag (padding) get bag T*B.

    Fixed size and no host read (unlike `bags`, whose repeat_interleave must learn its length).
    """
    positions = torch.arange(count, device=bag_starts.device)
    return torch.searchsorted(bag_starts, positions, right=True) - 1


def fixed_bags(bag_starts: torch.Tensor, count: int, bag_size: int) -> bool:
    """Whether every one of the bags holds `bag_size` ids (fixed pooling, checked when staged): known
    from the shapes alone, so deciding costs no host read."""
    return bag_size > 0 and count == (len(bag_starts) - 1) * bag_size


def sorted_ids(ids: torch.Tensor, bag_starts: torch.Tensor, bag_size: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The ids sorted (repeats of a row side by side) and the bag of each sorted id: fixed sizes.

    The ids are sorted as they come (int32 from staging: half the radix passes of int64). Where
    every bag holds `bag_size` ids, a position's bag is position // bag_size; else a search in
    the bag starts.
    """
    rows, order = torch.sort(ids, stable=True)
    if fixed_bags(bag_starts, len(ids), bag_size):
        return rows, torch.div(order, bag_size, rounding_mode="floor")
    return rows, id_bags(bag_starts, len(ids))[order]


def segments(ids, bag_starts, grad, bag_size: int = 0, rows: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Each distinct row's gradient summed over its repeats, in fixed-size buffers (no host read).

    Sort the ids, number the runs of equal rows (segments), sum each segment's gradient rows.
    Returns (row of each segment, summed gradient), both of len(ids) entries: the segments past
    the last real one, and a staged batch's padding (ids from `rows` on: no row of the tables),
    hold row 0 and a zero gradient, so adding them changes nothing.
    """
    ordered, bag = sorted_ids(ids, bag_starts, bag_size)
    first = torch.ones_like(ordered, dtype=torch.bool)
    first[1:] = ordered[1:] != ordered[:-1]
    segment = first.cumsum(0) - 1
    per_bag = torch.cat([grad_per_bag(grad.float()), grad.new_zeros(1, grad.shape[-1], dtype=torch.float32)])
    summed = torch.zeros(len(ids), grad.shape[-1], device=grad.device).index_add_(0, segment, per_bag[bag])
    segment_row = torch.zeros_like(ordered).scatter_(0, segment, ordered)
    if rows is not None:  # padding: its segment is no row of the tables
        real = segment_row < rows
        segment_row, summed = torch.where(real, segment_row, 0), summed * real.unsqueeze(1)
    return segment_row, summed


def update_fp32(
    weight, momentum, ids, bag_starts, grad, lr: float, eps: float, batch: int, tables: int, bag_size: int = 0
) -> None:
    """SGD (momentum None) or row-wise Adagrad, one update per distinct row, with fixed-size buffers.

    The twin of Triton's `update_fp32`. Index-adds, not index-puts: the padding segments name row 0
    too, and adding their zero leaves it as the real segment of row 0 made it.
    """
    rows, g = segments(ids, bag_starts, grad, bag_size, len(weight))
    if momentum is None:
        weight.index_add_(0, rows, g, alpha=-lr)
        return
    momentum.index_add_(0, rows, g.square().mean(1))
    scale = (lr / (momentum[rows].sqrt() + eps)).unsqueeze(1)
    weight.index_add_(0, rows, -scale * g)


def copy_rows(src: torch.Tensor, src_rows: torch.Tensor, dst: torch.Tensor, dst_rows: torch.Tensor) -> None:
    """dst[dst_rows] = src[src_rows], across devices (rows indexed where their tensor lives)."""
    dst[dst_rows.to(dst.device)] = src[src_rows.to(src.device)].to(dst.device)


def adagrad_scale(momentum, rows, g, lr: float, eps: float) -> torch.Tensor:
    momentum[rows] += g.square().mean(1)
    return (lr / (momentum[rows].sqrt() + eps)).unsqueeze(1)


def rowwise_adagrad_fp32(weight, momentum, ids, offsets, grad, lr: float, eps: float, batch: int, tables: int) -> None:
    rows, g = summed_rows(ids, offsets, grad)
    weight[rows] -= adagrad_scale(momentum, rows, g, lr, eps) * g


def rowwise_adagrad_split_bf16(table, momentum, ids, offsets, grad, lr, eps, batch: int, tables: int) -> None:
    rows, g = summed_rows(ids, offsets, grad)
    scale = adagrad_scale(momentum, rows, g, lr, eps)
    table[rows] = interleave(master(table[rows]) - scale * g)


def interaction_pairs(features: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Row and column of each distinct pair, lower triangle in row order (dlrm's order)."""
    return torch.tril_indices(features, features, offset=-1)


def interaction_forward(dense: torch.Tensor, pooled: torch.Tensor) -> torch.Tensor:
    """Computed in fp32; the output in the dense vector's dtype (fp32, or bf16: the C++ kernel's contract)."""
    wide = dense.float()
    features = torch.cat([wide.unsqueeze(1), pooled], dim=1)
    rows, cols = interaction_pairs(features.shape[1])
    dots = torch.bmm(features, features.transpose(1, 2))[:, rows, cols]
    return torch.cat([wide, dots], dim=1).to(dense.dtype)


def interaction_backward(dense: torch.Tensor, pooled: torch.Tensor, grad: torch.Tensor) -> list[torch.Tensor]:
    """`grad` in the dense vector's dtype; the dense vector's gradient in it too, the pooled one's in fp32."""
    if dense.dtype != torch.float32:
        grad_dense, grad_pooled = interaction_backward(dense.float(), pooled, grad.float())
        return [grad_dense.to(dense.dtype), grad_pooled]
    features = torch.cat([dense.unsqueeze(1), pooled], dim=1)
    count, dim = features.shape[1], dense.shape[1]
    rows, cols = interaction_pairs(count)
    pair_grad = torch.zeros(len(dense), count, count)
    pair_grad[:, rows, cols] = grad[:, dim:]
    symmetric = pair_grad + pair_grad.transpose(1, 2)  # each dot reaches both of its features
    grad_features = torch.bmm(symmetric, features)
    return [grad_features[:, 0] + grad[:, :dim], grad_features[:, 1:].contiguous()]


def split_sgd_dense(hi: torch.Tensor, lo: torch.Tensor, grad: torch.Tensor, lr: float) -> None:
    """Split-SGD of a bf16 dense parameter (int16 bits `hi`, lower halves `lo`, bf16 bits `grad`)."""
    new_hi, new_lo = split(join(hi, lo) - lr * grad.view(torch.bfloat16).float())
    hi.copy_(new_hi)
    lo.copy_(new_lo)
