"""A sweep as data: a base config, a grid over fields, and the variants to bench at every point.

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

Its points (`points`), the runner's plan of them (`plan`: label -> {variant: config}) and the variants this CPU
skips (`runnable`) are read here; `measure.sweep` measures them. On a CPU without native bf16 the CPU loops' bf16
variants are skipped, with a note.
"""

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dlrm_study import config, platform
from dlrm_study.config.variants import REFERENCE, REGISTRY
from dlrm_study.errors import UsageError
from dlrm_study.records import outputs

Planned = tuple[str, dict[str, config.Config]]  # one point of a plan: its label and {variant: config}

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


def plan(sweep: Sweep, here: bool = True) -> tuple[list[Planned], list[str]]:
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
