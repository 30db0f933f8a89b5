"""Notebook 07's records: the convergence study's windowed losses and held-out evaluations."""

from pathlib import Path

import pandas as pd

from dlrm_study.config.variants import CPU_LOOPS
from dlrm_study.errors import UsageError
from dlrm_study.records import columns as col
from dlrm_study.records import store
from dlrm_study.records.machine import select
from dlrm_study.studies.convergence import variant_config
from dlrm_study.studies.profiles import CONVERGENCE_SEEDS


def convergence_records(profile: str, out: Path, machine: str | None = "this") -> pd.DataFrame:
    """The stored convergence records of a profile, for the variants' current configs, on one machine."""
    path = out / "convergence.csv"
    if not path.exists():
        raise UsageError(f"no records yet: {path} does not exist (run with measure=True)")
    frame = store.load(path)
    seeds = range(CONVERGENCE_SEEDS["full"])
    current = {variant_config(profile, v, s).hash() for v in CPU_LOOPS for s in seeds}
    frame = select(frame[frame[col.CONFIG_HASH].isin(current)], machine)
    keys = [col.MACHINE, col.VARIANT, "train.seed", col.KIND, col.STEP]
    return frame.sort_values(col.TIMESTAMP).drop_duplicates(keys, keep="last")
