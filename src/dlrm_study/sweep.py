"""Sweeps: a base config, a grid over fields, and the variants to bench at every point.

A sweep file (YAML):

    name: dense-features            # the `study` of its records
    config: tiny                    # preset or YAML file, or a list of them
    set: [train.batch_size=256]     # overrides of the base
    grid:                           # field -> values; every combination is a point
      model.dense_features: [13, 64, 256]
    variants: [reference, optimized-fp32]   # see measure.compare.VARIANTS
    steps: 10
    warmup: 2
    profile_steps: 1
    out: results/sweeps.csv

Each finished point is appended to `out` at once (atomically), so a killed sweep loses
at most the point it was running; run again, it skips every point already recorded for
the same config and environment (hardware, threads, software versions). A point that
fails (invalid, out of memory, unsupported here) becomes a record with its error, and
the sweep goes on.
"""

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from dlrm_study import config, results
from dlrm_study.errors import UsageError
from dlrm_study.measure.bench import bench
from dlrm_study.measure.compare import VARIANTS

KEYS = {"name", "config", "set", "grid", "variants", "steps", "warmup", "profile_steps", "out"}


@dataclass
class Sweep:
    name: str
    config: str | list[str] = "tiny"
    set: list[str] = field(default_factory=list)
    grid: dict[str, list] = field(default_factory=dict)
    variants: list[str] = field(default_factory=lambda: ["reference"])
    steps: int = 10
    warmup: int = 2
    profile_steps: int = 0
    out: str = "results/sweeps.csv"


@dataclass
class Point:
    variant: str
    overrides: list[str]
    cfg: config.Config
    grid: list[str]  # this point's grid assignments (what varies across the sweep)


def load(path: Path) -> Sweep:
    """A sweep from YAML; unknown keys, variants or config fields are refused up front."""
    doc = config.read_yaml(path, "sweep")
    if "name" not in doc:
        raise UsageError(f"{path}: a sweep is a mapping with at least a name")
    unknown = set(doc) - KEYS
    if unknown:
        raise UsageError(f"{path}: unknown key {sorted(unknown)[0]!r}")
    sweep = Sweep(**doc)
    bad = [v for v in sweep.variants if v not in VARIANTS]
    if bad:
        raise UsageError(f"{path}: unknown variant {bad[0]!r} (choose from {', '.join(VARIANTS)})")
    if sweep.steps <= 0 or sweep.warmup < 0 or sweep.profile_steps < 0:
        raise UsageError(f"{path}: steps must be positive, warmup and profile_steps not negative")
    points(sweep)  # every point's config must load (unknown fields fail here, before anything runs)
    return sweep


def points(sweep: Sweep) -> list[Point]:
    """Every (grid combination, variant), in a fixed order."""
    fields = list(sweep.grid)
    bases = [sweep.config] if isinstance(sweep.config, str) else list(sweep.config)
    out = []
    for base, values in itertools.product(bases, itertools.product(*(sweep.grid[f] for f in fields))):
        grid = [item for f, v in zip(fields, values, strict=True) for item in assignments(f, v)]
        for variant in sweep.variants:
            overrides = [*sweep.set, *grid, *VARIANTS[variant]]
            out.append(Point(variant, overrides, config.load(base, overrides), grid))
    return out


def assignments(key: str, value: object) -> list[str]:
    """`a=v`, or for a coupled key `a+b` and a value `[va, vb]`, `a=va` and `b=vb`."""
    fields = key.split("+")
    values = value if len(fields) > 1 else [value]
    if not isinstance(values, list) or len(values) != len(fields):
        raise UsageError(f"grid {key!r}: each value must list one value per field, got {value!r}")
    return [f"{f}={config.format_value(v)}" for f, v in zip(fields, values, strict=True)]


def environment(device: str = "cpu", threads: int | None = None) -> dict[str, object]:
    """What makes two measurements of one config comparable: hardware, threads, software.

    `threads`: the intra-op threads the measurement runs with, where not this process's (a rank's).
    """
    prov = results.provenance(device)
    keys = ("device_name", "gpu_model", "threads", "torch_version", "torchrec_version", "fbgemm_gpu_cpu_version")
    env = {k: prov[k] for k in keys}
    if threads is not None:
        env["threads"] = threads
    env_key = hashlib.sha256(json.dumps(env, sort_keys=True).encode()).hexdigest()[:12]
    return {"env_key": env_key, **env}


def recorded(sweep: Sweep, retry_errors: bool = False) -> set[tuple[str, str, str]]:
    """(study, point, environment) of the points `out` already holds (failed ones too, unless `retry_errors`)."""
    _, rows = results.read_rows(Path(sweep.out))
    return {
        (r.get("study", ""), r.get("sweep_point", ""), r.get("env_key", ""))
        for r in rows
        if not (retry_errors and r.get("error"))
    }


def run(sweep: Sweep, retry_errors: bool = False, progress: bool = True, limit: int | None = None) -> dict[str, int]:
    """Bench the points not yet recorded; returns counts of done, skipped and failed points.

    `limit` stops after that many new points (tests use it to stand for a killed sweep).
    """
    done = recorded(sweep, retry_errors)
    planned = points(sweep)
    devices = {point_device(p) for p in planned}
    if "cuda" in devices and not torch.cuda.is_available():
        raise UsageError(f"sweep {sweep.name} runs on cuda but no CUDA GPU is available (set train.device=cpu)")
    envs = {device: environment(device) for device in devices}
    todo = [p for p in planned if (sweep.name, p.cfg.hash(), envs[point_device(p)]["env_key"]) not in done]
    counts = {"points": len(planned), "skipped": len(planned) - len(todo), "ran": 0, "failed": 0}
    for point in tqdm(todo[:limit], desc=f"sweep {sweep.name}", unit="point", disable=not progress):
        # The point is keyed by the config it asked for (build may adjust it, e.g. bf16 -> fp32).
        key = point.cfg.hash()
        record = measure(sweep, point)
        record.update(variant=point.variant, sweep_point=key, grid=" ".join(point.grid), **envs[point_device(point)])
        results.append(Path(sweep.out), record)
        counts["ran"] += 1
        counts["failed"] += bool(record["error"])
    return counts


def point_device(point: Point) -> str:
    """The device a point runs on (`auto` resolved as the loop would)."""
    device = point.cfg.train.device
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def measure(sweep: Sweep, point: Point) -> dict[str, object]:
    """One point's bench record, or a record of why it could not be measured."""
    cfg = config.Config.from_dict(point.cfg.to_dict())  # bench may adjust its copy
    try:
        return bench(cfg, sweep.steps, sweep.warmup, sweep.profile_steps, study=sweep.name, progress=False)
    except (UsageError, RuntimeError, MemoryError) as err:
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return {
            "study": sweep.name,
            "config_name": cfg.name,
            "config_hash": cfg.hash(),
            "loop": cfg.train.loop,
            "precision": cfg.train.precision,
            "error": f"{type(err).__name__}: {message}",
            **cfg.flat(),
            **results.provenance(point_device(point)),
        }


def records(sweep: Sweep):  # -> pandas.DataFrame
    """The sweep's measured points (errors left out), the latest record of each current point."""
    path = Path(sweep.out)
    if not path.exists():
        raise UsageError(f"no records yet: {path} does not exist (run the sweep, or measure=True)")
    frame = results.load(path)
    # This spec's points only: records of a config since changed (a new field, say) are kept
    # in the file but not mixed into the figure.
    wanted = {point.cfg.hash() for point in points(sweep)}
    frame = frame[(frame["study"] == sweep.name) & frame["sweep_point"].isin(wanted)]
    if "error" in frame:
        frame = frame[frame["error"].isna()]
    return frame.sort_values("timestamp").drop_duplicates(["variant", "sweep_point"], keep="last")
