"""TODO docstring (dlrm_study.analysis.placement)."""

from pathlib import Path

import pandas as pd

from dlrm_study.records import columns as col
from dlrm_study.records import store
from dlrm_study.studies.sensitivity import GPU_RECORDS


def placement_records(out: Path, study: str) -> pd.DataFrame:
    """One of the GPU script's placement sweeps (gpu-placements, -skew, -size), `x` its knob."""
    path = out / GPU_RECORDS
    frame = store.load(path) if path.exists() else pd.DataFrame()
    if frame.empty or col.STUDY not in frame:
        return frame
    # The skew sweep leaves out Zipf 1.05: gpu-placements measured that point, the same config.
    studies = {study, "gpu-placements"} if study.endswith("-skew") else {study}
    frame = frame[frame[col.STUDY].isin(studies) & frame[col.ERROR].isna()].copy()
    if study.endswith("-skew"):
        skew = frame[frame[col.STUDY] == study]
        frame = frame[frame["model.table_rows"].isin(set(skew["model.table_rows"]))]
    frame = frame.sort_values(col.TIMESTAMP).drop_duplicates(
        [col.VARIANT, col.CONFIG_HASH, col.MACHINE, col.REPEAT], keep="last"
    )
    if study.endswith("-skew"):
        frame["x"], frame["knob"] = frame["data.zipf_alpha"], "Zipf exponent of the ids"
    elif study.endswith("-size"):
        frame["x"] = frame["model.table_rows"].map(lambda rows: float(str(rows).split("-")[0]))
        frame["knob"] = "rows per table"
    return frame
