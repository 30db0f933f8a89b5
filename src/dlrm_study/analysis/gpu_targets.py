"""The GPU session's throughput targets judged: each device's records against its own least samples/s, and a
miss said with why.

The targets (`plans.gpu_targets`) are set for an H200. On another GPU the model knows (`perfmodel.gpu.DEVICES`: an
H100) a target is scaled by HBM bandwidth (3.35 / 4.8 TB/s on an H100: the embedding traffic bounds these points),
and said so; each device's records are judged against their own device's target, never pooled with another's.
"""

import json

import pandas as pd

from dlrm_study.analysis import gpu_loop
from dlrm_study.perfmodel.gpu import DEVICES, device_of
from dlrm_study.plans.gpu_targets import SET_FOR, STUDIES, TARGETS, VARIANT, Plan, Target, point_of
from dlrm_study.records import columns as col


def hbm_scale(device: str) -> float:
    """A target's factor on `device`: its HBM bandwidth over the H200's (1 on the H200 and with no GPU; NaN on a
    GPU the model lacks: no target there)."""
    if device not in DEVICES:
        return 1.0 if not device else float("nan")
    return DEVICES[device].hbm_gbps / DEVICES[SET_FOR].hbm_gbps


def least_on(target: Target, device: str) -> float:
    """The target's samples/s on `device` (a `DEVICES` key; "" or the H200: as set): scaled by HBM bandwidth."""
    return target.least * hbm_scale(device)


def judged(target: Target, device: str, got: float) -> str:
    """`met`, `missed`, or `not judged` (a GPU with no target): `got` samples/s against the device's least."""
    least = least_on(target, device)
    return "not judged" if least != least else "met" if got >= least else "missed"


def target_words(target: Target, device: str) -> str:
    """The least samples/s on `device`, with how it was scaled where it was."""
    if device in ("", SET_FOR):
        return f"{target.least:,.0f}"
    if device not in DEVICES:
        return f"none on {device} (its HBM bandwidth is not in perfmodel.gpu.DEVICES)"
    have, base = DEVICES[device], DEVICES[SET_FOR]
    return (f"{least_on(target, device):,.0f} ({target.least:,.0f} on an {base.name.split()[1]}, scaled by HBM "
            f"bandwidth {have.hbm_gbps / 1e3:.2f}/{base.hbm_gbps / 1e3:.1f} TB/s)")  # fmt: skip


def planned(plan: Plan, dry_run: bool) -> list[str]:
    """One line per target: the point and variants the plan measures for it, or that the plan lacks it."""
    lines = []
    for target in TARGETS:
        name, batch = point_of(target, dry_run)
        found = [
            (label, sorted(cfgs))
            for label, cfgs in plan
            if any((cfg.name, cfg.train.batch_size) == (name, batch) for cfg in cfgs.values())
        ]
        if not any(VARIANT in variants for _, variants in found):
            lines.append(f"target {target.name()}: NOT IN THE PLAN (it will not be measured)")
            continue
        label, variants = next(item for item in found if VARIANT in item[1])
        least = f"{target.least:,.0f} on an H200, {least_on(target, 'h100'):,.0f} on an H100"
        lines.append(f"target {target.name()} (>= {least} samples/s): point {label!r}, {', '.join(variants)}")
    return lines


def verdicts(frame: pd.DataFrame | None, dry_run: bool, plan: Plan | None = None) -> list[str]:
    """One line per target and GPU: its samples/s against that device's least (`least_on`), or that it is
    missing and why (its error, or not measured: past the budget, or not in the plan)."""
    lines = []
    frame = frame if frame is not None else pd.DataFrame()
    for target in TARGETS:
        name, batch = point_of(target, dry_run)
        mine = measured(frame, target, dry_run)
        ok = mine[mine[col.ERROR].isna()] if col.ERROR in mine else mine
        if not ok.empty:
            for device, on in devices(ok):
                got = rate(on)
                verdict = judged(target, device, got)
                where = f" on an {DEVICES[device].name}" if device in DEVICES else f" on {device}" if device else ""
                lines.append(f"{target.name()}{where}: {got:,.0f} samples/s (target {target_words(target, device)}: "
                             f"{verdict})")  # fmt: skip
                if verdict == "missed":
                    lines += [f"  {line}" for line in explained(on, device)]
        elif not mine.empty:
            lines.append(f"{target.name()}: MISSING: failed: {mine[col.ERROR].dropna().iloc[0]}")
        elif plan is not None and not any(
            (cfg.name, cfg.train.batch_size) == (name, batch) for _, cfgs in plan for cfg in cfgs.values()
        ):
            lines.append(f"{target.name()}: MISSING: not in the plan")
        else:
            lines.append(f"{target.name()}: MISSING: not measured yet (past the time budget: the next session resumes)")
    return lines


SHOWN = 3  # kernels named where a miss is explained


def explained(records: pd.DataFrame, device: str) -> list[str]:
    """Where a missed target's step went, from its records: the bytes and FLOPs the GPU model says a step needs,
    at the measured step, against the device's bandwidth and peak; and its slowest kernels per step."""
    step_s = float((records[col.BATCH_SIZE] / records[col.SAMPLES_PER_S]).median())
    lines = []
    if "model_embedding_bytes" in records and step_s > 0:
        moved, flops = records["model_embedding_bytes"].median(), records["model_flops"].median()
        gbps, tflops = moved / step_s / 1e9, flops / step_s / 1e12
        said = f"the model's step: {moved / 1e6:,.0f} MB of embedding traffic, {flops / 1e9:,.1f} GFLOP; at the "
        said += f"measured {step_s * 1e3:.2f} ms a step, {gbps:,.0f} GB/s and {tflops:.1f} TFLOP/s"
        if device in DEVICES:
            d = DEVICES[device]
            said += f" ({gbps / d.hbm_gbps:.0%} of its HBM bandwidth, {tflops / d.bf16_tflops:.0%} of its bf16 peak)"
        lines.append(said)
    kept = records.get(col.TOP_KERNELS, pd.Series(dtype=object)).dropna()
    profiles = [json.loads(text) for text in kept if text != "[]"]
    if profiles:
        named = [f"{name} ({count:g} a step, {us:,.0f} µs)" for name, count, us in profiles[0][:SHOWN]]
        lines.append("slowest kernels: " + "; ".join(named))
    return lines


def devices(records: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The records split by the GPU their machine names (`device_of`): a target is judged on its own device only."""
    if col.MACHINE not in records:
        return [("", records)]
    keys = records[col.MACHINE].map(device_of)
    return [(device, records[keys == device]) for device in sorted(set(keys))]


def measured(frame: pd.DataFrame, target: Target, dry_run: bool = False) -> pd.DataFrame:
    """The target's records (errors included): `VARIANT` at the configs (`config_hash`) one of `STUDIES` measured
    at its point, whatever study measured them (the runner measures a point once per repeat: a lending's
    same-host run may hold a target's repeats). Where there is no study or config column: its point."""
    if frame.empty:
        return frame
    name, batch = point_of(target, dry_run)
    mine = frame[(frame[col.CONFIG_NAME] == name) & (batches(frame) == batch) & (frame[col.VARIANT] == VARIANT)]
    if col.STUDY not in mine:
        return mine
    own = mine[mine[col.STUDY].isin(STUDIES)]
    if col.CONFIG_HASH not in mine:
        return own
    return mine[mine[col.CONFIG_HASH].isin(set(own[col.CONFIG_HASH]))]


def rate(ok: pd.DataFrame) -> float:
    """A target's samples/s: the median over its measured repeats (`measured`, without error records), by the one
    rule of the GPU tables (`gpu_loop.rate`)."""
    return gpu_loop.rate(ok)


def batches(frame: pd.DataFrame) -> pd.Series:
    """Each record's batch: what ran, or (an error record: nothing ran) its config's."""
    ran = frame[col.BATCH_SIZE] if col.BATCH_SIZE in frame else pd.Series(float("nan"), index=frame.index)
    if BATCH_FIELD in frame:
        ran = ran.fillna(frame[BATCH_FIELD])
    return ran.astype(float)


BATCH_FIELD = "train.batch_size"  # the config's field, in every record (make_record writes the config flat)
