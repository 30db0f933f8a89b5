"""The scaling study on this machine: 1 and 2 ranks under torchrun, one core per rank.

Points (all on `SCALING_BASE`, named `dlrm-benchmark-scaled`): strong scaling keeps the
global batch (1 and 2 ranks at batch B, measured side by side in each repeat); weak scaling
keeps the batch per rank (1 rank at B / 2 against 2 ranks at B); and one more single-rank
point with twice the lookups lets the model tell dense work from sparse work. Every
measurement is one `dlrm-study bench --distributed` process group, through `measure.runner`:
repeats, interleaved, resumable, one record each (machine key at one thread: one core per rank).
"""

import math
from pathlib import Path

import pandas as pd

from dlrm_study import config, results
from dlrm_study.distributed import perf_model
from dlrm_study.distributed.processes import launch_fields
from dlrm_study.errors import UsageError
from dlrm_study.measure import runner, stats
from dlrm_study.records import columns as col
from dlrm_study.studies.profiles import RANKS

SCALING_BASE = ["name=dlrm-benchmark-scaled", "model.table_rows=8x100000", "data.lookups_per_table=20"]
SMOKE_BASE = ["model.table_rows=4x1000", "data.lookups_per_table=4"]
BATCH = {"smoke": 64, "quick": 1024, "full": 2048}  # the global batch B


def ranks_variant(ranks: int) -> str:
    return f"{ranks} rank" + ("s" if ranks > 1 else "")


def preset(profile: str) -> str:
    return "tiny" if profile == "smoke" else "dlrm-benchmark"


def points(profile: str) -> list[tuple[str, dict[int, list[str]]]]:
    """(label, {ranks: overrides}) of every point."""
    batch, p = BATCH[profile], RANKS[profile]
    base = SMOKE_BASE if profile == "smoke" else SCALING_BASE
    lookups = int(base[-1].split("=")[1])
    common = [*base[:-1], "train.loop=optimized", f"train.steps={p.steps}"]
    at = [*common, f"data.lookups_per_table={lookups}"]
    return [
        (f"batch {batch}", {1: [*at, f"train.batch_size={batch}"], 2: [*at, f"train.batch_size={batch}"]}),
        (f"batch {batch // 2}", {1: [*at, f"train.batch_size={batch // 2}"]}),
        (f"batch {batch}, {2 * lookups} lookups",
         {1: [*common, f"data.lookups_per_table={2 * lookups}", f"train.batch_size={batch}"]}),
    ]  # fmt: skip


def plan(profile: str) -> list[runner.Point]:
    return [
        (label, {ranks_variant(r): config.load(preset(profile), overrides) for r, overrides in by_ranks.items()})
        for label, by_ranks in points(profile)
    ]


def measure(profile: str, out: Path, progress: bool = True) -> pd.DataFrame:
    """Measure the points not yet recorded (each in its own torchrun), then return the study's records."""
    path, study, p = out / "scaling.csv", f"scaling-{profile}", RANKS[profile]
    overrides = {(label, ranks_variant(r)): o for label, by_ranks in points(profile) for r, o in by_ranks.items()}

    def measure_one(task: runner.Task) -> dict[str, object]:
        ranks = int(task.variant.split()[0])
        args = ["bench", "--distributed", "--config", preset(profile), "--steps", str(p.steps)]
        args += [
            "--warmup",
            str(p.warmup),
            *(item for o in overrides[task.point, task.variant] for item in ("--set", o)),
        ]
        return {**launch_fields(ranks, args), col.BUILDS: "every repeat (own processes)"}

    tasks = runner.schedule(plan(profile), p.repeats, runner.machine_of, threads=lambda _: 1)
    runner.run(tasks, measure_one, path, study, record_errors=False, progress=progress)
    return records(profile, out)


def records(profile: str, out: Path, machine: str | None = "this") -> pd.DataFrame:
    """The study's stored records for its current points, on one machine (one thread per rank)."""
    path = out / "scaling.csv"
    if not path.exists():
        raise UsageError(f"no records yet: {path} does not exist (run with measure=True)")
    labels = {(cfg.hash(), v): label for label, cfgs in plan(profile) for v, cfg in cfgs.items()}
    frame = results.load(path)
    pairs = list(zip(frame[col.CONFIG_HASH], frame[col.VARIANT].astype(str), strict=True))
    frame = frame[[pair in labels for pair in pairs]].copy()
    frame[col.POINT] = [labels[pair] for pair in zip(frame[col.CONFIG_HASH], frame[col.VARIANT], strict=True)]
    frame = results.select(frame, machine)
    return frame.sort_values(col.TIMESTAMP).drop_duplicates(
        [col.CONFIG_HASH, col.VARIANT, col.MACHINE, col.REPEAT], keep="last"
    )


def calibration_records(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The single-rank records the model is fitted on: all of them (every repeat counts), said so."""
    single = stats.with_flags(frame[frame[col.WORLD_SIZE] == 1])
    flagged = int(stats.flagged(single).sum())
    return single, f"fitted on all {len(single)} single-rank records ({flagged} flagged)" if flagged else ""


def measured_efficiency(frame: pd.DataFrame) -> dict[str, tuple[float, float, float]]:
    """Strong and weak scaling from 1 to 2 ranks, paired within repeats: (center, low, high) each.

    From all repeats; NaN where no repeat pairs up.
    """
    clean = stats.with_flags(frame)
    none = (math.nan, math.nan, math.nan)
    if clean.empty:
        return {"strong_speedup": none, "strong_efficiency": none, "weak_efficiency": none}
    batch = int(frame[col.BATCH_SIZE].max())
    base = clean[clean["data.lookups_per_table"] == frame["data.lookups_per_table"].min()]
    speedup = stats.paired_ratio(base[base[col.BATCH_SIZE] == batch], "2 ranks", "1 rank")[:3]
    rate = base.pivot_table(index=col.REPEAT, columns=[col.WORLD_SIZE, col.BATCH_SIZE], values=col.SAMPLES_PER_S)
    pairs = [(2, batch), (1, batch // 2)]
    weak = (rate[pairs[0]] / (2 * rate[pairs[1]])).dropna() if all(p in rate for p in pairs) else []
    return {
        "strong_speedup": speedup,
        "strong_efficiency": tuple(value / 2 for value in speedup),
        "weak_efficiency": stats.interval(weak),
    }


RANKS_PROJECTED = [1, 2, 4, 8, 16, 32, 64]


def perf_model_assumptions() -> str:
    """The projection's assumptions, as the figure states them."""
    return perf_model.ASSUMPTIONS


def model(records: pd.DataFrame) -> dict[str, object]:
    """The performance model on the study's records: fitted, checked, and projected to 64 ranks.

    Compute rates are fitted on the single-rank points (`calibration_records`), the link on the
    collectives timed alone at 2 ranks (`perf_model.fit_network`); the model with that link is
    checked on every point, then projected with the SC20 cluster's link (`OMNI_PATH_100G`),
    weak scaling at the measured batch per rank.
    """
    fitted_on, note = calibration_records(records)
    calibration = perf_model.fit(fitted_on)
    link = perf_model.fit_network(records)
    two = records[records[col.WORLD_SIZE] == 2].iloc[0]
    shape = perf_model.Shape.of(two)
    per_rank = int(two[col.BATCH_SIZE]) // 2
    projection = perf_model.project(calibration, shape, perf_model.OMNI_PATH_100G, RANKS_PROJECTED, per_rank)
    here = perf_model.project(calibration, shape, link, [1, 2], per_rank)  # what this machine can check
    return {
        "calibration": calibration,
        "note": note,
        "link": link,
        "check": perf_model.check(calibration, stats.with_flags(records), link),
        "shape": shape,
        "per_rank_batch": per_rank,
        "network": perf_model.OMNI_PATH_100G,
        "projection": projection,
        "here": here,
    }
