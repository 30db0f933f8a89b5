"""Notebook 07's records: the convergence study's windowed losses and held-out evaluations."""

import math
import typing
from pathlib import Path

import pandas as pd

from dlrm_study.analysis import stats
from dlrm_study.analysis.readers import NoRecords, check_cells, config_key, labelled
from dlrm_study.config.variants import CPU_LOOPS, OPTIMIZED_BF16, OPTIMIZED_FP32, REFERENCE
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
    frame = select(labelled(own_study(store.load(path), f"convergence-{profile}"), labels), machine)
    return check_cells(frame, (col.MACHINE, col.RUN_ID, col.VARIANT, "train.seed", col.KIND, col.STEP))


def own_study(frame: pd.DataFrame, study: str) -> pd.DataFrame:
    """A study's own records: a loss curve is of the run that trained it (the two studies of this file may
    train one config, as the smoke profile's do, and a config's key leaves out its step count)."""
    return frame[frame[col.STUDY] == study] if col.STUDY in frame else frame


def accuracy_records(profile: str, out: Path, machine: str | None = "this") -> pd.DataFrame:
    """S3's accuracy study on the timed presets (`studies.convergence.run_accuracy`), on one machine."""
    path = out / RECORDS
    if not path.exists():
        raise NoRecords(f"no records yet: {path} does not exist (run with measure=True)")
    labels = {(config_key(cfg), v): f"{cfg.name} seed {s}" for v, s, cfg in accuracy_configs(profile)}
    frame = select(labelled(own_study(store.load(path), f"accuracy-{profile}"), labels), machine)
    return check_cells(frame, (col.MACHINE, col.RUN_ID, col.POINT, col.VARIANT, col.KIND, col.STEP))


SEED = (col.MACHINE, col.RUN_ID, "train.seed")  # a seed's loops, trained in one run on one machine


def gaps(records: pd.DataFrame, kind: str, value: str, by: tuple[str, ...] = (), base: str = REFERENCE) -> pd.DataFrame:
    """Each loop's `value` less `base`'s, paired by seed (and by `by`, e.g. the step): the mean gap over
    seeds with its 95% t interval (`variant`, *by, `mean`, `low`, `high`, `n`)."""
    rows = records[records[col.KIND] == kind]
    keys = [k for k in SEED if k in rows]
    wide = rows.pivot_table(index=[*keys, *by], columns=col.VARIANT, values=value) if not rows.empty else None
    if wide is None or base not in wide:
        return pd.DataFrame(columns=[col.VARIANT, *by, "mean", "low", "high", "n"])
    out = []
    for variant in [v for v in wide if v != base]:
        gap = (wide[variant] - wide[base]).dropna()
        groups = gap.groupby(level=list(by)) if by else [((), gap)]
        for at, values in groups:
            mean, low, high, n = stats.mean_interval(values)
            at = at if isinstance(at, tuple) else (at,)
            out.append({col.VARIANT: variant, **dict(zip(by, at, strict=True)), "mean": mean, "low": low,
                        "high": high, "n": n})  # fmt: skip
    return pd.DataFrame(out)


def loss_gaps(records: pd.DataFrame) -> pd.DataFrame:
    """Each loop's windowed training loss less the reference's at each step, over seeds."""
    return gaps(records, "loss", col.LOSS, (col.STEP,))


def auc_gaps(records: pd.DataFrame) -> pd.DataFrame:
    """Each loop's held-out AUC less the reference's, over seeds."""
    return gaps(records, "eval", col.EVAL_AUC)


def accuracy_gaps(records: pd.DataFrame) -> pd.DataFrame:
    """S3 on the timed presets: optimized bf16's held-out AUC less optimized fp32's, per preset, over seeds."""
    return gaps(records, "eval", col.EVAL_AUC, (col.CONFIG_NAME,), base=OPTIMIZED_FP32)


class S3Accuracy(typing.NamedTuple):
    """S3's accuracy half on one machine: bf16's held-out AUC less fp32's, paired by seed within a run on the
    timed presets (`gap`: mean and t interval, None where nothing pairs), its seeds, and the presets."""

    gap: stats.Ratio | None
    seeds: int
    presets: list[str]


def s3_accuracy(frame: pd.DataFrame, machine: str, fingerprint: str = "") -> S3Accuracy:
    """S3's accuracy half, as `analysis.verdicts.s3` reads it (one call, so its rule can be rewritten here alone).

    Today: the gaps of every record of `frame` (the evidence's accuracy frame: the machine's bf16 class, each
    machine at its newest code), pooled; `machine` and `fingerprint` name whose verdict it serves."""
    evals = frame[frame[col.KIND] == "eval"] if not frame.empty else frame
    if evals.empty:
        return S3Accuracy(None, 0, [])
    index = [col.MACHINE, col.RUN_ID, col.CONFIG_NAME, "train.seed"]
    wide = evals.pivot_table(index=index, columns=col.VARIANT, values=col.EVAL_AUC, aggfunc="first")
    if not {OPTIMIZED_BF16, OPTIMIZED_FP32} <= set(wide):
        return S3Accuracy(None, 0, [])
    gaps = (wide[OPTIMIZED_BF16] - wide[OPTIMIZED_FP32]).dropna()
    mean, low, high, n = stats.mean_interval(gaps)
    presets = sorted(set(gaps.index.get_level_values(col.CONFIG_NAME)))
    return S3Accuracy(stats.Ratio(mean, low, high, n, math.nan), n, presets)


def preset_of(records: pd.DataFrame) -> str:
    """The preset the records trained and its shape as they say it: `tiny (8 x 100,000 rows, dim 16, batch 256)`."""
    described = records.dropna(subset=[c for c in ("model.table_rows", col.CONFIG_NAME) if c in records])
    if described.empty or col.CONFIG_NAME not in described or "model.table_rows" not in described:
        return "unrecorded"
    first = described.iloc[0]
    rows = [int(r) for r in str(first["model.table_rows"]).split("-")]
    tables = f"{len(rows)} x {rows[0]:,} rows" if len(set(rows)) == 1 else f"{len(rows)} tables"
    shape = f"{tables}, dim {int(first['model.embedding_dim'])}, batch {int(first['train.batch_size'])}"
    return f"{', '.join(sorted(set(described[col.CONFIG_NAME].astype(str))))} ({shape})"
