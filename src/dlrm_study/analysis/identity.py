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
    """Each record's identity (every IDENTITY field as stored text, "" for a column the frame lacks, as the
    store writes a field its record did not have), indexed as the frame: one record has one identity in
    every frame that holds it, whichever other files' columns that frame was pooled with."""
    if frame.empty or not any(c in frame for c in IDENTITY):
        return pd.Series([f"row {i}" for i in frame.index], index=frame.index, dtype=object)
    text = pd.DataFrame({c: frame[c].map(store.text) if c in frame else "" for c in IDENTITY}, index=frame.index)
    return pd.Series(["\x1f".join(row) for row in text.itertuples(index=False)], index=frame.index, dtype=object)
