"""Pre-registered GPU predictions (H1-H4): written before a GPU measures them, then scored.

`predict` writes one row per GPU point of the GPU grid (`plans.gpu.sweeps`): the predicted
range of samples/s (H1, and the presets' throughput target), of GPU over this machine's
measured CPU samples/s on the dense x sparse grid (H2, H3), and of each placement over `hbm`
(H4). Rows are appended to `gpu_predictions.csv`, never rewritten: a later model adds rows
under its own commit, and `score` judges measured records against the earliest rows of each
point (those written before the measurement).
"""

import math
from pathlib import Path

import pandas as pd

from dlrm_study.analysis import flags as flagging
from dlrm_study.analysis import gpu_loop, wording
from dlrm_study.analysis.sensitivity import with_knob
from dlrm_study.config import Config, Loop, Placement
from dlrm_study.config.variants import GPU_HBM, REGISTRY, Variant
from dlrm_study.errors import UsageError
from dlrm_study.perfmodel import gpu as gpu_model
from dlrm_study.plans import gpu, sweep
from dlrm_study.plans.sensitivity import GPU_RECORDS, on_gpu
from dlrm_study.records import columns as col
from dlrm_study.records import provenance, store
from dlrm_study.records.record import make_record

PREDICTIONS = "gpu_predictions.csv"
STUDY = "gpu-predictions"
MODEL = "gpu_model v1"
# The same model with each point's kernels per step and dispatch taken from a measured profile
# (measure.gpu's profiled window): rows added beside v1's, never in their place.
PROFILED_MODEL = "gpu_model v2 (profiled kernels)"
# Where each gpu variant places its tables, as the registry says (a CPU loop's prediction reads as hbm).
PLACEMENT_OF = {v: Variant.named(v).setting("placement") for v in REGISTRY if Variant.named(v).setting("loop") == "gpu"}


def gpu_specs(profile: str, out: Path) -> list[sweep.Sweep]:
    """The GPU grid's sweeps (smoke: its dry run's) with their records in `out`."""

    return gpu.sweeps(out, dry_run=profile == "smoke")


def claim_of(study: str) -> str:
    if study == "gpu-dispatch-floor":
        return "floor"  # kaggle at batch 128: the cost of dispatching a step, no claim's evidence
    if "dense-sparse-grid" in study:
        return "H2/H3"
    if "placement" in study:
        return "H4"
    if study.startswith("gpu-presets"):
        return "target"
    return "H1"


def hit_rate_for(cfg: Config, out: Path) -> float | None:
    """The cache study's measured hit rate for this config's ids, policy and cache size, if recorded."""
    path = out / "cache.csv"
    if not path.exists():
        return None
    frame = store.load(path)
    t = cfg.train
    same = frame[
        (frame["data.zipf_alpha"].astype(float).round(3) == round(cfg.data.zipf_alpha, 3))
        & (frame["train.cache_fraction"].astype(float).round(4) == round(t.cache_fraction, 4))
        & (frame["train.cache_policy"] == t.cache_policy)
        & (frame[col.CONFIG_NAME] == cfg.name)
    ]
    return float(same["cache_hit_rate"].median()) if not same.empty else None


def profiled_ops(records: pd.DataFrame) -> dict[tuple[str, str], tuple[float, float]]:
    """(kernels per step, host ops per step) by (config hash, variant), from GPU records' profiled windows:
    the median over repeats; a captured step's host dispatches one replay."""
    if records.empty or "kernels_per_step" not in records:
        return {}
    profiled = records[(records[col.DEVICE] == "cuda") & records["kernels_per_step"].notna()]
    ops = {}
    for (config_hash, variant), group in profiled.groupby([col.CONFIG_HASH, col.VARIANT]):
        kernels = float(group["kernels_per_step"].median())
        ops[(config_hash, variant)] = (kernels, 1.0 if (group[col.CAPTURE] == "graph").all() else kernels)
    return ops


def point_rows(
    spec: sweep.Sweep,
    device: gpu_model.Device,
    out: Path,
    profiled: dict[tuple[str, str], tuple[float, float]] | None = None,
) -> list[dict[str, object]]:
    """Predicted samples/s at every point of one GPU sweep (placements: with a measured hit rate).

    With `profiled` (`profiled_ops`): only the points profiled, their op costs as measured.
    """
    efficiency = gpu_model.efficiency_range()
    rows = []
    for point in sweep.points(spec):
        if point.cfg.train.loop != Loop.GPU:
            continue  # the GPU host's CPU loops (beside the GPU in its runs): the model is the GPU's
        cfg, placement = point.cfg, PLACEMENT_OF.get(point.variant, "hbm")
        hit = hit_rate_for(cfg, out) if placement == Placement.CACHED else 1.0
        if hit is None:
            continue  # no measured hit rate for this cache: nothing honest to predict
        if profiled is None:
            ops, host_ops = gpu_model.count_ops(cfg, placement), None
        elif (cfg.hash(), point.variant) in profiled:
            ops, host_ops = profiled[(cfg.hash(), point.variant)]
        else:
            continue
        fast, slow = gpu_model.step_range_ms(cfg, device, efficiency, placement, hit, ops, host_ops)
        batch = cfg.train.batch_size
        low, high = batch / slow * 1e3, batch / fast * 1e3
        terms = gpu_model.bound_ms(cfg, device, placement, hit)
        fields = {
            "quantity": col.SAMPLES_PER_S,
            "low": low,
            "mid": math.sqrt(low * high),
            "high": high,
            "fast_ms": fast,
            "slow_ms": slow,
            "ops_per_step": ops,
            "host_ops_per_step": ops if host_ops is None else host_ops,
            "hit_rate": hit if placement == Placement.CACHED else None,
            "efficiency_low": efficiency[0],
            "efficiency_high": efficiency[1],
            **{f"bound_{k}": v for k, v in terms.items()},
        }
        labels = {"claim": claim_of(spec.name), "sweep": spec.name, col.VARIANT: point.variant, col.GRID: point.label}
        model = MODEL if profiled is None else PROFILED_MODEL
        rows.append(
            make_record(
                STUDY, fields, cfg, model=model, predicted_for=device.name, predicted_by=device.source, **labels
            )
        )
    return rows


def ratio_rows(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """H4: each placement over hbm at the same point, from the same model on both sides.

    No GPU-over-CPU ratio: its CPU side is measured on the GPU's own host, in the GPU's run
    (docs/claims.md), a CPU that a prediction made elsewhere has not seen. H2/H3's GPU side is
    predicted as samples/s at each grid point, like every other point.
    """
    extra = []
    by_point = {(r["sweep"], r[col.GRID], r[col.VARIANT]): r for r in rows}
    for (name, grid, variant), row in by_point.items():
        hbm = by_point.get((name, grid, GPU_HBM))
        if claim_of(name) == "H4" and variant != GPU_HBM and hbm is not None:
            # The same corner on both sides (the same efficiency and op cost): the ratio's range.
            corners = [hbm["fast_ms"] / row["fast_ms"], hbm["slow_ms"] / row["slow_ms"]]
            extra.append(ratio(row, "over_hbm", min(corners), max(corners)))
    return extra


def ratio(row: dict[str, object], quantity: str, low: float, high: float) -> dict[str, object]:
    return {**row, "quantity": quantity, "low": low, "mid": math.sqrt(low * high), "high": high}


def measured_device(device_name: str, out: Path) -> gpu_model.Device:
    """The described GPU with the copy bandwidths the GPU script measured on it (gpu_embedding.csv)."""
    device = gpu_model.DEVICES[device_name]
    path = out / "gpu_embedding.csv"
    frame = store.load(path) if path.exists() else pd.DataFrame()
    if col.GPU_MODEL in frame:
        frame = frame[frame[col.GPU_MODEL].astype(str).str.contains(device.name.split()[1], regex=False)]
    if frame.empty or "copy_gbps" not in frame:
        raise UsageError(f"no measured bandwidths of {device.name} in {path} (run scripts/gpu_check.sh on one)")
    return device.with_measured(float(frame["copy_gbps"].median()), float(frame["h2d_gbps"].median()))


def predict(
    profile: str,
    out: Path,
    device_name: str = "h200",
    measured_bandwidths: bool = False,
    profiled_from: Path | None = None,
) -> tuple[Path, int]:
    """Append this model's predictions for `device_name` at the GPU script's points; (path, rows written).

    `measured_bandwidths`: with the copy bandwidths the GPU script measured in place of the
    datasheet's (rows then name the device "... (measured bandwidths)", kept apart from the
    datasheet rows). `profiled_from`: a folder of GPU records whose profiled windows give the op
    costs (model PROFILED_MODEL, only the points profiled there). Rows already written by this
    commit for that device and model are not written again; none is ever rewritten, and scoring
    keeps judging each point by its earliest row.
    """
    device = measured_device(device_name, out) if measured_bandwidths else gpu_model.DEVICES[device_name]
    profiled = None
    if profiled_from is not None:
        path = profiled_from / GPU_RECORDS
        profiled = profiled_ops(store.load(path) if path.exists() else pd.DataFrame())
        if not profiled:
            raise UsageError(f"no profiled GPU records in {path} (run scripts/gpu_check.sh on a GPU)")
    rows = [row for spec in gpu_specs(profile, out) for row in point_rows(spec, device, out, profiled)]
    rows += ratio_rows(rows)
    path = out / PREDICTIONS
    commit = provenance.git_commit()
    model = MODEL if profiled is None else PROFILED_MODEL
    if path.exists():
        old = store.load(path)
        mine = (old[col.GIT_COMMIT] == commit) & (old["predicted_for"] == device.name)
        if "model" in old:
            mine &= old["model"] == model
        if not old[mine].empty:
            return path, 0
    store.append_many(path, rows)
    return path, len(rows)


def load(out: Path, device_name: str = "h200") -> pd.DataFrame:
    """The pre-registered predictions: for each point and quantity, the earliest row written."""
    path = out / PREDICTIONS
    if not path.exists():
        return pd.DataFrame()
    frame = store.load(path)
    frame = frame[frame["predicted_for"] == gpu_model.DEVICES[device_name].name]
    frame = frame.sort_values(col.TIMESTAMP, kind="stable")  # ties keep the file's order: first written first
    # A point is its sweep, its label and its config: rows written before labels named the base (two presets
    # at one batch shared "train.batch_size=16384") stay apart by their config.
    return frame.drop_duplicates(["sweep", col.GRID, col.CONFIG_NAME, col.VARIANT, "quantity"], keep="first")


def measured_records(out: Path) -> pd.DataFrame:
    """The GPU records a prediction is scored against: measured on a GPU, as every GPU table reads them
    (`gpu_loop.repeats`: each machine's newest code, warm-ups out, no error records)."""
    path = out / GPU_RECORDS
    if not path.exists():
        return pd.DataFrame()
    frame = store.load(path)
    return gpu_loop.repeats(frame[frame[col.DEVICE] == "cuda"]) if col.DEVICE in frame else frame.iloc[0:0]


def measured(out: Path, device_name: str = "h200") -> pd.DataFrame:
    """GPU records measured on `device_name` (`measured_records`; a prediction for one GPU is never scored
    against another's records), per (config, variant) whichever sweep ran it: its samples/s by the one median rule
    of the GPU tables (`gpu_loop.rate`: docs/results.md's targets read it too), and whether every one of its repeats
    is flagged (`flagged_only`)."""
    frame = measured_records(out)
    if frame.empty:
        return frame
    frame = frame[frame[col.MACHINE].map(gpu_model.device_of) == device_name]
    keys = [col.CONFIG_HASH, col.VARIANT]
    clean = frame[~flagging.flagged(frame)]

    def rate(values: pd.Series) -> float:
        return gpu_loop.rate(values.to_frame())

    every = frame.groupby(keys)[col.SAMPLES_PER_S].agg(rate).rename("all")
    kept = clean.groupby(keys)[col.SAMPLES_PER_S].agg(rate).rename("clean")
    both = pd.concat([every, kept], axis=1)
    both[col.SAMPLES_PER_S] = both["all"]  # every repeat counts
    both["flagged_only"] = both["clean"].isna()
    return both.reset_index()[[*keys, col.SAMPLES_PER_S, "flagged_only"]]


def score(out: Path, device_name: str = "h200", records: Path | None = None) -> pd.DataFrame:
    """Each prediction in `out` beside its measurement in `records` (default `out`), if any:
    `measured`, and `verdict` inside / below / above / not yet measured (or NOT_COMPARABLE)."""
    pred = load(out, device_name)
    if pred.empty:
        return pred
    got = measured(records or out, device_name)
    pred = pred.copy()
    pred["measured"], pred["flagged_only"] = float("nan"), False
    if not got.empty:
        rate = {(r.config_hash, r.variant): r.samples_per_s for r in got.itertuples()}
        doubtful = {(r.config_hash, r.variant) for r in got.itertuples() if r.flagged_only}
        for i, row in pred.iterrows():
            mine = rate.get((row[col.CONFIG_HASH], row[col.VARIANT]))
            if mine is None:
                continue
            pred.loc[i, "flagged_only"] = (row[col.CONFIG_HASH], row[col.VARIANT]) in doubtful
            if row["quantity"] == col.SAMPLES_PER_S:
                pred.loc[i, "measured"] = mine
            elif row["quantity"] == "over_hbm":
                hbm = pred[(pred["sweep"] == row["sweep"]) & (pred[col.GRID] == row[col.GRID])]
                hbm = hbm[(hbm[col.VARIANT] == GPU_HBM) & (hbm["quantity"] == col.SAMPLES_PER_S)]
                base = rate.get((hbm[col.CONFIG_HASH].iloc[0], GPU_HBM)) if not hbm.empty else None
                if base:
                    pred.loc[i, "measured"] = mine / base
    pred["verdict"] = [verdict(r.low, r.high, r.measured) for r in pred.itertuples()]
    # Rows written before predict stopped making them: GPU over the CPU of the machine that predicted.
    # The GPU's records divided by that CPU's rate would be a ratio of two machines (docs/claims.md).
    pred.loc[pred["quantity"] == "gpu_over_cpu", "verdict"] = NOT_COMPARABLE
    return pred


# Verdicts of a scored prediction: where its measurement fell, or why it has none.
MEASURED_VERDICTS = ("inside", "below", "above")
NOT_COMPARABLE = "not comparable (predicted over another machine's CPU)"


def verdict(low: float, high: float, value: float) -> str:
    if value != value:  # NaN: not measured
        return "not yet measured"
    return "inside" if low <= value <= high else ("below" if value < low else "above")


# --- what the notebooks draw and print ----------------------------------------------------------


def knob_bands(knob: str, cpu_spec: sweep.Sweep, out: Path) -> pd.DataFrame:
    """The predicted samples/s (variant, x, low, high) at a sensitivity sweep's GPU points."""
    pred = load(out)
    if pred.empty:
        return pred
    pred = pred[(pred["sweep"] == on_gpu(cpu_spec).name) & (pred["quantity"] == col.SAMPLES_PER_S)]
    return with_knob(knob, pred.assign(point=pred[col.GRID]))[[col.VARIANT, "x", "low", "high"]]


def placement_bands(out: Path, study: str) -> pd.DataFrame:
    """Predicted ranges at a placement sweep's points: over hbm (gpu-placements), or samples/s with `x`."""
    pred = load(out)
    if pred.empty:
        return pred
    pred = pred[pred["sweep"] == study]
    if study == "gpu-placements":
        return pred[pred["quantity"] == "over_hbm"][[col.VARIANT, col.CONFIG_NAME, "low", "high"]]
    pred = pred[pred["quantity"] == col.SAMPLES_PER_S].copy()
    if study.endswith("-skew"):
        pred["x"] = pred["data.zipf_alpha"].astype(float)
    else:
        pred["x"] = pred["model.table_rows"].map(lambda rows: float(str(rows).split("-")[0]))
    return pred[[col.VARIANT, "x", "low", "high"]]


def table(scored: pd.DataFrame, claims: tuple[str, ...]) -> pd.DataFrame:
    """The scored predictions of some claims, readable: point, variant, range, measured, verdict."""
    if scored.empty:
        return scored
    pick = scored[scored["claim"].isin(claims)].sort_values(["quantity", "sweep", col.GRID, col.VARIANT], kind="stable")
    shown = pd.DataFrame(
        {
            "claim": pick["claim"],
            "sweep": pick["sweep"].str.replace("-quick", ""),
            col.POINT: pick[col.GRID],
            col.VARIANT: pick[col.VARIANT],
            "quantity": pick["quantity"],
            "predicted": [
                f"[{wording.number(lo)}, {wording.number(hi)}]"
                for lo, hi in zip(pick["low"], pick["high"], strict=True)
            ],
            "measured": [wording.number(m) if m == m else "-" for m in pick["measured"]],
            "verdict": [
                v + (" (flagged repeats)" if f else "")
                for v, f in zip(pick["verdict"], pick["flagged_only"], strict=True)
            ],
        }
    )
    return shown.reset_index(drop=True)


def table_text(scored: pd.DataFrame, claims: tuple[str, ...]) -> str:
    """`table` as notebooks print it: the comparable rows without an index, then how many rows were not
    comparable (predictions of a ratio over another machine's CPU: written, never scored)."""
    shown = table(scored, claims)
    if shown.empty:
        return "no predictions in this results folder"
    apart = shown["verdict"].str.startswith("not comparable")
    text = shown[~apart].to_string(index=False) if (~apart).any() else "no comparable prediction"
    if apart.any():
        text += f"\n{int(apart.sum())} more predictions are not comparable: ranges of a GPU over another machine's CPU"
    return text


def counts(scored: pd.DataFrame) -> pd.DataFrame:
    """Per claim: how many measured points fell inside, below or above their range, or are unmeasured
    (each point once: `independent`)."""
    if scored.empty:
        return scored
    waiting = scored[scored["verdict"] == "not yet measured"].drop_duplicates([col.CONFIG_HASH, col.VARIANT])
    points = pd.concat([independent(scored), waiting])
    return points.pivot_table(index="claim", columns="verdict", values="low", aggfunc="count", fill_value=0)


def independent(scored: pd.DataFrame) -> pd.DataFrame:
    """One scored prediction per measured point (config, variant): its samples/s row, where one was made.

    The ratios (GPU over CPU, a placement over hbm) are computed from the same measurements, so
    scoring them too would count one measurement two or three times.
    """
    if scored.empty:
        return scored
    done = scored[scored["verdict"].isin(MEASURED_VERDICTS)]
    rank = done["quantity"].map({col.SAMPLES_PER_S: 0}).fillna(1)
    return done.assign(_rank=rank).sort_values("_rank", kind="stable").drop_duplicates([col.CONFIG_HASH, col.VARIANT])


def against_naive(scored: pd.DataFrame) -> pd.DataFrame:
    """Per quantity: how many independent points fell inside the model's range, and inside a naive one.

    The naive range is one constant range per quantity, as wide (in log terms) as the model's ranges
    are at their median, centred on the median of the measurements themselves: a baseline that
    knows the answers' typical level but nothing of the points. A model worth its name does better.
    """
    rows = []
    for quantity, group in independent(scored).groupby("quantity", sort=True):
        logs = group["measured"].astype(float).map(math.log)
        half = (group["high"].astype(float) / group["low"].astype(float)).map(math.log).median() / 2
        naive = int(((logs - logs.median()).abs() <= half).sum())
        model = int((group["verdict"] == "inside").sum())
        rows.append({"quantity": quantity, "points": len(group), "model_inside": model, "naive_inside": naive})
    return pd.DataFrame(rows, columns=["quantity", "points", "model_inside", "naive_inside"])


def scored_loop_label(out: Path) -> str:
    """` (the old GPU loop: ...)` where the GPU records the predictions are scored against include the old
    loop's (`analysis.gpu_loop`), else ``."""
    path = Path(out) / GPU_RECORDS
    return gpu_loop.label(store.load(path)) if path.exists() else ""
