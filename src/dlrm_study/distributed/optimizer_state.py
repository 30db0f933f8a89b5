"""Row-wise Adagrad accumulators table by table, wherever a sparse arch keeps them.

Distributed and remote-table checkpoints hold the tables split over processes; their
accumulators (one value per row) travel with them, keyed by table, and land where a
single process keeps them: the fused arch's `momentum` buffer (tables stacked) or the
reference arch's optimizer state (one tensor per table). So a checkpoint resumes exactly
on any number of ranks, or in one process. SGD keeps no state: None.
"""

import torch

from dlrm_study.embeddings import FusedCPUSparseArch, ReferenceSparseArch, SparseArch
from dlrm_study.embeddings.reference import RowWiseSparseAdagrad


def accumulators(arch: SparseArch) -> list[torch.Tensor] | None:
    """Each table's accumulator, (rows,) in table order (copies); None when the arch keeps none."""
    if isinstance(arch, FusedCPUSparseArch):
        if arch.optimizer != "rowwise_adagrad":
            return None
        return [part.clone() for part in arch.momentum.split(arch.table_rows)]
    if isinstance(arch, ReferenceSparseArch):
        if not isinstance(arch.optimizer, RowWiseSparseAdagrad):
            return None
        # The optimizer makes a row's accumulator at its first update: none yet is all zeros.
        state = arch.optimizer.state
        return [state[bag.weight].get("momentum", torch.zeros(rows)).clone() for bag, rows in _bags(arch)]
    raise TypeError(f"no row-wise optimizer state known for the {type(arch).__name__}")


@torch.no_grad()
def set_accumulators(arch: SparseArch, values: list[torch.Tensor]) -> None:
    """Overwrite each table's accumulator with `values` (as `accumulators` returns them)."""
    if isinstance(arch, FusedCPUSparseArch) and arch.optimizer == "rowwise_adagrad":
        arch.momentum.copy_(torch.cat(values))  # in place: the buffer may sit on huge pages
    elif isinstance(arch, ReferenceSparseArch) and isinstance(arch.optimizer, RowWiseSparseAdagrad):
        for (bag, _), value in zip(_bags(arch), values, strict=True):
            arch.optimizer.state[bag.weight]["momentum"] = value.clone()
    else:
        raise TypeError(f"the {type(arch).__name__} keeps no row-wise Adagrad accumulators")


def _bags(arch: ReferenceSparseArch):
    return zip(arch.bags, arch.table_rows, strict=True)
