"""The embedding kernels' memory traffic alone: random rows read, and random rows read-modified-written.

The roofline's embedding bound is what the memory system allows at the loops' access pattern, so
it is measured by a microbenchmark that does that traffic and nothing else, not by a torch op
whose path varies (`index_add_` on small bf16 rows takes a scatter path that copies the whole
table into an fp32 accumulator on every call). The C++ kernels beside the fused ones
(`membench_gather`, `membench_update` in `fused_cpu.cpp`) walk uniform random rows of a buffer as
large as the tables, touching `read` bytes of rows `stride` bytes apart, one integer add per
4-byte word, with the fused kernels' software prefetch at the best of a few distances.

- gather: rows summed in bags of `BAG` (the pooled forward; a bf16 Split-SGD table's forward reads
  the first half of each [hi | lo] row: `read` = stride / 2);
- update: each row read and written back (the fused backward + update; bytes counted twice).

Rates are the best of the repeats: on a shared machine noise only adds time, and a limit is what
the memory system can do. Without the compiled kernels a PyTorch twin times `index_select`
(gather) and `index_select` + add + `index_copy_` (update) in chunks that stay in cache.
"""

from collections.abc import Callable, Iterable

import torch

from dlrm_study.config.memory import available_memory
from dlrm_study.measure.timing import best_s
from dlrm_study.model import kernels
from dlrm_study.model.tables import hugepages
from dlrm_study.perfmodel.roofline import Access  # what the bound charges; measured here

BAG = 100  # ids per bag in the gather, as in dlrm-benchmark
DISTANCES = (0, 8, 16, 32, 64, 128)  # prefetch distances (ids ahead) tried; the best is the limit
CHUNK = 2**14  # ids per torch call in the fallback: its temporaries stay in cache
MIN_IDS, MAX_IDS = 2**16, 2**21  # ids per timed call: long enough to time, short enough to repeat
VERSION = 1  # of what is measured: part of the limits cache's key


def measure(accesses: Iterable[Access], ids: int, repeats: int, max_bytes: int | None = None) -> dict[str, float]:
    """GB/s of each access (gather: bytes read; update: bytes read + written), keyed by `Access.key`.

    `ids`: random rows per timed call (clamped to MIN_IDS..MAX_IDS). One buffer, as large as the largest
    table (at most `max_bytes`, default three quarters of the memory available), serves every access.
    """
    accesses = sorted(set(accesses))
    if not accesses:
        return {}
    ids = min(max(ids, MIN_IDS), MAX_IDS)
    size = min(max(a.table_bytes for a in accesses), max_bytes or available_memory("cpu") * 3 // 4)
    buffer = hugepages.empty(size // 4, dtype=torch.int32)  # on huge pages where the OS allows, as the tables
    buffer.fill_(1)  # first touch here, not in a timed call
    generator = torch.Generator().manual_seed(0)
    limits = {}
    for access in accesses:
        rows = min(access.rows, size // access.stride)  # a table larger than memory: as much of it as fits
        chosen = torch.randint(rows, (ids,), generator=generator)
        seconds = min(best_s(fn, repeats) for fn in calls(buffer, chosen, access))
        limits[access.key] = (2 if access.kind == "update" else 1) * ids * access.read / seconds / 1e9
    return limits


def calls(buffer: torch.Tensor, ids: torch.Tensor, access: Access) -> list[Callable[[], object]]:
    """The timed calls of one access: the C++ walk at each prefetch distance, else the PyTorch twin."""
    ops = kernels.load()
    if ops is None:
        return [torch_twin(buffer, ids, access)]
    if access.kind == "gather":
        return [lambda a=a: ops.membench_gather(buffer, ids, access.stride, access.read, BAG, a) for a in DISTANCES]
    return [lambda a=a: ops.membench_update(buffer, ids, access.stride, access.read, a) for a in DISTANCES]


def torch_twin(buffer: torch.Tensor, ids: torch.Tensor, access: Access) -> Callable[[], object]:
    """The same traffic through torch's plain row copies (no scatter-add: its path varies with the row size)."""
    words = buffer[: len(buffer) // (access.stride // 4) * (access.stride // 4)].view(-1, access.stride // 4)
    table = words[:, : access.read // 4]
    rows = torch.empty(CHUNK, access.read // 4, dtype=buffer.dtype)

    def gather() -> None:
        for chunk in ids.split(CHUNK):
            torch.index_select(table, 0, chunk, out=rows[: len(chunk)]).sum(0)

    def update() -> None:
        for chunk in ids.split(CHUNK):
            torch.index_select(table, 0, chunk, out=rows[: len(chunk)])
            table.index_copy_(0, chunk, rows[: len(chunk)].add_(1))

    return gather if access.kind == "gather" else update
