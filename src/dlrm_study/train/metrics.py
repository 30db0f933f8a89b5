"""Evaluation metrics."""

import torch


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
