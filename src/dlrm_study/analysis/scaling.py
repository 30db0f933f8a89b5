"""Notebook 06's records: measured strong and weak scaling, and the performance model fitted and projected."""

import math
from pathlib import Path

import pandas as pd

from dlrm_study.analysis import clusters
from dlrm_study.analysis import flags as flagging
from dlrm_study.analysis.readers import NoRecords, check_cells, config_key, labelled
from dlrm_study.perfmodel import scaling as scaling_model
from dlrm_study.plans.scaling import plan
from dlrm_study.records import columns as col
from dlrm_study.records import store
from dlrm_study.records.machine import select


def scaling_records(profile: str, out: Path, machine: str | None = "this") -> pd.DataFrame:
    """The study's stored records for its current points, on one machine (one thread per rank)."""
    path = out / "scaling.csv"
    if not path.exists():
        raise NoRecords(f"no records yet: {path} does not exist (run with measure=True)")
    labels = {(config_key(cfg), v): label for label, cfgs in plan(profile) for v, cfg in cfgs.items()}
    return check_cells(select(labelled(store.load(path), labels, [f"scaling-{profile}"]), machine))


def calibration_records(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The single-rank records the model is fitted on: all of them (every repeat counts), said so."""
    single = flagging.with_flags(frame[frame[col.WORLD_SIZE] == 1])
    flagged = int(flagging.flagged(single).sum())
    return single, f"fitted on all {len(single)} single-rank records ({flagged} flagged)" if flagged else ""


def measured_efficiency(frame: pd.DataFrame) -> dict[str, tuple[float, float, float]]:
    """Strong and weak scaling from 1 to 2 ranks, paired within repeats: (center, low, high) each.

    From all repeats; NaN where no repeat pairs up.
    """
    clean = flagging.with_flags(frame)
    none = (math.nan, math.nan, math.nan)
    if clean.empty:
        return {"strong_speedup": none, "strong_efficiency": none, "weak_efficiency": none}
    batch = int(frame[col.BATCH_SIZE].max())
    base = clean[clean["data.lookups_per_table"] == frame["data.lookups_per_table"].min()]
    speedup = clusters.paired_ratio(base[base[col.BATCH_SIZE] == batch], "2 ranks", "1 rank")[:3]
    cells = [col.MACHINE, col.RUN_ID, col.REPEAT]  # weak scaling pairs 2 ranks with 1 rank in one repeat of one run
    rate = base.pivot_table(index=cells, columns=[col.WORLD_SIZE, col.BATCH_SIZE], values=col.SAMPLES_PER_S)
    pairs = [(2, batch), (1, batch // 2)]
    if not all(p in rate for p in pairs):
        return {"strong_speedup": speedup, "strong_efficiency": tuple(v / 2 for v in speedup), "weak_efficiency": none}
    weak = (rate[pairs[0]] / (2 * rate[pairs[1]])).dropna().rename("weak").reset_index()
    return {
        "strong_speedup": speedup,
        "strong_efficiency": tuple(value / 2 for value in speedup),
        "weak_efficiency": tuple(clusters.over_runs(weak, "weak"))[:3] if len(weak) else none,  # runs as clusters
    }


RANKS_PROJECTED = [1, 2, 4, 8, 16, 32, 64]


def perf_model_assumptions() -> str:
    """The projection's assumptions, as the figure states them."""
    return scaling_model.ASSUMPTIONS


def model(records: pd.DataFrame) -> dict[str, object]:
    """The performance model on the study's records: fitted, checked, and projected to 64 ranks.

    Compute rates are fitted on the single-rank points (`calibration_records`), the link on the
    collectives timed alone at 2 ranks (`scaling_model.fit_network`); the model with that link is
    checked on every point, then projected with the SC20 cluster's link (`OMNI_PATH_100G`),
    weak scaling at the measured batch per rank.
    """
    fitted_on, note = calibration_records(records)
    calibration = scaling_model.fit(fitted_on)
    link = scaling_model.fit_network(records)
    two = records[records[col.WORLD_SIZE] == 2].iloc[0]
    shape = scaling_model.Shape.of(two)
    per_rank = int(two[col.BATCH_SIZE]) // 2
    projection = scaling_model.project(calibration, shape, scaling_model.OMNI_PATH_100G, RANKS_PROJECTED, per_rank)
    here = scaling_model.project(calibration, shape, link, [1, 2], per_rank)  # what this machine can check
    return {
        "calibration": calibration,
        "note": note,
        "link": link,
        "check": scaling_model.check(calibration, flagging.with_flags(records), link),
        "shape": shape,
        "per_rank_batch": per_rank,
        "network": scaling_model.OMNI_PATH_100G,
        "projection": projection,
        "here": here,
    }


BREAKDOWN = (
    col.MS_MEDIAN, col.COMPUTE_MS_MEDIAN, "exposed_comm_ms", "exchange_wait_ms", "exchange_backward_ms",
    "comm_alltoall_ms", "comm_allreduce_ms",
)  # fmt: skip
BREAKDOWN_NAMES = {  # as a table shows them: milliseconds per step
    col.MS_MEDIAN: "step", col.COMPUTE_MS_MEDIAN: "compute alone", "exposed_comm_ms": "exposed comm",
    "exchange_wait_ms": "exchange wait", "exchange_backward_ms": "exchange backward",
    "comm_alltoall_ms": "all-to-all alone", "comm_allreduce_ms": "allreduce alone",
}  # fmt: skip


def projection_setting(fitted: dict) -> str:
    """What the projection assumes, in words: the network, the modelled shape, the weak-scaling batch per rank."""
    shape = fitted["shape"]
    return (
        f"network: {fitted['network'].name}\n"
        f"modelled at the measured shape: batch {shape.batch:,}, {shape.tables} tables, {shape.lookups} lookups "
        f"per table, dim {shape.dim}, {shape.dense_params:,} dense parameters\n"
        f"weak scaling: {fitted['per_rank_batch']:,} samples per rank"
    )


def breakdown_table(records: pd.DataFrame) -> pd.DataFrame:
    """Per rank count, batch and pooling: the step, its compute alone and its communication, medians of repeats."""
    points = [col.WORLD_SIZE, col.BATCH_SIZE, "data.lookups_per_table"]
    table = records.groupby(points)[list(BREAKDOWN)].median().round(2)
    table.index.names = ["ranks", "batch", "lookups per table"]
    return table.rename(columns=BREAKDOWN_NAMES)
