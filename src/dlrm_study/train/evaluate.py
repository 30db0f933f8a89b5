"""Evaluation metrics."""

from collections.abc import Iterable

import torch
from torch.nn import functional as F

from dlrm_study.data import Batch
from dlrm_study.errors import UsageError
from dlrm_study.train.run import Run, place


def auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Area under the ROC curve (Mann-Whitney U, tied scores share their mean rank)."""
    scores, labels = scores.double().flatten(), labels.double().flatten()
    positives = labels.sum().item()
    negatives = labels.numel() - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    order = torch.argsort(scores)
    sorted_scores = scores[order]
    _, counts = torch.unique_consecutive(sorted_scores, return_counts=True)
    ends = torch.cumsum(counts, 0).double()
    mean_rank = ends - (counts.double() - 1) / 2  # 1-based mean rank of each tie group
    ranks = torch.empty_like(scores)
    ranks[order] = torch.repeat_interleave(mean_rank, counts)
    rank_sum = ranks[labels == 1].sum().item()
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


@torch.no_grad()
def evaluate(run: Run, batches: Iterable[Batch]) -> dict[str, float]:
    """AUC, log loss and accuracy over held-out batches."""
    run.model.eval()
    scores, labels = [], []
    for batch in batches:
        batch = place(run, batch)
        with torch.autocast(run.device.type, dtype=torch.bfloat16, enabled=run.autocast):
            scores.append(run.model(batch).float().cpu())
        labels.append(batch.labels.cpu())
    run.model.train()
    if not scores:
        raise UsageError("no evaluation batches: the data source produced none")
    s, y = torch.cat(scores), torch.cat(labels)
    return {
        "auc": auc(s, y),
        "logloss": F.binary_cross_entropy_with_logits(s, y).item(),
        "accuracy": ((s > 0).float() == y).float().mean().item(),
    }
