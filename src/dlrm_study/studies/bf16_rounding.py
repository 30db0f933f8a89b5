"""Why plain bf16 SGD does or does not lose on S3's accuracy benchmark: the share of its updates a bf16 weight
would round away.

A weight held in bf16 keeps 8 significant bits: in the binade [2^e, 2^(e+1)) its values are 2^(e-7) apart, so
an update smaller than half that spacing (2^(e-8)) leaves the weight where it was. Plain bf16 SGD rounds every
update into the bf16 weight and loses those; Split-SGD keeps the weight's lower 16 bits beside it and loses none.
So the benchmark can tell the two apart only if a good part of its updates fall below half a spacing.

Measured on the benchmark's own fp32 run (`accuracy_config`, optimized fp32, seed 0, the accuracy study's steps):
at the last step of every window, each weight's change in that one step added to the weight's bf16 value: the share
of the weights that changed whose sum rounds back to the bf16 value (lost), and the median change over half a
spacing, for the embedding tables and the MLPs apart. The fp32 trajectory stands
in for plain bf16's (which moves less), so the share is what plain bf16 would lose at the same weights.

A lost single update is not yet lost movement. Round-to-nearest is unbiased on average when the updates it rounds
scatter over more than a spacing (dither): SGD's noise makes a weight's updates do that, so plain bf16 keeps
some updates whole and drops others, and its weight still drifts where fp32's does. So the probe also follows
plain bf16's weights along fp32's own updates over the last KEPT_STEPS steps of each window (h <- bf16(h + u),
from the bf16 value of fp32's weight) and records the share of fp32's movement over those steps that they keep
(their movement projected on fp32's, over its squared length): near 1 where rounding dithers, near 0 where
plain bf16 freezes.
"""

from pathlib import Path

import torch
from tqdm import tqdm

from dlrm_study.config import Config
from dlrm_study.config.variants import OPTIMIZED_FP32
from dlrm_study.data import make_data
from dlrm_study.measure import context
from dlrm_study.plans.bf16_rounding import (
    GROUP,
    GROUPS,
    KEPT_STEPS,
    MEDIAN_OVER_HALF,
    MOVED,
    MOVEMENT_KEPT,
    RECORDS,
    ROUNDED_AWAY,
    fp32_configs,
    study,
)
from dlrm_study.plans.profiles import LOSS_WINDOW
from dlrm_study.records import columns as col
from dlrm_study.records import store
from dlrm_study.records.record import make_record
from dlrm_study.train import Run, build, train


def run_rounding(profile: str, out: Path, seed: int = 0) -> None:
    """Each accuracy preset's fp32 run from `seed`, its updates against bf16's spacing at every window's last step
    (records in `out`/RECORDS, kind `rounding`); a preset already recorded at this code is skipped."""
    path = out / RECORDS
    stored = store.stored_keys(path)
    configs = fp32_configs(profile, seed)
    todo = [cfg for cfg in configs if store.key_here(cfg, OPTIMIZED_FP32, repeat=seed) not in stored]
    context.current().tally(reused=len(configs) - len(todo), measured=len(todo))
    bar = tqdm(total=sum(cfg.train.steps for cfg in todo), desc=study(profile), unit="step")
    for cfg in todo:
        rows = rounding_rows(cfg, min(LOSS_WINDOW[profile], cfg.train.steps), bar)
        store.append_many(
            path, [make_record(study(profile), r, cfg, variant=OPTIMIZED_FP32, repeat=seed) for r in rows]
        )
    bar.close()


def rounding_rows(cfg: Config, window: int, bar: tqdm) -> list[dict[str, object]]:
    """One fp32 run trained to `cfg.train.steps`; at each window's end, one row per group: its last update against
    bf16's spacing (`against_spacing`) and the movement plain bf16 keeps over the window's last steps (`kept`)."""
    run, data, rows = build(cfg), make_data(cfg), []
    for end in range(window, cfg.train.steps + 1, window):
        start = end - min(KEPT_STEPS, window)
        train(run, data.batches(run.step), start, on_step=lambda *_: bar.update())
        first = previous = weights(run)
        plain = [w.bfloat16().float() for w in first]
        for step in range(start + 1, end + 1):
            before = previous
            train(run, data.batches(run.step), step, on_step=lambda *_: bar.update())
            previous = weights(run)
            plain = [(p + new - old).bfloat16().float() for p, old, new in zip(plain, before, previous, strict=True)]
        for i, group in enumerate(GROUPS):
            fields = against_spacing(before[i], previous[i]) | {MOVEMENT_KEPT: kept(first[i], previous[i], plain[i])}
            rows.append({col.KIND: "rounding", col.STEP: end, GROUP: group, **fields})
    return rows


def weights(run: Run) -> tuple[torch.Tensor, torch.Tensor]:
    """The embedding tables' and the MLPs' weights, each flattened into one fp32 copy."""
    tables = torch.cat([t.reshape(-1) for t in run.model.sparse_arch.tables()])
    dense = torch.cat([p.detach().float().reshape(-1) for p in run.model.dense_parameters()])
    return tables.clone(), dense.clone()


def half_spacing(values: torch.Tensor) -> torch.Tensor:
    """Half the distance between neighbouring bf16 values at each value's bf16 rounding (0 at 0)."""
    exponent = torch.frexp(values.bfloat16().float()).exponent  # value = m * 2^exponent, 0.5 <= |m| < 1
    return torch.where(values == 0, 0.0, torch.ldexp(torch.ones_like(values), exponent - 9))


def against_spacing(before: torch.Tensor, after: torch.Tensor) -> dict[str, float]:
    """Of the weights that changed: how many, the share whose change added to the weight's bf16 value rounds back
    to that value (what plain bf16 loses), and the median change over half a bf16 spacing of the weight."""
    update = after - before
    moved = update != 0
    held = before.bfloat16().float()
    lost = (held + update).bfloat16().float() == held
    count = int(moved.sum())
    if not count:
        return {MOVED: 0, ROUNDED_AWAY: float("nan"), MEDIAN_OVER_HALF: float("nan")}
    return {
        MOVED: count,
        ROUNDED_AWAY: float(lost[moved].float().mean()),
        MEDIAN_OVER_HALF: float((update[moved].abs() / half_spacing(before)[moved]).median()),
    }


def kept(start: torch.Tensor, end: torch.Tensor, plain: torch.Tensor) -> float:
    """The share of fp32's movement from `start` to `end` that plain bf16's weights (`plain`, from start's bf16
    value along the same updates) keep: their movement projected on fp32's, over its squared length."""
    moved = end - start
    length = float(moved @ moved)
    return float((plain - start.bfloat16().float()) @ moved) / length if length else float("nan")
