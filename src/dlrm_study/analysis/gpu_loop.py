"""Which GPU records the old, dispatch-bound GPU loop wrote, so that wherever they are shown they say so.

Before the GPU step was captured as a CUDA graph (`train.gpu`, records with a `capture` of `graph` or
`eager`), the gpu loop launched its kernels one by one from Python: in its first H200 session the step
time hardly moved with the model (docs/results.md gives its median from the records), so its samples/s
measure the host's dispatch more than the GPU. Those records carry no `capture`. They stay in the records
and are scored against the pre-registered predictions, but every figure or line that shows them names them.
"""

import pandas as pd

from dlrm_study.config import Loop
from dlrm_study.records import columns as col

OLD_LOOP = "the old GPU loop: dispatch-bound (each kernel launched from Python), before CUDA graphs"


def old_loop(records: pd.DataFrame) -> pd.Series:
    """Whether each record is of the old gpu loop (a gpu-loop record that names no capture)."""
    if records.empty or col.LOOP not in records:
        return pd.Series(False, index=records.index)
    on_gpu = records[col.LOOP].astype(str) == Loop.GPU.value
    captured = records[col.CAPTURE].fillna("").astype(str) != "" if col.CAPTURE in records else False
    return on_gpu & ~captured


def label(records: pd.DataFrame) -> str:
    """` (the old GPU loop: ...)` where any of the records is the old loop's, else ``."""
    return f" ({OLD_LOOP})" if old_loop(records).any() else ""
