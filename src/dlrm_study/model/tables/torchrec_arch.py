"""The torchrec peer: `FusedEmbeddingBagCollection`, i.e. fbgemm's table-batched embedding (TBE).

All tables live in one fbgemm TBE (one forward kernel, sum pooling); its backward
deduplicates the ids and applies the optimizer (exact SGD or exact row-wise Adagrad)
to the touched rows in place, so no gradient tensor is made and `update()` is a no-op.
"""

import logging

import torch

from dlrm_study.data.batch import to_kjt
from dlrm_study.errors import UsageError
from dlrm_study.model.tables.base import SparseArch, TableSpec, uniform_table

try:
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation
    from torchrec.modules.embedding_configs import EmbeddingBagConfig, PoolingType
    from torchrec.modules.fused_embedding_modules import FusedEmbeddingBagCollection
    from torchrec.optim import RowWiseAdagrad
except Exception as err:  # not only ImportError: a CUDA fbgemm-gpu build fails to load its libraries on CPU
    reason = str(err).partition("\n")[0] or type(err).__name__
    raise UsageError(f"--loop torchrec needs torchrec and fbgemm-gpu-cpu installed ({reason})") from None

# torchrec asks torch.fx whether it is tracing, which warns once per process about that API's
# meaning under torch.export; nothing here traces, so the warning is noise in every output.
logging.getLogger("torch.fx._symbolic_trace").setLevel(logging.ERROR)

ADAGRAD_EPS = 1e-8
# torchrec's compute kernels for the gpu loop's torchrec placements -> where fbgemm keeps the tables.
LOCATIONS = {
    "fused": EmbeddingLocation.DEVICE,
    "fused_uvm": EmbeddingLocation.MANAGED,
    "fused_uvm_caching": EmbeddingLocation.MANAGED_CACHING,
}


class TorchrecSparseArch(SparseArch):
    name = "torchrec-fused"
    kernel_path = "fbgemm"

    def __init__(self, spec: TableSpec, generator: torch.Generator, compute_kernel: str = "fused") -> None:
        super().__init__(spec)
        table_rows, dim, lr, optimizer = spec.rows, spec.dim, spec.lr, spec.optimizer
        self.device = spec.device
        location = None
        if self.device.type == "cuda":  # fbgemm-gpu's CUDA TBE, tables where the kernel name says
            self.name, self.placement = f"torchrec-{compute_kernel}", compute_kernel
            location = LOCATIONS[compute_kernel]
        self.keys = [f"t{t}" for t in range(len(table_rows))]  # the keys of `Batch.to_kjt()`
        configs = [
            EmbeddingBagConfig(
                name=key, embedding_dim=dim, num_embeddings=rows, feature_names=[key], pooling=PoolingType.SUM
            )
            for key, rows in zip(self.keys, table_rows, strict=True)
        ]
        # torchrec maps these to fbgemm's EXACT_SGD / EXACT_ROWWISE_ADAGRAD; the row-wise one is
        # m[r] += mean(g^2), w[r] -= lr * g / (sqrt(m[r]) + eps), as the reference's RowWiseSparseAdagrad.
        if optimizer == "rowwise_adagrad":
            optimizer_type, kwargs = RowWiseAdagrad, {"lr": lr, "eps": ADAGRAD_EPS}
        elif optimizer == "sgd":
            optimizer_type, kwargs = torch.optim.SGD, {"lr": lr}
        else:
            raise ValueError(f"torchrec arch has no optimizer {optimizer!r}")
        # FEBC initialises its tables from the global RNG; keep that from shifting anything else.
        with torch.random.fork_rng(devices=[]):
            self.ebc = FusedEmbeddingBagCollection(
                configs, optimizer_type=optimizer_type, optimizer_kwargs=kwargs, device=self.device, location=location
            )
        with torch.no_grad():
            for key, rows in zip(self.keys, table_rows, strict=True):
                # The FEBC parameters are views of the TBE's weights: writing them writes the tables.
                self.ebc.embedding_bags[key].weight.copy_(uniform_table(rows, dim, generator).to(self.device))

    def forward(self, indices: list[torch.Tensor], offsets: list[torch.Tensor]) -> torch.Tensor:
        batch = offsets[0].numel()
        kjt = to_kjt(self.keys, indices, offsets).to(self.device)
        return self.ebc(kjt).values().view(batch, len(self.keys), self.dim)

    def get_extra_state(self) -> dict:
        # The row-wise Adagrad momentum lives in the TBE, outside the module's parameters and buffers.
        return self.ebc.fused_optimizer().state_dict()

    def set_extra_state(self, state: dict) -> None:
        self.ebc.fused_optimizer().load_state_dict(state)

    def tables(self) -> list[torch.Tensor]:
        return [self.ebc.embedding_bags[key].weight.detach().cpu() for key in self.keys]
