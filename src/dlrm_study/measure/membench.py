"""The memory system's physical limits at the embedding kernels' access pattern: probes, not kernel copies.

The roofline's embedding bound must be one no loop can beat, so it is measured by probes of what
the memory system allows, not by a copy of a kernel's design (an accumulator in memory, a fixed
prefetch distance: a better loop beats such a "bound"). The C++ probes beside the fused kernels
(`membench_gather`, `membench_update`, `membench_stream`, `membench_chase` in `fused_cpu.cpp`), in a
buffer of the tables' own size (the config's footprint), on huge pages where the OS allows:

Random rows are drawn table by table, as the loops walk them (`draw`): while a table's ids are
walked its rows are the footprint (page-table and cache reach), not all tables' rows at once.

- gather: uniform random rows, each independent of the others (its words summed in registers, no
  bag, no accumulator in memory: right for any pooling factor), `read` bytes of rows `stride` bytes
  apart (a bf16 Split-SGD table's forward reads the first half of each [hi | lo] row);
- update: each random row read-modified-written, prefetched with write intent (bytes counted twice);
- stream: a buffer read once in order (the interaction's features: the bound's memory term);
- chase: a dependent walk over random rows, the latency one miss costs at the footprint. With a
  gather's lines/s it gives the misses in flight (Little's law: in flight = lines/s x latency),
  which is what limits random rows: lines, not bytes.

The fused forward itself is timed beside the gather probes and the faster counts: a probe should
beat it, and where none does (a loaded machine, a probe a loop outdid), the limit stays one no loop
of the study beats. Prefetch distances are searched in rows (`DISTANCES`, rows ahead, 0: none) per machine and access;
the best is the limit, and its distance is what the fused kernels run on this machine (`ahead_key`,
C++ only; `limits.use_prefetch`). Each access is measured in `ROUNDS` interleaved rounds of `repeats` calls and
the fewest seconds kept: on a shared machine noise only adds time, and a limit is what the memory
system can do. Without the compiled kernels a PyTorch twin times `index_select` (gather),
`index_select` + add + `index_copy_` (update) in chunks that stay in cache, and `sum` (stream).
"""

from collections.abc import Callable, Iterable

import torch
from torch.nn import functional as F

from dlrm_study.config.memory import available_memory
from dlrm_study.measure.timing import best_s
from dlrm_study.model import kernels
from dlrm_study.model.kernels import torch_ops
from dlrm_study.model.tables import hugepages
from dlrm_study.perfmodel.roofline import Access  # what the bound charges; measured here

DISTANCES = (0, 2, 4, 8, 16, 32, 64, 128)  # prefetch distances tried, in rows ahead; the best is the limit
ROUNDS = 3  # interleaved rounds over all accesses: a burst of load in one round spares the others
CHUNK = 2**14  # ids per torch call in the fallback: its temporaries stay in cache
MIN_IDS, MAX_IDS = 2**16, 2**21  # ids per timed call: long enough to time, short enough to repeat
CHASE_STEPS = 2**18  # hops of the latency walk
ONES = 0x3F803F80  # each word: bf16 1.0 in each half, fp32 about 1.0: no denormal slows the fused forward
BAG = 100  # ids per bag when the fused forward itself is timed beside the probes
LINE = 64  # bytes per cache line
PAIRED_ROUNDS = 5  # rounds of the paired fused-gather-vs-EmbeddingBag check (`versus_embedding_bag`)
AHEAD = "_ahead_rows_"  # in the name of an access's best prefetch distance (`ahead_key`)


def measure(accesses: Iterable[Access], ids: int, repeats: int, max_bytes: int | None = None) -> dict[str, float]:
    """GB/s of each access (gather, stream: bytes read; update: read + written), keyed by `Access.key`, and
    each gather's pointer-chase latency in ns (`Access.latency_key`, C++ only).

    `ids`: random rows per timed call (clamped to MIN_IDS..MAX_IDS). One buffer, as large as the largest
    table (at most `max_bytes`, default three quarters of the memory available), serves every access.
    """
    accesses = sorted(set(accesses))
    if not accesses:
        return {}
    ids = min(max(ids, MIN_IDS), MAX_IDS)
    size = min(max(max(a.table_bytes for a in accesses), LINE), max_bytes or available_memory("cpu") * 3 // 4)
    buffer = hugepages.empty(-(-size // 4), dtype=torch.int32)  # on huge pages where the OS allows, as the tables
    buffer.fill_(ONES)  # first touch here, not in a timed call
    generator = torch.Generator().manual_seed(0)
    timed = {a: calls(buffer, draw(a, ids, size, generator), a) for a in accesses}
    seconds = {a: [float("inf")] * len(fns) for a, fns in timed.items()}  # the fewest of each call's
    for _ in range(ROUNDS):
        for access, fns in timed.items():
            seconds[access] = [min(s, best_s(fn, repeats)) for s, fn in zip(seconds[access], fns, strict=True)]
    limits = {a.key: traffic(a, ids, size) / min(seconds[a]) / 1e9 for a in accesses}
    if kernels.load() is not None:
        for access in {a for a in accesses if a.kind == "gather"}:
            limits[access.latency_key] = latency_ns(buffer, access, rows_of(access, size), generator)
        for access in {a for a in accesses if a.kind != "stream"}:
            limits[ahead_key(access)] = float(best_distance(seconds[access]))
    return limits


def best_distance(seconds: list[float]) -> int:
    """The prefetch distance (rows ahead) of the fastest probe: `seconds` of the probes at DISTANCES, in order
    (any call after them, the fused forward's, is no probe). What the kernels then run (`limits.use_prefetch`)."""
    probes = seconds[: len(DISTANCES)]
    return DISTANCES[probes.index(min(probes))]


def ahead_key(access: Access) -> str:
    """The name of an access's best prefetch distance: `gather_ahead_rows_128B_of_256B_8000000rows_8tables`.

    Not a rate: it goes with the rate measured beside it (`rate_key`), kept or dropped with it."""
    return access.key.replace("_gbps_", AHEAD, 1)


def rate_key(name: str) -> str | None:
    """The rate a prefetch distance (`ahead_key`) was found with; None for any other limit."""
    return name.replace(AHEAD, "_gbps_", 1) if AHEAD in name else None


def draw(access: Access, ids: int, size: int, generator: torch.Generator) -> torch.Tensor:
    """`ids` random rows of the access, table by table as the loops walk them (an equal share of the ids per
    table, uniform within it: a table's rows are the footprint of its stretch), all within `size` bytes
    (tables larger than memory: each shrunk alike)."""
    tables = access.tables or (access.rows,)
    fit = rows_of(access, size) / access.rows
    rows = [max(1, int(t * fit)) for t in tables]
    starts = [sum(rows[:i]) for i in range(len(rows))]
    shares = [ids * (i + 1) // len(rows) - ids * i // len(rows) for i in range(len(rows))]
    return torch.cat(
        [torch.randint(r, (n,), generator=generator) + s for r, s, n in zip(rows, starts, shares, strict=True)]
    )


def rows_of(access: Access, size: int) -> int:
    """The access's rows that fit in `size` bytes (a table larger than memory: as much of it as fits)."""
    return max(1, min(access.rows, size // access.stride))


def stream_bytes(access: Access, size: int) -> int:
    """Bytes a stream reads: its footprint in whole lines, as much of it as the buffer holds."""
    return max(LINE, min(access.table_bytes, size) // LINE * LINE)


def traffic(access: Access, ids: int, size: int) -> float:
    """Bytes one timed call moves: `ids` rows read (twice for an update: read and written), or the stream."""
    if access.kind == "stream":
        return float(stream_bytes(access, size))
    return (2 if access.kind == "update" else 1) * ids * access.read


def calls(buffer: torch.Tensor, ids: torch.Tensor, access: Access) -> list[Callable[[], object]]:
    """The timed calls of one access: the C++ probe at each prefetch distance, else the PyTorch twin."""
    ops = kernels.load()
    if ops is None:
        return [torch_twin(buffer, ids, access)]
    if access.kind == "stream":
        return [lambda: ops.membench_stream(buffer, stream_bytes(access, buffer.numel() * 4))]
    if access.kind == "gather":
        probes = [lambda a=a: ops.membench_gather(buffer, ids, access.stride, access.read, a) for a in DISTANCES]
        return [*probes, fused_gather(ops, buffer, ids, access)]
    return [lambda a=a: ops.membench_update(buffer, ids, access.stride, access.read, a) for a in DISTANCES]


def fused_gather(ops: object, buffer: torch.Tensor, ids: torch.Tensor, access: Access) -> Callable[[], object]:
    """The fused forward itself over the same rows, in bags of BAG ids: a loop the study runs, so the limit is
    never below it (the probes should beat it; where one does not, the bound still holds for this loop)."""
    rows = len(buffer) * 4 // access.stride
    offsets = torch.cat([torch.arange(0, len(ids), BAG), torch.tensor([len(ids)])])  # the last bag: what is left
    bags = len(offsets) - 1
    if access.read == access.stride:  # whole rows: an fp32 table
        table = buffer[: rows * access.stride // 4].view(torch.float32).view(rows, access.stride // 4)
        return lambda: ops.forward_fp32(table, ids, offsets, bags, 1)
    halves = buffer[: rows * access.stride // 4].view(torch.int16).view(rows, access.stride // 2)
    return lambda: ops.forward_bf16(halves[:, : access.read // 2], ids, offsets, bags, 1)


def latency_ns(buffer: torch.Tensor, access: Access, rows: int, generator: torch.Generator) -> float:
    """ns per miss: the fewest of a few dependent walks over a random cycle of the access's rows (rows whose
    size is no multiple of 8 bytes, an odd bf16 dim's, walked 8-byte aligned: a few more bytes each)."""
    stride = -(-access.stride // 8) * 8
    rows = max(1, min(rows, len(buffer) * 4 // stride))
    order = torch.randperm(rows, generator=generator)
    following = torch.empty(rows, dtype=torch.int64)
    following[order] = order.roll(-1)  # each row links to the next of the cycle: one cycle through all rows
    steps = min(CHASE_STEPS, 4 * rows)
    return min(kernels.load().membench_chase(buffer, following, stride, steps) for _ in range(ROUNDS))


def torch_twin(buffer: torch.Tensor, ids: torch.Tensor, access: Access) -> Callable[[], object]:
    """The same traffic through torch's plain row copies (no scatter-add: its path varies with the row size)."""
    if access.kind == "stream":
        return lambda: buffer[: stream_bytes(access, buffer.numel() * 4) // 4].sum()
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


def versus_embedding_bag(
    access: Access, bag: int, ids: int, repeats: int, rounds: int = PAIRED_ROUNDS, max_bytes: int | None = None
) -> dict[str, list[float]]:
    """A paired check, not a limit: the fused forward and torch's EmbeddingBag (`F.embedding_bag`, sum) over one
    table of the access's rows (as much as fits), the same `ids` random rows drawn as the loops walk them, in bags
    of `bag` ids, timed in turn in each of `rounds` rounds, the order alternating (a burst of load hits both of a
    pair): the fewest seconds of `repeats` calls of each, per round (`fused`, `embedding_bag`). fp32 rows (the
    access reads whole rows), else bf16: the fused forward over the upper halves of [hi | lo] rows, EmbeddingBag
    over a bf16 table of the same rows. Empty without the C++ kernels. Nothing is cached."""
    ops = kernels.load()
    if ops is None:
        return {}
    bf16 = access.read < access.stride
    dim = access.stride // 4
    size = min(access.table_bytes, max_bytes or available_memory("cpu") * 3 // 8)  # two tables: the fused, torch's
    generator = torch.Generator().manual_seed(0)
    weight = torch.empty(rows_of(access, size), dim).uniform_(-0.01, 0.01, generator=generator)  # normal floats
    count = max(bag, min(max(ids, MIN_IDS), MAX_IDS) // bag * bag)
    rows = draw(access, count, size, generator)
    offsets = torch.arange(0, count + 1, bag)
    bags = len(offsets) - 1
    halves = torch_ops.upper(torch_ops.interleave(weight)) if bf16 else None
    theirs = weight.bfloat16() if bf16 else weight

    def fused() -> torch.Tensor:
        if halves is not None:
            return ops.forward_bf16(halves, rows, offsets, bags, 1)
        return ops.forward_fp32(weight, rows, offsets, bags, 1)

    def torch_bag() -> torch.Tensor:
        return F.embedding_bag(rows, theirs, offsets, mode="sum", include_last_offset=True)

    times: dict[str, list[float]] = {"fused": [], "embedding_bag": []}
    for round_ in range(rounds):
        pair = [("fused", fused), ("embedding_bag", torch_bag)]
        for name, fn in pair if round_ % 2 == 0 else pair[::-1]:
            times[name].append(best_s(fn, repeats))
    return times
