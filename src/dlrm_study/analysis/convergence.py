"""Notebook 07's records: the convergence study's windowed losses and held-out evaluations."""

from pathlib import Path

import pandas as pd

from dlrm_study.analysis.readers import NoRecords, check_cells, config_key, labelled
from dlrm_study.config.variants import CPU_LOOPS
from dlrm_study.records import columns as col
from dlrm_study.records import store
from dlrm_study.records.machine import select
from dlrm_study.studies.convergence import RECORDS, accuracy_configs, variant_config
from dlrm_study.studies.profiles import CONVERGENCE_SEEDS


def convergence_records(profile: str, out: Path, machine: str | None = "this") -> pd.DataFrame:
    """The stored convergence records of a profile, for the variants' current configs, on one machine."""
    path = out / RECORDS
    if not path.exists():
        raise NoRecords(f"no records yet: {path} does not exist (run with measure=True)")
    seeds = range(CONVERGENCE_SEEDS["full"])
    labels = {(config_key(variant_config(profile, v, s)), v): f"seed {s}" for v in CPU_LOOPS for s in seeds}
    frame = select(labelled(store.load(path), labels, [f"convergence-{profile}"]), machine)
    return check_cells(frame, (col.MACHINE, col.RUN_ID, col.VARIANT, "train.seed", col.KIND, col.STEP))


def accuracy_records(profile: str, out: Path, machine: str | None = "this") -> pd.DataFrame:
    """S3's accuracy study on the timed presets (`studies.convergence.run_accuracy`), on one machine."""
    path = out / RECORDS
    if not path.exists():
        raise NoRecords(f"no records yet: {path} does not exist (run with measure=True)")
    labels = {(config_key(cfg), v): f"{cfg.name} seed {s}" for v, s, cfg in accuracy_configs(profile)}
    frame = select(labelled(store.load(path), labels, [f"accuracy-{profile}"]), machine)
    return check_cells(frame, (col.MACHINE, col.RUN_ID, col.POINT, col.VARIANT, col.KIND, col.STEP))
