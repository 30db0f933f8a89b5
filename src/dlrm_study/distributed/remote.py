"""Remote parameter servers (the HPCA21 "remote" placement) over torch.distributed.rpc.

The trainer keeps the dense model; the tables live on S parameter-server processes,
split table-wise (table t on server t % S). Each server holds its tables in a local
`FusedCPUSparseArch` (fp32, SGD or row-wise Adagrad), initialised to exactly the values
the single-process run draws (every table from one generator seeded with `train.seed`,
in table order: each server draws them all and keeps its own).

One step on the trainer:

- forward: per server, one `rpc_async` lookup of that server's bags (ids into its stacked
  tables and their bag starts); the server keeps the ids for the update and returns the
  pooled (B, T_s, D); the columns are put back in table order -> (B, T, D);
- backward (`RemoteLookup`): each server is sent its slice of the pooled-output gradient
  and applies the fused update. With `deferred=True` the trainer does not wait there but
  at the start of the next lookup (or `tables()`), so the update overlaps the rest of
  backward, the dense optimizer step, the next batch and the bottom MLP.

Every RPC has the agent's timeout; a server that dies or stops answering fails the
trainer with a `RemoteServerError` naming it. RPC must be initialised (`rpc.init_rpc`)
before a `RemoteSparseArch` is built; servers only need to be in the RPC group
(`serve()`), their shards are built on request.
"""

import itertools
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.distributed.rpc as rpc

from dlrm_study.config import Config, Precision
from dlrm_study.data.batch import batched_ids
from dlrm_study.distributed.launch import EXIT_PEER_FAILED, inject_fault, under_torchrun
from dlrm_study.errors import UsageError
from dlrm_study.model import kernels
from dlrm_study.model.tables.base import SparseArch, TableSpec, draw_tables
from dlrm_study.model.tables.fused_cpu import FusedCPUSparseArch

ArchFactory = Callable[[Config, torch.Generator, torch.device], SparseArch]

# Ids kept per shard for updates still to come: forwards with grad enabled whose backward
# never ran are forgotten after this many newer ones.
MAX_SAVED_STEPS = 4


class RemoteServerError(RuntimeError):
    """A parameter server failed, timed out or went away."""


# --- the server side -------------------------------------------------------------------------


@dataclass
class Shard:
    arch: FusedCPUSparseArch
    tables: list[int]
    saved: dict[int, tuple[torch.Tensor, torch.Tensor, int]] = field(default_factory=dict)


_SHARDS: dict[str, Shard] = {}
_SHARDS_LOCK = threading.Lock()


def build_shard_arch(cfg: Config, tables: list[int]) -> FusedCPUSparseArch:
    """A fused CPU arch holding `tables` (global indices, ascending) with the single-process init.

    The single-process run draws every table from one generator seeded with `train.seed`,
    in table order, then the dense MLPs; here all tables are drawn in the same order (one
    at a time) and only this shard's are kept.
    """
    m, t = cfg.model, cfg.train
    if t.precision != Precision.FP32:
        raise ValueError("remote parameter servers hold fp32 tables only")
    # Built with a throwaway generator, then overwritten with the single process's values.
    arch = FusedCPUSparseArch(TableSpec.of(cfg).only(tables), torch.Generator())
    generator = torch.Generator().manual_seed(t.seed)
    arch.set_tables(draw_tables(m.table_rows[: max(tables) + 1], m.embedding_dim, generator, set(tables)))
    return arch


def _build_shard(key: str, cfg: Config, tables: list[int]) -> int:
    arch = build_shard_arch(cfg, tables)
    with _SHARDS_LOCK:
        _SHARDS[key] = Shard(arch, list(tables))
    return sum(cfg.model.table_rows[t] for t in tables)


def _drop_shard(key: str) -> None:
    with _SHARDS_LOCK:
        _SHARDS.pop(key, None)


def _lookup(key: str, token: int | None, ids: torch.Tensor, bag_starts: torch.Tensor, batch: int):
    """Pooled (B, T_s, D) of this shard's bags, and the server's compute time in ms."""
    start = time.perf_counter()
    shard = _SHARDS[key]
    pooled = shard.arch.pooled(ids, bag_starts, batch)
    if token is not None:  # a training forward: its backward will send the gradient
        shard.saved[token] = (ids, bag_starts, batch)
        for old in [k for k in shard.saved if k <= token - MAX_SAVED_STEPS]:
            del shard.saved[old]
    return pooled, (time.perf_counter() - start) * 1e3


def _update(key: str, token: int, grad: torch.Tensor) -> float:
    """The fused update of this shard's rows from the gradient of its pooled output."""
    inject_fault(rpc.get_worker_info().id, token)  # the fault tests' hook (DLRM_STUDY_FAULT)
    start = time.perf_counter()
    shard = _SHARDS[key]
    ids, bag_starts, batch = shard.saved.pop(token)
    shard.arch.apply_update(ids, bag_starts, grad, batch)
    return (time.perf_counter() - start) * 1e3


def _weights(key: str) -> torch.Tensor:
    """This shard's stacked fp32 tables, (its rows, D)."""
    return _SHARDS[key].arch.master_weight()


def _set_weights(key: str, weights: list[torch.Tensor]) -> None:
    """Overwrite this shard's tables (a checkpoint resumed)."""
    _SHARDS[key].arch.set_tables(weights)


def _accumulators(key: str) -> list[torch.Tensor] | None:
    """This shard's row-wise Adagrad accumulators, one (rows,) per table (None under SGD)."""
    return _SHARDS[key].arch.accumulators()


def _set_accumulators(key: str, values: list[torch.Tensor]) -> None:
    """Overwrite this shard's accumulators (a checkpoint resumed)."""
    _SHARDS[key].arch.set_accumulators(values)


_STOPPING = threading.Event()


def _stopping() -> None:
    """The trainer is about to shut down: its silence from now on is no failure."""
    _STOPPING.set()


def serve(
    name: str,
    rank: int,
    world_size: int,
    options: rpc.TensorPipeRpcBackendOptions,
    trainer: str = "trainer",
    heartbeat_s: float = 5.0,
) -> None:
    """Join the RPC group as a parameter server and answer until every worker shuts down.

    A graceful `rpc.shutdown` waits for the trainer forever; if the trainer dies instead
    (no `stop_servers` first), a heartbeat thread notices and ends this process.
    """
    # Loading the kernels (even cached: a ninja check, seconds under load) in the first
    # request instead would count against that request's RPC timeout.
    kernels.load()
    rpc.init_rpc(name, rank=rank, world_size=world_size, rpc_backend_options=options)
    threading.Thread(target=_watch, args=(name, trainer, heartbeat_s, options.rpc_timeout), daemon=True).start()
    rpc.shutdown()  # graceful: blocks until the trainer shuts down too


def _watch(name: str, trainer: str, every: float, timeout: float) -> None:
    import os
    import sys

    while not _STOPPING.wait(every):
        try:  # a builtin op: answered without the trainer's GIL
            rpc.rpc_sync(trainer, torch.add, args=(torch.zeros(()), 1), timeout=timeout)
        except Exception as err:
            if _STOPPING.is_set():
                return
            print(
                f"parameter server {name}: trainer {trainer!r} is gone ({str(err).strip().splitlines()[0]}); exiting",
                file=sys.stderr,
                flush=True,
            )
            os._exit(1)


def stop_servers(servers: list[str]) -> None:
    """Tell the servers that the trainer shuts down next (call before `rpc.shutdown()`)."""
    for future in [rpc.rpc_async(server, _stopping) for server in servers]:
        future.wait()


# --- the trainer side ------------------------------------------------------------------------

_KEYS = itertools.count()


def _compact(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor that owns just its bytes: RPC sends a view's whole storage."""
    tensor = tensor.contiguous()
    if tensor.untyped_storage().nbytes() != tensor.nbytes:
        tensor = tensor.clone()
    return tensor


class RemoteLookup(torch.autograd.Function):
    """Forward: the remote lookups. Backward: the remote updates (no gradient flows on)."""

    @staticmethod
    def forward(ctx, anchor, arch, indices, offsets):
        token = arch._next_token()
        ctx.arch, ctx.token = arch, token
        return arch._remote_pooled(indices, offsets, token)

    @staticmethod
    def backward(ctx, grad):
        ctx.arch._remote_update(ctx.token, grad)
        return None, None, None, None


class RemoteSparseArch(SparseArch):
    name = "remote-ps"
    placement = "remote"
    kernel_path = "rpc"

    def __init__(self, cfg: Config, servers: list[str], deferred: bool = True, timeout: float | None = None) -> None:
        super().__init__(TableSpec.of(cfg))
        if not servers:
            raise ValueError("RemoteSparseArch needs at least one server")
        self.servers, self.deferred = list(servers), deferred
        self.optimizer = cfg.train.optimizer
        self.timeout = rpc.get_rpc_timeout() if timeout is None else timeout
        num_tables = len(self.table_rows)
        self.owned = [list(range(s, num_tables, len(servers))) for s in range(len(servers))]
        self.owned = [tables for tables in self.owned if tables]
        self.servers = self.servers[: len(self.owned)]  # more servers than tables: the rest idle
        self.local_starts = []
        for tables in self.owned:
            rows = [self.table_rows[t] for t in tables]
            self.local_starts.append([0, *itertools.accumulate(rows)][:-1])
        self.key = f"{rpc.get_worker_info().name}:{next(_KEYS)}"
        self.anchor = torch.zeros((), requires_grad=True)
        self._tokens = itertools.count()
        self._pending: list[tuple[int, torch.futures.Future]] = []
        self._reset_stats()
        futures = [
            rpc.rpc_async(server, _build_shard, args=(self.key, cfg, tables), timeout=self.timeout)
            for server, tables in zip(self.servers, self.owned, strict=True)
        ]
        for s, future in enumerate(futures):
            self._wait(s, future, "building its shard")

    # -- the SparseArch interface --

    def forward(self, indices: list[torch.Tensor], offsets: list[torch.Tensor]) -> torch.Tensor:
        if torch.is_grad_enabled():
            return RemoteLookup.apply(self.anchor, self, indices, offsets)
        return self._remote_pooled(indices, offsets, None)

    def tables(self) -> list[torch.Tensor]:
        self.flush()
        futures = [rpc.rpc_async(server, _weights, args=(self.key,), timeout=self.timeout) for server in self.servers]
        out: list[torch.Tensor | None] = [None] * len(self.table_rows)
        for s, future in enumerate(futures):
            weights = self._wait(s, future, "sending its tables")
            rows = [self.table_rows[t] for t in self.owned[s]]
            for table, part in zip(self.owned[s], weights.split(rows), strict=True):
                out[table] = part
        return out

    def accumulators(self) -> list[torch.Tensor] | None:
        """Every table's row-wise Adagrad accumulator, in table order (None under SGD)."""
        if self.optimizer != "rowwise_adagrad":
            return None
        self.flush()
        futures = [rpc.rpc_async(s, _accumulators, args=(self.key,), timeout=self.timeout) for s in self.servers]
        out: list[torch.Tensor | None] = [None] * len(self.table_rows)
        for s, future in enumerate(futures):
            for table, part in zip(self.owned[s], self._wait(s, future, "sending its accumulators"), strict=True):
                out[table] = part
        return out

    def get_extra_state(self) -> dict:
        # Checkpoints hold the remote tables, and the optimizer state that resumes them exactly.
        sums = self.accumulators()
        return {"tables": self.tables(), **({"accumulators": sums} if sums is not None else {})}

    def set_extra_state(self, state: dict) -> None:
        if self.optimizer == "rowwise_adagrad" and "accumulators" not in state:
            raise UsageError("this checkpoint has no row-wise Adagrad accumulators: it cannot resume exactly")
        self._send_each(_set_weights, state["tables"], "loading its tables")
        if "accumulators" in state:
            self._send_each(_set_accumulators, state["accumulators"], "loading its accumulators")

    def _send_each(self, function: Callable, per_table: list[torch.Tensor], what: str) -> None:
        """`function(key, its tables' tensors)` on every server, waited for."""
        futures = [
            rpc.rpc_async(server, function, args=(self.key, [_compact(per_table[t]) for t in tables]))
            for server, tables in zip(self.servers, self.owned, strict=True)
        ]
        for s, future in enumerate(futures):
            self._wait(s, future, what)

    def counters(self) -> dict[str, float]:
        steps = max(self._steps, 1)
        out = {
            "remote_ms_per_step": self._rpc_ms / steps,  # trainer time blocked on RPC
            "remote_lookup_ms_per_step": self._lookup_ms / steps,
            "remote_update_ms_per_step": (self._rpc_ms - self._lookup_ms) / steps,  # sending + waiting
            "remote_server_ms_per_step": self._server_ms / steps,  # summed over servers
            "remote_bytes_sent_per_step": self._sent / steps,
            "remote_bytes_received_per_step": self._received / steps,
            "remote_bytes_per_step": (self._sent + self._received) / steps,
        }
        self._reset_stats()
        return out

    def flush(self) -> None:
        """Wait for the updates still in flight (deferred mode)."""
        if not self._pending:
            return
        start = time.perf_counter()
        pending, self._pending = self._pending, []
        for s, future in pending:
            self._server_ms += self._wait(s, future, "applying the update")
        self._rpc_ms += (time.perf_counter() - start) * 1e3

    def close(self) -> None:
        """Free the servers' shards (the RPC group stays up)."""
        self.flush()
        futures = [
            rpc.rpc_async(server, _drop_shard, args=(self.key,), timeout=self.timeout) for server in self.servers
        ]
        for s, future in enumerate(futures):
            self._wait(s, future, "dropping its shard")

    # -- the RPC traffic --

    def _next_token(self) -> int:
        return next(self._tokens)

    def _remote_pooled(self, indices, offsets, token: int | None) -> torch.Tensor:
        self.flush()  # the previous step's updates land before these rows are read
        start = time.perf_counter()
        batch = offsets[0].numel()
        futures = []
        for server, tables, starts in zip(self.servers, self.owned, self.local_starts, strict=True):
            ids, bag_starts = batched_ids([indices[t] for t in tables], [offsets[t] for t in tables], starts)
            ids, bag_starts = _compact(ids), _compact(bag_starts)
            self._sent += ids.nbytes + bag_starts.nbytes
            futures.append(
                rpc.rpc_async(server, _lookup, args=(self.key, token, ids, bag_starts, batch), timeout=self.timeout)
            )
        parts = []
        for s, future in enumerate(futures):
            pooled, server_ms = self._wait(s, future, "looking up")
            self._received += pooled.nbytes
            self._server_ms += server_ms
            parts.append(pooled)
        if len(parts) == 1:
            out = parts[0]
        else:
            out = parts[0].new_empty(batch, len(self.table_rows), self.dim)
            for tables, pooled in zip(self.owned, parts, strict=True):
                out[:, tables] = pooled
        self._rpc_ms += (time.perf_counter() - start) * 1e3
        self._lookup_ms += (time.perf_counter() - start) * 1e3
        if token is not None:
            self._steps += 1
        return out

    def _remote_update(self, token: int, grad: torch.Tensor) -> None:
        start = time.perf_counter()
        grad = grad.float()
        futures = []
        for s, (server, tables) in enumerate(zip(self.servers, self.owned, strict=True)):
            part = _compact(grad if len(self.owned) == 1 else grad[:, tables])
            self._sent += part.nbytes
            futures.append((s, rpc.rpc_async(server, _update, args=(self.key, token, part), timeout=self.timeout)))
        self._rpc_ms += (time.perf_counter() - start) * 1e3
        self._pending += futures
        if not self.deferred:
            self.flush()

    def _wait(self, s: int, future: torch.futures.Future, what: str):
        try:
            return future.wait()
        except Exception as err:
            # Forget the rest of the in-flight updates: their server state is unknown now.
            self._pending = []
            tables = self.owned[s]
            raise RemoteServerError(
                f"parameter server {self.servers[s]!r} (tables {tables}) failed while {what}: "
                f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
            ) from err

    def _reset_stats(self) -> None:
        self._steps = 0
        self._rpc_ms = self._lookup_ms = self._server_ms = 0.0
        self._sent = self._received = 0


def remote_sparse_arch(
    cfg: Config, generator: torch.Generator, servers: list[str], deferred: bool = True
) -> RemoteSparseArch:
    """What `make_sparse_arch` would return for the remote placement.

    Advances `generator` past the tables exactly as the local arch's init does (one table
    at a time, none kept), so the dense MLPs drawn after it get the single-process values.
    """
    draw_tables(cfg.model.table_rows, cfg.model.embedding_dim, generator)
    return RemoteSparseArch(cfg, servers, deferred=deferred)


def run(timeout_s: float, work: Callable[[ArchFactory], None]) -> None:
    """Under torchrun: rank 0 runs `work` with tables on ranks 1.., which serve them until it ends.

    `work` gets what builds the remote sparse arch in place of `make_sparse_arch`.
    """

    if not under_torchrun():
        raise UsageError("--remote-tables runs under torchrun: torchrun --nproc_per_node 2 -m dlrm_study ...")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if world < 2:
        raise UsageError("--remote-tables needs at least 2 processes: a trainer and a parameter server")
    if timeout_s <= 0:
        raise UsageError(f"--timeout-s must be positive, got {timeout_s}")
    # torchrun's agent hosts the store on MASTER_PORT: env:// joins it, no second port.
    options = rpc.TensorPipeRpcBackendOptions(init_method="env://", rpc_timeout=timeout_s, num_worker_threads=4)
    servers = [f"ps{r}" for r in range(1, world)]
    if rank > 0:
        serve(f"ps{rank}", rank, world, options)
        return
    rpc.init_rpc("trainer", rank=0, world_size=world, rpc_backend_options=options)
    try:
        work(lambda cfg, generator, device: remote_sparse_arch(cfg, generator, servers))
    except RemoteServerError as err:  # a server died or stopped answering: say which, end non-zero
        print(f"dlrm-study: {str(err)[:300]}", file=sys.stderr, flush=True)
        os._exit(EXIT_PEER_FAILED)  # no graceful shutdown: it would wait for the failed server
    except BaseException:
        rpc.shutdown(graceful=False)
        raise
    stop_servers(servers)
    rpc.shutdown()
