"""A record's identity: what tells one stored record from every other, whichever reader or frame holds it.

Two readers of one file (the knob sweeps that share the GPU records) hold the same record twice; counting
records by identity, not by rows, counts it once.
"""

import pandas as pd

from dlrm_study.records import columns as col
from dlrm_study.records import store

IDENTITY = (col.STUDY, col.MACHINE, col.RUN_ID, col.THREADS, col.TIMESTAMP, col.CONFIG_HASH, col.VARIANT,
            col.REPEAT, col.KIND, col.STEP, col.INVOCATION)  # fmt: skip
RECORDS = "records"  # a pair's column: the identities of the records it was made of


def record_ids(frame: pd.DataFrame) -> pd.Series:
    """Each record's identity (its IDENTITY fields as stored text), indexed as the frame."""
    columns = [c for c in IDENTITY if c in frame]
    if frame.empty or not columns:
        return pd.Series([f"row {i}" for i in frame.index], index=frame.index, dtype=object)
    text = frame[columns].map(store.text)
    return text.apply(lambda row: "\x1f".join(row), axis=1).astype(object)
