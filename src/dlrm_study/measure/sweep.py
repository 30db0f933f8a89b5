"""Sweeps: a base config, a grid over fields, and the variants to bench at every point.

A sweep file (YAML):

    name: dense-features            # the `study` of its records
    config: tiny                    # preset or YAML file, or a list of them
    set: [train.batch_size=256]     # overrides of the base
    grid:                           # field -> values; every combination is a point
      model.dense_features: [13, 64, 256]
    variants: [reference, optimized-fp32]   # see config.variants.REGISTRY
    repeats: 3                      # measurements of every variant at every point, per run
    runs: 1                         # runs, each in its own order (runner.schedule), each its own process
                                    # where a launcher starts one per run (studies.runs)
    claim_runs: 0                   # runs of the points a claim's rule reads (0: `runs`)
    deciding: [dlrm-benchmark/optimized-bf16]   # those points, as point/variant
    steps: 10                       # timed steps of each, after warmup
    warmup: 2
    profile_steps: 1
    out: results/sweeps.csv

The points and variants run through `measure.runner`: run after run, each repeat after repeat, the
variants of a point interleaved in a rotated order drawn per run, one record per measurement appended
at once. Run again, a sweep skips every measurement already recorded for the same config, variant,
machine, library versions, code fingerprint and run slot (`records.store.resume_key`), whichever sweep
made it: a point two sweeps share (a sensitivity study's base point) is measured once per run. After a
change to the timed code every measurement is made again (the old records are kept). A variant that fails at a
point (invalid, out of memory, unsupported here) is recorded with its error, and the sweep
goes on. On a CPU without native bf16 the CPU loops' bf16 variants are skipped, with a note.
"""

import itertools
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from dlrm_study import config, platform
from dlrm_study.config.variants import (
    REFERENCE,
    REGISTRY,
)
from dlrm_study.errors import UsageError
from dlrm_study.measure import runner
from dlrm_study.measure.bench import measure_prepared
from dlrm_study.measure.prepared import Prepared, prepare
from dlrm_study.records import outputs

KEYS = {"name", "config", "set", "grid", "variants", "repeats", "runs", "steps", "warmup", "profile_steps", "out",
        "claim_runs", "deciding"}  # fmt: skip
COUNTS = ("repeats", "runs", "steps", "warmup", "profile_steps", "claim_runs")


@dataclass
class Sweep:
    name: str
    config: str | list[str] = "tiny"
    set: list[str] = field(default_factory=list)
    grid: dict[str, list] = field(default_factory=dict)
    variants: list[str] = field(default_factory=lambda: [REFERENCE])
    repeats: int = 3
    steps: int = 10
    warmup: int = 2
    profile_steps: int = 0
    out: str = "results/sweeps.csv"
    runs: int = 1  # run slots 1..runs, each its own run id (and process, under `studies.runs`)
    claim_runs: int = 0  # slots runs+1..claim_runs measure only `deciding`: the points a claim's rule reads
    deciding: list[str] = field(default_factory=list)  # "point/variant", e.g. "dlrm-benchmark/optimized-bf16"

    def decides(self, point: str, variant: str) -> bool:
        """Whether a claim's rule reads this point and variant (it gets `claim_runs` runs)."""
        return f"{point}/{variant}" in self.deciding


@dataclass
class Point:
    variant: str
    overrides: list[str]
    cfg: config.Config
    grid: list[str]  # this point's grid assignments (what varies across the sweep)
    base: str = ""  # the base config's name where the sweep has several (else the grid alone names a point)

    @property
    def label(self) -> str:
        """The point's name in records: its base (where the sweep has several) and its grid values."""
        return " ".join([self.base, *self.grid] if self.base else self.grid) or self.cfg.name


def load(path: Path) -> Sweep:
    """A sweep from YAML; unknown keys, variants, wrong types or config fields are refused up front."""
    doc = config.read_yaml(path, "sweep")
    if "name" not in doc:
        raise UsageError(f"{path}: a sweep is a mapping with at least a name")
    unknown = set(map(str, doc)) - KEYS
    if unknown:
        raise UsageError(f"{path}: unknown key {sorted(unknown)[0]!r}")
    check_types(path, doc)
    sweep = Sweep(**doc)
    bad = [v for v in sweep.variants if v not in REGISTRY]
    if bad:
        raise UsageError(f"{path}: unknown variant {bad[0]!r} (choose from {', '.join(REGISTRY)})")
    if sweep.repeats <= 0 or sweep.runs <= 0 or sweep.steps <= 0 or min(sweep.warmup, sweep.profile_steps,
                                                                             sweep.claim_runs) < 0:  # fmt: skip
        raise UsageError(f"{path}: repeats and steps must be positive, runs too; warmup and profile_steps not negative")
    outputs.check_records_file(Path(sweep.out), f"{path}: out")
    points(sweep)  # every point's config must load (unknown fields fail here, before anything runs)
    return sweep


def texts(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def check_types(path: Path, doc: dict) -> None:
    """Refuse, naming the key, a value of the wrong type (`steps: ten`, `grid: {k: 8}`, `set: [1]`)."""
    rules = {
        "name": (lambda v: isinstance(v, str) and v.strip() != "", "a name"),
        "config": (lambda v: isinstance(v, str) or (texts(v) and v != []), "a preset or YAML file, or a list of them"),
        "set": (texts, "a list of section.field=value overrides"),
        "grid": (
            lambda v: isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, list) for k, x in v.items()),
            "a mapping of each field to a list of values",
        ),
        "variants": (texts, "a list of variant names"),
        "deciding": (texts, "a list of point/variant names"),
        "out": (lambda v: isinstance(v, str) and v.strip() != "", "a CSV path"),
        **{key: (lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number") for key in COUNTS},
    }
    for key, (ok, what) in rules.items():
        if key in doc and not ok(doc[key]):
            raise UsageError(f"{path}: {key} must be {what}, got {doc[key]!r}")


def points(sweep: Sweep) -> list[Point]:
    """Every (grid combination, variant), in a fixed order; the timed steps are part of each config."""
    fields = list(sweep.grid)
    bases = [sweep.config] if isinstance(sweep.config, str) else list(sweep.config)
    names = {base: config.load(base).name if len(bases) > 1 else "" for base in bases}
    out = []
    for base, values in itertools.product(bases, itertools.product(*(sweep.grid[f] for f in fields))):
        grid = [item for f, v in zip(fields, values, strict=True) for item in assignments(f, v)]
        for variant in sweep.variants:
            overrides = [*sweep.set, *grid, *REGISTRY[variant], f"train.steps={sweep.steps}"]
            out.append(Point(variant, overrides, config.load(base, overrides), grid, names[base]))
    return out


def assignments(key: str, value: object) -> list[str]:
    """`a=v`, or for a coupled key `a+b` and a value `[va, vb]`, `a=va` and `b=vb`."""
    fields = key.split("+")
    values = value if len(fields) > 1 else [value]
    if not isinstance(values, list) or len(values) != len(fields):
        raise UsageError(f"grid {key!r}: each value must list one value per field, got {value!r}")
    return [f"{f}={config.format_value(v)}" for f, v in zip(fields, values, strict=True)]


def plan(sweep: Sweep, here: bool = True) -> tuple[list[runner.Point], list[str]]:
    """The runner's points (label -> {variant: config}) and the variants this CPU skips.

    `here=False`: every variant, whatever this CPU can run (to read other machines' records).
    """
    kept, skipped = runnable(sweep.variants) if here else (list(sweep.variants), [])
    grouped: dict[str, dict[str, config.Config]] = {}
    for point in points(sweep):
        if point.variant in kept:
            variants = grouped.setdefault(point.label, {})
            if point.variant in variants:  # one label, two configs: the second would replace the first
                raise UsageError(f"sweep {sweep.name}: {point.label!r} names two configs (name its bases apart)")
            variants[point.variant] = point.cfg
    return list(grouped.items()), skipped


def tasks(sweep: Sweep) -> list[runner.Task]:
    return runner.schedule(plan(sweep)[0], sweep.repeats, runner.machine_of, runs=sweep.runs,
                           claim_runs=sweep.claim_runs, deciding=sweep.decides)  # fmt: skip


def run(
    sweep: Sweep,
    retry_errors: bool = False,
    progress: bool = True,
    limit: int | None = None,
    deadline: float | None = None,
) -> runner.Counts:
    """Measure what is not yet recorded; `limit` and `deadline` stop early (see `runner.run`)."""
    return run_together([sweep], sweep.name, retry_errors, progress, limit, deadline)


def run_together(
    sweeps: Sequence[Sweep],
    study: str,
    retry_errors: bool = False,
    progress: bool = True,
    limit: int | None = None,
    deadline: float | None = None,
    only: Callable[[str, config.Config], bool] | None = None,
) -> runner.Counts:
    """Several sweeps measured as one run named `study`: each (config, variant) once (`merged_plan`),
    all in one repeat-major schedule, so any two points of any of the sweeps pair within a repeat.

    A one-knob sweep's ends are its own values; the base point it compares them with is shared by
    every sweep. Run one sweep at a time, the base is measured in the first sweep's run only, and
    the other sweeps' values have nothing of their own run to pair with. `only(variant, config)`:
    measure just these of the sweeps' points (a GPU session's targets first), under their own labels.
    """
    protocols = {(s.repeats, s.runs, s.claim_runs, s.steps, s.warmup, s.profile_steps, s.out) for s in sweeps}
    if len(protocols) != 1:
        names = ", ".join(s.name for s in sweeps)
        raise UsageError(
            f"sweeps run together share repeats, runs, steps, warm-up, profiling and records file: {names} do not"
        )
    first = sweeps[0]
    points_, skipped = merged_plan(sweeps, only)
    if skipped:
        print(skip_note(skipped), file=sys.stderr)
    devices = {cfg.train.device for _, cfgs in points_ for cfg in cfgs.values()}
    if "cuda" in devices and not torch.cuda.is_available():
        raise UsageError(f"sweep {study} runs on cuda but no CUDA GPU is available (set train.device=cpu)")

    def measure_run(prepared: Prepared, task: runner.Task) -> dict[str, object]:
        return measure_prepared(prepared, first.steps, first.warmup, first.profile_steps, progress=False)

    schedule = runner.schedule(points_, first.repeats, runner.machine_of, runs=first.runs,
                               claim_runs=first.claim_runs,
                               deciding=lambda p, v: any(s.decides(p, v) for s in sweeps))  # fmt: skip
    todo = runner.pending(schedule, Path(first.out), retry_errors=retry_errors)
    configs = list({(t.point, t.variant): t.cfg for t in todo}.values())  # the runs to build: what is left
    measure, kept = runner.with_kept_runs(points_, prepare, release, measure_run, configs)
    try:
        return runner.run(schedule, measure, Path(first.out), study, retry_errors=retry_errors,
                          progress=progress, limit=limit, deadline=deadline)  # fmt: skip
    finally:
        kept.clear()


def merged_plan(
    sweeps: Sequence[Sweep], only: Callable[[str, config.Config], bool] | None = None
) -> tuple[list[runner.Point], list[str]]:
    """The sweeps' points as one plan (see `plan`): each (config, variant) once, in the first sweep
    that has it; a label another sweep already gave to other configs gets its sweep's name.
    `only(variant, config)`: keep just these."""
    merged: dict[str, dict[str, config.Config]] = {}
    seen: set[tuple[str, str]] = set()
    skipped: list[str] = []
    for spec in sweeps:
        points_, skips = plan(spec)
        skipped += [v for v in skips if v not in skipped]
        for label, cfgs in points_:
            new = {v: cfg for v, cfg in cfgs.items() if (cfg.hash(), v) not in seen and (only is None or only(v, cfg))}
            if not new:
                continue
            seen |= {(cfg.hash(), v) for v, cfg in new.items()}
            merged[f"{spec.name}: {label}" if label in merged else label] = new
    return list(merged.items()), skipped


def release(prepared: Prepared) -> None:
    prepared.close()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()  # the next run starts from an empty cache, as a fresh process would


def runnable(variants: Sequence[str]) -> tuple[list[str], list[str]]:
    """(kept, skipped): a CPU without native bf16 skips the CPU loops' bf16 variants.

    They would run emulated, so their timings would say nothing about bf16 training; a
    study states what it skipped (`skip_note`) instead of drawing them.
    """
    if platform.native_bf16():
        return list(variants), []
    cpu_bf16 = [v for v in variants if v in REGISTRY and "train.precision=bf16" in REGISTRY[v] and is_cpu(v)]
    return [v for v in variants if v not in cpu_bf16], cpu_bf16


def is_cpu(variant: str) -> bool:
    return not any(o == "train.loop=gpu" for o in REGISTRY[variant])


def skip_note(skipped: Sequence[str]) -> str:
    return (
        f"note: this CPU has no native bf16 (no avx512_bf16 or amx_bf16): {', '.join(skipped)} not measured "
        "(emulated bf16 timings would not stand for bf16 training)"
    )
