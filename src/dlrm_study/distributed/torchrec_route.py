"""The same hybrid parallelism done by torchrec: DistributedModelParallel and its planner.

The DLRM's sparse arch becomes an `EmbeddingBagCollection` (made on the meta device, so no
full table is allocated before sharding); torchrec's planner places each table whole on a
rank (table-wise, fbgemm's fused kernel: backward fused with SGD through
`apply_optimizer_in_backward`), and DMP wraps the dense part in DDP. Each rank feeds its
own slice of the global batch. torchrec divides the embedding gradients by the world size
in its all-to-all backward (`comm_ops` gradient division), so the tables take the plain
learning rate and the run equals a single process on the global batch.
"""

import torch
import torch.distributed as dist
from torch.nn import functional as F

from dlrm_study.config import Config
from dlrm_study.data import Batch
from dlrm_study.data.batch import to_kjt
from dlrm_study.distributed.hybrid import DistRun, check_config, check_route
from dlrm_study.distributed.launch import World
from dlrm_study.errors import UsageError
from dlrm_study.model.tables.base import SparseArch, TableSpec
from dlrm_study.train.run import build as build_single

try:
    from torchrec.distributed.comm_ops import get_gradient_division
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.model_parallel import DistributedModelParallel
    from torchrec.distributed.planner import EmbeddingShardingPlanner, Topology
    from torchrec.distributed.planner.types import ParameterConstraints
    from torchrec.distributed.types import ShardingEnv
    from torchrec.modules.embedding_configs import EmbeddingBagConfig, PoolingType
    from torchrec.modules.embedding_modules import EmbeddingBagCollection
    from torchrec.optim.apply_optimizer_in_backward import apply_optimizer_in_backward
    from torchrec.optim.optimizers import in_backward_optimizer_filter
except Exception as err:  # a CUDA fbgemm-gpu build fails to load on the CPU with more than ImportError
    reason = str(err).partition("\n")[0] or type(err).__name__
    raise UsageError(f"--route torchrec needs torchrec and fbgemm-gpu installed ({reason})") from None


class CollectionArch(SparseArch):
    """The sparse arch as an EmbeddingBagCollection, which DMP shards."""

    name = "torchrec-dmp"
    kernel_path = "fbgemm"

    def __init__(self, spec: TableSpec) -> None:
        super().__init__(spec)
        table_rows, dim = spec.rows, spec.dim
        self.keys = [f"t{t}" for t in range(len(table_rows))]
        configs = [
            EmbeddingBagConfig(name=k, embedding_dim=dim, num_embeddings=r, feature_names=[k], pooling=PoolingType.SUM)
            for k, r in zip(self.keys, table_rows, strict=True)
        ]
        self.ebc = EmbeddingBagCollection(configs, device=torch.device("meta"))

    def forward(self, indices: list[torch.Tensor], offsets: list[torch.Tensor]) -> torch.Tensor:
        pooled = self.ebc(to_kjt(self.keys, indices, offsets)).to_dict()  # sharded: keyed in plan order
        return torch.stack([pooled[k] for k in self.keys], dim=1)


class TorchrecRun(DistRun):
    def shards(self) -> dict[tuple[int, int], torch.Tensor]:
        """This rank's table shards, keyed by (table, first row)."""
        state = self.model.state_dict()
        out = {}
        for t in range(self.cfg.model.num_tables):
            for shard in state[f"sparse_arch.ebc.embedding_bags.t{t}.weight"].local_shards():
                out[(t, shard.metadata.shard_offsets[0])] = shard.tensor.detach().clone()
        return out

    def train_step(self, batch: Batch, phases: dict[str, float] | None = None) -> float:
        return train_step(self, batch, phases)

    def gather_tables(self) -> list[torch.Tensor] | None:
        parts: list = [None] * self.world.size if self.world.is_main else []
        dist.gather_object(self.shards(), parts if self.world.is_main else None)
        if not self.world.is_main:
            return None
        tables = [[] for _ in range(self.cfg.model.num_tables)]
        for part in parts:
            for (t, first), weight in part.items():
                tables[t].append((first, weight))
        return [torch.cat([w for _, w in sorted(chunks, key=lambda c: c[0])]) for chunks in tables]

    def gather_accumulators(self) -> list[torch.Tensor] | None:
        return None  # fused SGD keeps no state (`check_route` refuses any other optimizer)


def build(cfg: Config, world: World, initial: dict | None = None) -> TorchrecRun:
    """The single-process model, its tables handed to a sharded EmbeddingBagCollection."""

    check_config(cfg, world)
    check_route(cfg, "torchrec")
    dlrm = build_single(Config.from_dict(cfg.to_dict())).model
    tables = initial["tables"] if initial else [w.clone() for w in dlrm.sparse_arch.tables()]
    if initial:
        dlrm.load_state_dict(initial["dense"], strict=False)
    dlrm.sparse_arch = CollectionArch(TableSpec.of(cfg))
    ebc = dlrm.sparse_arch.ebc
    apply_optimizer_in_backward(torch.optim.SGD, ebc.parameters(), {"lr": cfg.train.learning_rate})
    if not get_gradient_division():
        raise UsageError("torchrec's gradient division is off: the tables would not match a single process")
    sharder = EmbeddingBagCollectionSharder()
    constraints = {
        key: ParameterConstraints(sharding_types=["table_wise"], compute_kernels=["fused"])
        for key in dlrm.sparse_arch.keys
    }
    planner = EmbeddingShardingPlanner(
        topology=Topology(world_size=world.size, compute_device="cpu", local_world_size=world.size),
        batch_size=cfg.train.batch_size // world.size,
        constraints=constraints,
    )
    plan = planner.collective_plan(dlrm, [sharder], dist.GroupMember.WORLD)
    env = ShardingEnv.from_process_group(dist.GroupMember.WORLD)
    model = DistributedModelParallel(dlrm, env=env, device=torch.device("cpu"), plan=plan, sharders=[sharder])
    with torch.no_grad():  # the shards are views of fbgemm's weights: copy the initial tables in
        state = model.state_dict()
        for t, weight in enumerate(tables):
            for shard in state[f"sparse_arch.ebc.embedding_bags.t{t}.weight"].local_shards():
                (r, c), (nr, nc) = shard.metadata.shard_offsets, shard.metadata.shard_sizes
                shard.tensor.copy_(weight[r : r + nr, c : c + nc])
    dense = [p for _, p in in_backward_optimizer_filter(model.named_parameters())]
    optimizer = torch.optim.SGD(dense, lr=cfg.train.learning_rate)
    if initial:
        optimizer.load_state_dict(initial["dense_optimizer"])
    return TorchrecRun(cfg, world, model, dlrm, optimizer, route="torchrec")


def local_slice(batch: Batch, lo: int, hi: int) -> Batch:
    """Samples [lo, hi) of a batch, their bags re-based to start at 0."""
    indices, offsets = [], []
    for ids, offs in zip(batch.indices, batch.offsets, strict=True):
        ends = torch.cat([offs[1:], offs.new_tensor([ids.numel()])])
        first, last = int(offs[lo]), int(ends[hi - 1])
        indices.append(ids[first:last])
        offsets.append(offs[lo:hi] - first)
    return Batch(batch.dense[lo:hi], indices, offsets, batch.labels[lo:hi])


def train_step(run: TorchrecRun, batch: Batch, phases: dict[str, float] | None = None) -> float:
    """One step on the global batch (this rank's slice of it); the global mean loss."""
    run.world.beat()  # entering the step's collectives
    rank, size = run.world.rank, run.local_batch
    mine = local_slice(batch, rank * size, (rank + 1) * size)
    loss = F.binary_cross_entropy_with_logits(run.model(mine), mine.labels)
    run.dense_optimizer.zero_grad(set_to_none=True)
    loss.backward()  # tables updated inside backward (fused SGD)
    run.dense_optimizer.step()
    total = loss.detach().clone()
    dist.all_reduce(total)
    run.step += 1
    run.world.beat()  # this step's done
    return total.item() / run.world.size
