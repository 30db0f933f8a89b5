"""Notebook 05's records: the cache's hit rates, the GPU placements' sweeps, local against remote tables."""

from pathlib import Path

import pandas as pd

from dlrm_study.analysis.readers import FAILED, NoRecords, check_cells, config_key, labelled, leave_out
from dlrm_study.records import columns as col
from dlrm_study.records import store
from dlrm_study.records.machine import select
from dlrm_study.studies.placement import (
    CACHE_RECORDS,
    REMOTE_RECORDS,
    TABLES,
    cache_configs,
    remote_config,
    steady_variant,
)
from dlrm_study.studies.sensitivity import GPU_RECORDS


def placement_records(out: Path, study: str) -> pd.DataFrame:
    """One of the GPU script's placement sweeps (gpu-placements, -skew, -size), `x` its knob."""
    path = out / GPU_RECORDS
    frame = store.load(path) if path.exists() else pd.DataFrame()
    if frame.empty or col.STUDY not in frame:
        return frame
    # The skew sweep leaves out Zipf 1.05: gpu-placements measured that point, the same config.
    studies = {study, "gpu-placements"} if study.endswith("-skew") else {study}
    frame = frame[frame[col.STUDY].isin(studies)]
    frame = leave_out(frame, frame[col.ERROR].isna(), FAILED)
    if study.endswith("-skew"):
        skew = frame[frame[col.STUDY] == study]
        frame = frame[frame["model.table_rows"].isin(set(skew["model.table_rows"]))]
    frame = check_cells(frame, (col.MACHINE, col.THREADS, col.RUN_ID, col.CONFIG_HASH, col.VARIANT, col.REPEAT))
    if study.endswith("-skew"):
        frame["x"], frame["knob"] = frame["data.zipf_alpha"], "Zipf exponent of the ids"
    elif study.endswith("-size"):
        frame["x"] = frame["model.table_rows"].map(lambda rows: float(str(rows).split("-")[0]))
        frame["knob"] = "rows per table"
    return frame


def cache_hit_rates(profile: str, out: Path, machine: str | None = "this") -> pd.DataFrame:
    """The cache study's steady-state records of the profile's configs (`studies.placement.measure_cache`)."""
    path = out / CACHE_RECORDS
    if not path.exists():
        raise NoRecords(f"no records yet: {path} does not exist (run with measure=True)")
    configs = cache_configs(profile)
    frame = store.load(path)
    # The steady-state counts only (earlier records, `cached-lru`, counted a cold cache: left out, counted).
    frame = labelled(
        frame, {(config_key(cfg), steady_variant(cfg)): cfg.name for cfg in configs}, [f"cache-hit-rate-{profile}"]
    )
    return check_cells(select(frame, machine), (col.MACHINE, col.RUN_ID, col.CONFIG_HASH, col.VARIANT))


def remote_vs_local(profile: str, out: Path, machine: str | None = "this") -> pd.DataFrame:
    """Local against remote tables (`studies.placement.measure_remote`), `tables` naming where they were."""
    path = out / REMOTE_RECORDS
    if not path.exists():
        raise NoRecords(f"no records yet: {path} does not exist (run with measure=True)")
    cfg = remote_config(profile)
    frame = labelled(store.load(path), {(config_key(cfg), v): cfg.name for v in TABLES}, [f"remote-vs-local-{profile}"])
    frame = check_cells(select(frame, machine))
    return frame.assign(tables=frame[col.VARIANT].map(TABLES))


def cache_tables(rates: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The cache study per quantity (hit rate, evictions per batch, batches warmed): Zipf alpha x policy and size."""
    quantities = ("cache_hit_rate", "evictions_per_batch", "warm_batches")
    columns = ["cache_policy", "cache_fraction"]
    return {name: rates.pivot_table(index="zipf_alpha", columns=columns, values=name) for name in quantities}


def remote_table(remote: pd.DataFrame) -> pd.DataFrame:
    """Local against remote tables: ms per step, samples/s and what the parameter server moved, medians of repeats."""
    quantities = [col.MS_MEDIAN, col.SAMPLES_PER_S, "remote_ms_per_step", "remote_bytes_per_step"]
    return remote.groupby("tables")[quantities].median()
