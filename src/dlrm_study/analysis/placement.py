"""Notebook 05's records: the cache's hit rates, the GPU placements' sweeps, local against remote tables; and
what of host memory's loss the cache wins back, per repeat (`recovery`)."""

from pathlib import Path

import pandas as pd

from dlrm_study.analysis import stats
from dlrm_study.analysis.identity import RECORDS
from dlrm_study.analysis.readers import FAILED, NoRecords, check_cells, config_key, labelled, leave_out
from dlrm_study.plans.placement import (
    CACHE_RECORDS,
    REMOTE_RECORDS,
    TABLES,
    cache_configs,
    remote_config,
    steady_variant,
)
from dlrm_study.plans.sensitivity import GPU_RECORDS
from dlrm_study.records import columns as col
from dlrm_study.records import store
from dlrm_study.records.machine import select


def failed_only(out: Path, study: str, machine: str) -> dict[str, int]:
    """The variants of a placement study that `machine` never measured, only failed: their error records, counted
    (a figure says a bar is missing because its runs failed, not because it was not run)."""
    path = out / GPU_RECORDS
    frame = store.load(path) if path.exists() else pd.DataFrame()
    if frame.empty or col.STUDY not in frame:
        return {}
    mine = frame[(frame[col.STUDY] == study) & (frame[col.MACHINE] == machine)]
    worked = set(mine.loc[mine[col.ERROR].isna(), col.VARIANT])
    failed = mine[mine[col.ERROR].notna() & ~mine[col.VARIANT].isin(worked)]
    return {str(v): int(n) for v, n in failed.groupby(col.VARIANT).size().items()}


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
    """The cache study per quantity (hit rate, rows evicted per batch, batches warmed), readable: a row per
    Zipf exponent, a column per policy and cache size (`LRU 10%`)."""
    shown = rates.assign(
        skew=rates["zipf_alpha"].map(lambda a: f"Zipf {a:g}"),
        cache=[f"{p.upper()} {f:.0%}" for p, f in zip(rates["cache_policy"], rates["cache_fraction"], strict=True)],
    )
    order = sorted(set(shown["cache"]), key=lambda c: (c.split()[0], float(c.split()[1].rstrip("%"))))
    quantities = {
        "hit rate": ("cache_hit_rate", "{:.3f}"),
        "rows evicted per batch": ("evictions_per_batch", "{:,.0f}"),
        "batches warmed": ("warm_batches", "{:,.0f}"),
    }
    tables = {}
    for name, (value, fmt) in quantities.items():
        wide = shown.pivot_table(index="skew", columns="cache", values=value)[order]
        wide.columns.name = None
        tables[name] = wide.map(fmt.format)
    return tables


def remote_table(remote: pd.DataFrame) -> pd.DataFrame:
    """Local against remote tables, medians of repeats: ms per step, samples/s, and for the parameter server
    the trainer's wait on RPC per step and the megabytes it moved per step (`-` where tables are local)."""
    medians = remote.groupby("tables")[[col.MS_MEDIAN, col.SAMPLES_PER_S, "remote_ms_per_step",
                                        "remote_bytes_per_step"]].median()  # fmt: skip
    shown = pd.DataFrame(index=medians.index)
    shown["ms per step"] = medians[col.MS_MEDIAN].map("{:.1f}".format)
    shown["samples/s"] = medians[col.SAMPLES_PER_S].map("{:,.0f}".format)
    shown["RPC wait, ms per step"] = medians["remote_ms_per_step"].map(lambda v: f"{v:.1f}" if v == v else "-")
    shown["MB moved per step"] = medians["remote_bytes_per_step"].map(lambda v: f"{v / 1e6:.1f}" if v == v else "-")
    shown.index.name = None
    return shown


def recovery(host: pd.DataFrame, cached: pd.DataFrame) -> pd.DataFrame:
    """Per repeat, the part of what host memory loses that the cache wins back: (c - h) / (1 - h), with h and
    c host's and cached's ratios over hbm in the same cell; its records are both pairs' records (H4's rule, its
    design's power and its figure read it)."""
    keys = [k for k in stats.CELL if k in host and k in cached]
    if host.empty or cached.empty:
        return pd.DataFrame(columns=[*keys, "ratio", RECORDS])
    both = host.merge(cached, on=keys, suffixes=("_host", "_cached"))
    h, c = both["ratio_host"].astype(float), both["ratio_cached"].astype(float)
    ids = [tuple(dict.fromkeys(a + b)) for a, b in zip(both[f"{RECORDS}_host"], both[f"{RECORDS}_cached"], strict=True)]
    return both[keys].assign(ratio=(c - h) / (1 - h), **{RECORDS: ids})
