"""Batches: synthetic (teacher-labelled) or read from Criteo click logs."""

from dlrm_study.config import Config
from dlrm_study.data.batch import Batch
from dlrm_study.data.criteo import CriteoData
from dlrm_study.data.synthetic import SyntheticData

__all__ = ["Batch", "CriteoData", "SyntheticData", "make_data"]


def make_data(cfg: Config, stream: str = "train") -> SyntheticData | CriteoData:
    """The data source a config names, for its "train" or "eval" stream."""
    if cfg.data.source == "criteo":
        return CriteoData(cfg, stream)
    return SyntheticData(cfg, stream)
