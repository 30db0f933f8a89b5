"""The project's own hybrid parallelism: tables model-parallel, everything else data-parallel.

Every rank makes the same global batch (batches are a pure function of seed and index)
and keeps its slice of the samples for the dense part. Tables are placed whole on ranks
(table-wise). A rank looks up its tables for the whole global batch with its own sparse
arch (reference or fused CPU), and one all-to-all turns "my tables, every sample" into
"every table, my samples": (B, T_mine, D) -> (B / W, T, D). Backward sends the gradient
the other way and the local arch applies its fused update. The all-to-all is started
before the bottom MLP and waited for after it, so the two overlap. The dense modules are
wrapped in DDP, which allreduces their gradients during backward.

Scaling of the gradients: each rank's loss is the mean over its B / W samples and DDP
averages dense gradients over ranks, which equals the single-process mean over B; the
embedding gradients arriving by all-to-all are of those per-rank means, so they are
divided by W to match it too.
"""

import inspect
import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel

from dlrm_study.config import Config, Loop, Precision, check_fits, validate
from dlrm_study.data import Batch
from dlrm_study.distributed.launch import GPU_RANKS, World
from dlrm_study.errors import UsageError
from dlrm_study.model.dlrm import DLRM
from dlrm_study.model.interaction import interaction_for
from dlrm_study.model.tables import SparseArch, make_sparse_arch
from dlrm_study.model.tables.base import TableSpec, draw_tables


def table_owners(table_rows: list[int], world: int) -> list[int]:
    """The rank of each table: largest first, each to the rank holding the fewest rows so far."""
    load = [0] * world
    owners = [0] * len(table_rows)
    for table in sorted(range(len(table_rows)), key=lambda t: (-table_rows[t], t)):
        rank = min(range(world), key=lambda r: (load[r], r))
        owners[table] = rank
        load[rank] += table_rows[table]
    return owners


class Exchange:
    """Layout of one all-to-all: which tables each rank holds, in what order they arrive."""

    def __init__(self, owners: list[int], world: int, rank: int, local_batch: int, dim: int, group) -> None:
        self.world, self.rank, self.local_batch, self.dim, self.group = world, rank, local_batch, dim, group
        self.by_rank = [[t for t, r in enumerate(owners) if r == rank_] for rank_ in range(world)]
        arrival = [t for tables in self.by_rank for t in tables]  # rank-major
        self.order = torch.tensor([arrival.index(t) for t in range(len(owners))])  # arrival column of table t
        self.work = None
        self.backward_s = 0.0  # time in backward exchanges (blocking: all of it exposed)

    def counts(self) -> tuple[list[int], list[int]]:
        """Elements sent to each rank and received from each rank."""
        mine = len(self.by_rank[self.rank])
        per_sample = self.local_batch * self.dim
        return [per_sample * mine] * self.world, [per_sample * len(t) for t in self.by_rank]


class AllToAllStart(torch.autograd.Function):
    """(B, T_mine, D), sample-major -> a flat buffer filled by an all-to-all in flight."""

    @staticmethod
    def forward(ctx, pooled: torch.Tensor, ex: Exchange) -> torch.Tensor:
        ctx.ex = ex
        send, receive = ex.counts()
        buffer = pooled.new_empty(sum(receive))
        ex.work = dist.all_to_all_single(buffer, pooled.contiguous().view(-1), receive, send, ex.group, async_op=True)
        return buffer

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        ex = ctx.ex
        send, receive = ex.counts()
        back = grad.new_empty(sum(send))
        started = time.perf_counter()
        dist.all_to_all_single(back, grad.contiguous(), send, receive, ex.group)
        ex.backward_s += time.perf_counter() - started
        mine = len(ex.by_rank[ex.rank])
        return back.div_(ex.world).view(ex.world * ex.local_batch, mine, ex.dim), None


class AllToAllWait(torch.autograd.Function):
    """Wait for the exchange, then put the columns in table order: (B / W, T, D)."""

    @staticmethod
    def forward(ctx, buffer: torch.Tensor, ex: Exchange) -> torch.Tensor:
        ex.work.wait()
        ctx.ex = ex
        sizes = [ex.local_batch * len(t) * ex.dim for t in ex.by_rank]
        parts = [p.view(ex.local_batch, len(t), ex.dim) for p, t in zip(buffer.split(sizes), ex.by_rank, strict=True)]
        return torch.cat(parts, dim=1)[:, ex.order]

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        ex = ctx.ex
        arrived = torch.empty_like(grad)
        arrived[:, ex.order] = grad
        parts = arrived.split([len(t) for t in ex.by_rank], dim=1)
        return torch.cat([p.reshape(-1) for p in parts]), None


def local_stand_in(pooled: torch.Tensor, ex: Exchange) -> torch.Tensor:
    """What the exchange computes, without the network: (B, T_mine, D) -> (B / W, T, D) locally.

    Every pooled value is used once (twice where tables do not split evenly), so the
    backward and the table update do the work they do in a real step.
    """
    tables, world, b = len(ex.order), ex.world, ex.local_batch
    moved = pooled.reshape(world, b, pooled.shape[1], ex.dim).transpose(0, 1).reshape(b, -1, ex.dim)
    while moved.shape[1] < tables:
        moved = torch.cat([moved, moved], dim=1)
    return moved[:, :tables]


class ShardedSparseArch(SparseArch):
    """This rank's tables in a local sparse arch, exchanged with the others by all-to-all."""

    name = "sharded"

    def __init__(self, local: SparseArch, spec: TableSpec, ex: Exchange) -> None:
        super().__init__(spec)
        self.local, self.ex = local, ex
        self.kernel_path = local.kernel_path
        self.pending: torch.Tensor | None = None
        # exchange=False: the same arithmetic without the network (for timing compute alone).
        self.exchange = True
        self.wait_s = 0.0  # time spent waiting for forward exchanges (exposed communication)

    def start(self, indices: list[torch.Tensor], offsets: list[torch.Tensor]) -> None:
        """Look up this rank's tables for the global batch and start the exchange."""
        # Every rank holds the global batch: each refuses a bad id alike, naming its global table,
        # rather than its owner alone while the others wait in the all-to-all.
        self.check_ids(indices)
        mine = self.ex.by_rank[self.ex.rank]
        pooled = self.local([indices[t] for t in mine], [offsets[t] for t in mine])
        self.pending = AllToAllStart.apply(pooled, self.ex) if self.exchange else local_stand_in(pooled, self.ex)

    def forward(self, indices: list[torch.Tensor], offsets: list[torch.Tensor]) -> torch.Tensor:
        if self.pending is None:
            self.start(indices, offsets)
        pending, self.pending = self.pending, None
        if not self.exchange:
            return pending
        started = time.perf_counter()
        out = AllToAllWait.apply(pending, self.ex)
        self.wait_s += time.perf_counter() - started
        return out

    def update(self) -> None:
        self.local.update()

    def clear_grad(self) -> None:
        self.local.clear_grad()

    def tables(self) -> list[torch.Tensor]:
        """This rank's tables only (see `gather_tables` for all of them)."""
        return self.local.tables()


@dataclass
class DistRun:
    """A distributed training run: this rank's model and optimizer, and where it stands."""

    cfg: Config
    world: World
    model: torch.nn.Module  # the DDP-wrapped DLRM
    dlrm: DLRM
    dense_optimizer: torch.optim.Optimizer
    route: str = "own"
    step: int = 0
    losses: list[float] = field(default_factory=list)

    @property
    def local_batch(self) -> int:
        return self.cfg.train.batch_size // self.world.size

    def owned_tables(self) -> list[int]:
        return self.dlrm.sparse_arch.ex.by_rank[self.world.rank]

    def train_step(self, batch: Batch, phases: dict[str, float] | None = None) -> float:
        return train_step(self, batch, phases)

    def gather_tables(self) -> list[torch.Tensor] | None:
        return gather_tables(self)

    def gather_accumulators(self) -> list[torch.Tensor] | None:
        return gather_accumulators(self)


def check_config(cfg: Config, world: World) -> None:
    validate(cfg)
    t = cfg.train
    if t.batch_size % world.size:
        raise UsageError(f"train.batch_size {t.batch_size} must divide evenly over {world.size} ranks")
    if t.loop not in (Loop.REFERENCE, Loop.OPTIMIZED):
        raise UsageError(f"distributed runs use the reference or optimized loop, not {t.loop}")
    if t.precision != Precision.FP32:
        raise UsageError("distributed runs are fp32 (train.precision=fp32)")
    if t.device != "cpu":
        raise UsageError(GPU_RANKS)
    if cfg.model.num_tables < world.size:
        raise UsageError(f"{cfg.model.num_tables} tables cannot be spread over {world.size} ranks (table-wise)")


def check_route(cfg: Config, route: str) -> None:
    """Refuse an optimizer the route cannot train, nor so checkpoint (cheap: before any process group starts)."""
    if route == "torchrec" and cfg.train.optimizer != "sgd":
        # Its tables train by fbgemm's fused SGD: row-wise Adagrad would be neither trained nor checkpointed.
        raise UsageError("--route torchrec trains the tables with SGD only (train.optimizer=sgd)")


def build(cfg: Config, world: World, initial: dict | None = None) -> DistRun:
    """This rank's share of the model, initialised exactly as a single process would be.

    The single process draws every table from one generator, then the MLPs; each rank draws
    them all in the same order and keeps its own tables (one table in memory at a time).
    `initial` (a checkpoint's tables, dense state and optimizer state, see `run.load_checkpoint`)
    replaces those values.
    """
    check_config(cfg, world)
    check_fits(cfg, "cpu")
    owners = table_owners(cfg.model.table_rows, world.size)
    generator = torch.Generator().manual_seed(cfg.train.seed)
    local = local_arch(cfg, [t for t, rank in enumerate(owners) if rank == world.rank], generator, initial)
    group = dist.new_group(backend=dist.get_backend(), timeout=world.timeout)  # new groups do not inherit it
    ex = Exchange(owners, world.size, world.rank, cfg.train.batch_size // world.size, cfg.model.embedding_dim, group)
    sparse = ShardedSparseArch(local, TableSpec.of(cfg), ex)
    dlrm = DLRM(cfg.model, sparse, generator, interaction_for(cfg))
    if initial is not None:
        dlrm.load_state_dict(initial["dense"], strict=False)
    # The tables are this rank's own: DDP must neither broadcast nor allreduce them.
    ignored = [f"sparse_arch.{name}" for name, _ in sparse.named_parameters()]
    ignored += [f"sparse_arch.{name}" for name, _ in sparse.named_buffers()]
    DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(dlrm, ignored)
    model = DistributedDataParallel(dlrm, **no_buffer_sync())
    optimizer = torch.optim.SGD(dlrm.dense_parameters(), lr=cfg.train.learning_rate)
    if initial is not None:
        optimizer.load_state_dict(initial["dense_optimizer"])
    return DistRun(cfg, world, model, dlrm, optimizer)


def local_arch(cfg: Config, owned: list[int], generator: torch.Generator, initial: dict | None) -> SparseArch:
    """The loop's sparse arch holding the `owned` tables (ascending), from the init or a checkpoint.

    `generator` is left where a single process leaves it after drawing every table.
    """
    mine = draw_tables(cfg.model.table_rows, cfg.model.embedding_dim, generator, set(owned))
    local_cfg = Config.from_dict(cfg.to_dict())
    local_cfg.model.table_rows = [cfg.model.table_rows[t] for t in owned]
    local = make_sparse_arch(local_cfg, torch.Generator().manual_seed(0))
    if initial is not None:
        mine = [initial["tables"][t] for t in owned]
    local.set_tables(mine)
    if initial is not None and initial["accumulators"] is not None:
        local.set_accumulators([initial["accumulators"][t] for t in owned])
    return local


def no_buffer_sync() -> dict[str, bool]:
    """DDP without a buffer broadcast every forward (the dense buffers never change), in either spelling."""
    if "forward_sync_buffers" in inspect.signature(DistributedDataParallel.__init__).parameters:
        return {"forward_sync_buffers": False}  # torch >= 2.13
    return {"broadcast_buffers": False}


def local_part(run: DistRun, batch: Batch) -> Batch:
    """This rank's samples for the dense part; the ids stay global (for this rank's tables)."""
    rows = slice(run.world.rank * run.local_batch, (run.world.rank + 1) * run.local_batch)
    return Batch(batch.dense[rows], batch.indices, batch.offsets, batch.labels[rows])


def train_step(run: DistRun, batch: Batch, phases: dict[str, float] | None = None) -> float:
    """One step on the global batch; returns the global mean loss (same on every rank).

    With `phases`, the seconds of each phase are added to it (see `Laps`).
    """
    run.world.beat()  # entering the step's collectives
    laps = Laps(phases)
    mine = local_part(run, batch)
    run.dlrm.sparse_arch.start(batch.indices, batch.offsets)  # lookups + all-to-all in flight
    laps.lap("lookup")
    logits = run.model(mine)  # bottom MLP overlaps the exchange; the sparse arch waits for it
    loss = F.binary_cross_entropy_with_logits(logits, mine.labels)
    laps.lap("forward")
    run.dense_optimizer.zero_grad(set_to_none=True)
    run.dlrm.sparse_arch.clear_grad()
    loss.backward()  # reverse all-to-all, fused table updates, DDP allreduce of dense gradients
    laps.lap("backward")
    run.dense_optimizer.step()
    run.dlrm.sparse_arch.update()
    laps.lap("update")
    total = loss.detach().clone()
    if run.dlrm.sparse_arch.exchange:  # timing compute alone: no collective at all
        dist.all_reduce(total)
        total /= run.world.size
    laps.lap("loss_allreduce")
    run.step += 1
    run.world.beat()  # this step's done
    return total.item()


class Laps:
    """Adds the seconds since the previous lap to `phases[name]` (nothing when phases is None)."""

    def __init__(self, phases: dict[str, float] | None) -> None:
        self.phases, self.last = phases, time.perf_counter()

    def lap(self, name: str) -> None:
        if self.phases is not None:
            now = time.perf_counter()
            self.phases[name] = self.phases.get(name, 0.0) + now - self.last
            self.last = now


def gather_tables(run: DistRun) -> list[torch.Tensor] | None:
    """Every table, in table order, on rank 0 (None elsewhere)."""
    return gather_by_table(run, run.dlrm.sparse_arch.tables())


def gather_accumulators(run: DistRun) -> list[torch.Tensor] | None:
    """Every table's row-wise Adagrad accumulator, in table order, on rank 0 (None elsewhere, and under SGD)."""
    mine = run.dlrm.sparse_arch.local.accumulators()
    return None if mine is None else gather_by_table(run, mine)


def gather_by_table(run: DistRun, mine: list[torch.Tensor]) -> list[torch.Tensor] | None:
    """This rank's tensors for its own tables -> all of them in table order on rank 0 (None elsewhere)."""
    parts: list[dict | None] = [None] * run.world.size if run.world.is_main else []
    owned = {t: x.detach().clone() for t, x in zip(run.owned_tables(), mine, strict=True)}
    dist.gather_object(owned, parts if run.world.is_main else None)
    if not run.world.is_main:
        return None
    merged = {t: x for part in parts for t, x in part.items()}
    return [merged[t] for t in range(len(merged))]


def dense_state(run: DistRun) -> dict[str, torch.Tensor]:
    """The dense parameters (identical on every rank), keyed as in a single-process DLRM."""
    return {k: v for k, v in run.dlrm.state_dict().items() if not k.startswith("sparse_arch.")}
