"""Batches: synthetic (teacher-labelled) or read from Criteo click logs; a benchmark's ring of them (`ring`)."""

from dlrm_study.config import Config
from dlrm_study.data.batch import Batch, StagedBatch, stage
from dlrm_study.data.criteo import CriteoData
from dlrm_study.data.synthetic import SyntheticData

__all__ = ["Batch", "CriteoData", "StagedBatch", "SyntheticData", "make_data", "stage"]


def make_data(cfg: Config, stream: str = "train") -> SyntheticData | CriteoData:
    """The data source a config names, for its "train" or "eval" stream."""
    if cfg.data.source == "criteo":
        return CriteoData(cfg, stream)
    return SyntheticData(cfg, stream)
