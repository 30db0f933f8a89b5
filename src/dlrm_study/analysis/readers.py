"""The stored records of a sweep's current points, labelled with the sweep's point names."""

from pathlib import Path

import pandas as pd

from dlrm_study.errors import UsageError
from dlrm_study.measure.sweep import Sweep, plan
from dlrm_study.records import columns as col
from dlrm_study.records import store
from dlrm_study.records.machine import select


def sweep_records(sweep: Sweep, machine: str | None = "this") -> pd.DataFrame:
    """The stored measurements of the sweep's current points (errors left out), on one machine.

    `machine`: "this" (the default: this machine's key), a key, or None for every machine.
    Whichever study measured a record, it carries this sweep's `point` label here. Records of
    a config since changed stay in the file, out of the frame.
    """
    path = Path(sweep.out)
    if not path.exists():
        raise UsageError(f"no records yet: {path} does not exist (run the sweep, or measure=True)")
    labels = {(cfg.hash(), v): label for label, cfgs in plan(sweep, here=False)[0] for v, cfg in cfgs.items()}
    frame = store.load(path)
    if frame.empty:
        return frame
    pairs = list(zip(frame[col.CONFIG_HASH].astype(str), frame[col.VARIANT].astype(str), strict=True))
    frame = frame[[pair in labels for pair in pairs]].copy()
    frame[col.POINT] = [labels[pair] for pair in zip(frame[col.CONFIG_HASH], frame[col.VARIANT], strict=True)]
    frame[col.GRID] = frame[col.POINT]
    frame = select(frame, machine)
    if col.ERROR in frame:
        frame = frame[frame[col.ERROR].isna()]
    keys = [col.VARIANT, col.CONFIG_HASH, col.MACHINE, col.REPEAT]
    return frame.sort_values(col.TIMESTAMP).drop_duplicates(keys, keep="last")
