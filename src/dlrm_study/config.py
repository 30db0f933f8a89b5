"""Model, data and training configs: dataclasses, presets, YAML, overrides, validation.

A config is three dataclasses (model, data, train) under one `Config`. It is built
from a preset or a YAML file, changed by `--set section.field=value` overrides and
validated before anything is allocated, so a config that cannot run is refused with
a message naming the field.
"""

import dataclasses
import hashlib
import itertools
import json
import math
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from dlrm_study.errors import UsageError

LOOPS = ("reference", "optimized", "torchrec", "gpu")
PRECISIONS = ("fp32", "bf16")
OPTIMIZERS = ("sgd", "rowwise_adagrad")  # for the tables; dense parameters always use SGD
DEVICES = ("cpu", "cuda", "auto")
# Where the gpu loop keeps its tables (see embeddings/placement.py). Per table: a comma list.
PLACEMENTS = ("hbm", "host", "uvm", "cached")
TORCHREC_PLACEMENTS = ("torchrec-fused", "torchrec-fused_uvm", "torchrec-fused_uvm_caching")
CACHE_POLICIES = ("lru", "lfu")
OPTIMIZED_SWITCHES = ("table_batching", "huge_pages", "fused_interaction")


@dataclass
class ModelConfig:
    """DLRM shape. MLP lists are layer output widths; inputs are derived."""

    dense_features: int = 13
    bottom_mlp: list[int] = field(default_factory=lambda: [16, 8])
    table_rows: list[int] = field(default_factory=lambda: [1000] * 4)
    embedding_dim: int = 8
    top_mlp: list[int] = field(default_factory=lambda: [16, 1])
    interaction: str = "dot"

    @property
    def num_tables(self) -> int:
        return len(self.table_rows)

    @property
    def bottom_layers(self) -> list[tuple[int, int]]:
        """(inputs, outputs) of each bottom-MLP layer."""
        widths = [self.dense_features, *self.bottom_mlp]
        return list(itertools.pairwise(widths))

    @property
    def top_layers(self) -> list[tuple[int, int]]:
        """(inputs, outputs) of each top-MLP layer."""
        widths = [self.interaction_width, *self.top_mlp]
        return list(itertools.pairwise(widths))

    @property
    def interaction_width(self) -> int:
        """Top-MLP input: bottom output plus one dot per pair of distinct features."""
        features = self.num_tables + 1
        return self.embedding_dim + features * (features - 1) // 2


@dataclass
class DataConfig:
    """Where batches come from and, for synthetic data, their statistics."""

    source: str = "synthetic"  # synthetic | criteo
    path: str = ""  # Criteo TSV file when source == criteo
    skip_bad_lines: bool = False
    lookups_per_table: int = 4  # pooling factor L (fixed) or its maximum (uniform)
    pooling: str = "uniform"  # fixed | uniform in [1, L]
    id_distribution: str = "uniform"  # uniform | zipf
    zipf_alpha: float = 1.05
    teacher_seed: int = 1234  # the fixed model that labels synthetic samples


@dataclass
class TrainConfig:
    """How one run trains and what it runs on."""

    loop: str = "reference"
    precision: str = "fp32"
    optimizer: str = "sgd"
    device: str = "cpu"
    batch_size: int = 64
    learning_rate: float = 0.01
    steps: int = 100
    seed: int = 0
    eval_batches: int = 16
    threads: int = 0  # 0: leave torch's default
    prefetch: int = 0  # batches made ahead on a background thread by `train` (0: inline; see README)
    placement: str = "hbm"  # gpu loop: hbm | host | uvm | cached | torchrec-* | auto, or one per table "hbm,host,..."
    cache_fraction: float = 0.1  # cached placement: share of all rows the device cache holds
    cache_policy: str = "lru"  # cached placement: lru | lfu
    # The optimized loop's techniques, each on by default; notebook 02's ablation adds them one at a time.
    table_batching: bool = True  # one kernel call for all tables (false: one call per table)
    huge_pages: bool = True  # tables on transparent huge pages where the OS allows
    fused_interaction: bool = True  # the fused dot-interaction kernel (false: bmm, as the reference)


@dataclass
class Config:
    name: str = "custom"
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, doc: dict) -> "Config":
        return cls(doc["name"], *(kind(**doc[section]) for section, kind in SECTIONS.items()))

    def flat(self) -> dict[str, object]:
        """`{"model.embedding_dim": 16, ...}` with lists written dlrm-style (`13-512-256`)."""
        out: dict[str, object] = {}
        for section in ("model", "data", "train"):
            for key, value in dataclasses.asdict(getattr(self, section)).items():
                out[f"{section}.{key}"] = format_value(value)
        return out

    def hash(self) -> str:
        """Short stable hash of everything that defines a measured point.

        A field added after records were first written is left out at the default that does
        what ran before it existed (LATER_FIELDS), so those records keep their identity.
        """
        doc = self.to_dict()
        for key, default in LATER_FIELDS.items():
            section, name = key.split(".")
            if doc[section][name] == default:
                del doc[section][name]
        blob = json.dumps(doc, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


SECTIONS = {"model": ModelConfig, "data": DataConfig, "train": TrainConfig}
# Fields added later, each with the default that reproduces what ran before it (see Config.hash).
LATER_FIELDS = {"train.table_batching": True, "train.huge_pages": True, "train.fused_interaction": True}


def format_value(value: object) -> object:
    if isinstance(value, list):
        return "-".join(str(v) for v in value)
    return value


# --- presets (DESIGN.md) -----------------------------------------------------

# Criteo Kaggle (Display Advertising Challenge) cardinalities of the 26 categorical
# features, as used by facebookresearch/dlrm's bench/dlrm_s_criteo_kaggle.sh.
KAGGLE_ROWS = [
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
    27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572,
]  # fmt: skip

# MLPerf DLRM (Criteo Terabyte, --max-ind-range=40000000) cardinalities.
MLPERF_ROWS = [
    39884406, 39043, 17289, 7420, 20263, 3, 7120, 1543, 63, 38532951, 2953546, 403346,
    10, 2208, 11938, 155, 4, 976, 14, 39979771, 25641295, 39664984, 585935, 12972,
    108, 36,
]  # fmt: skip

# Capped so the whole model (fp32 tables, dim 128) stays near 3.6 GB and fits a
# 24 GB development machine with room for optimizer state and activations.
MLPERF_ROW_CAP = 1_000_000


def preset(name: str) -> Config:
    """One of the presets of DESIGN.md, by name."""
    if name == "tiny":
        # Heavy-tailed ids, as in click logs, and a larger step: 300 steps then
        # learn the synthetic teacher well past AUC 0.75 (a smoke test of learning).
        return Config(
            name="tiny",
            data=DataConfig(id_distribution="zipf"),
            train=TrainConfig(learning_rate=0.3),
        )
    if name == "kaggle":
        return Config(
            name="kaggle",
            model=ModelConfig(13, [512, 256, 64, 16], KAGGLE_ROWS, 16, [512, 256, 1]),
            data=DataConfig(lookups_per_table=1, pooling="fixed"),
            train=TrainConfig(batch_size=128),
        )
    if name == "dlrm-benchmark":
        return Config(
            name="dlrm-benchmark",
            model=ModelConfig(512, [512, 64], [1_000_000] * 8, 64, [1024, 1024, 1024, 1]),
            data=DataConfig(lookups_per_table=100, pooling="fixed"),
            train=TrainConfig(batch_size=2048),
        )
    if name == "mlperf-scaled":
        rows = [min(n, MLPERF_ROW_CAP) for n in MLPERF_ROWS]
        return Config(
            name="mlperf-scaled",
            model=ModelConfig(13, [512, 256, 128], rows, 128, [1024, 1024, 512, 256, 1]),
            data=DataConfig(lookups_per_table=1, pooling="fixed"),
            train=TrainConfig(batch_size=2048),
        )
    raise UsageError(f"unknown preset {name!r} (choose from {', '.join(PRESETS)})")


PRESETS = ("tiny", "kaggle", "dlrm-benchmark", "mlperf-scaled")


# --- loading and overriding ----------------------------------------------------


def load(spec: str, overrides: typing.Sequence[str] = ()) -> Config:
    """A preset name or a YAML file, with `section.field=value` overrides applied."""
    if spec in PRESETS:
        cfg = preset(spec)
    elif spec.endswith((".yaml", ".yml")) or os.sep in spec:
        cfg = from_yaml(Path(spec))
    else:
        raise UsageError(f"--config {spec!r} is neither a preset ({', '.join(PRESETS)}) nor a YAML file")
    for item in overrides:
        apply_override(cfg, item)
    return cfg


def read_yaml(path: Path, what: str = "config") -> dict:
    """A YAML file holding a mapping, or a UsageError naming the file and what is wrong."""
    if not path.is_file():
        raise UsageError(f"{what} file not found: {path}")
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise UsageError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: expected a mapping at the top level")
    return doc


def from_yaml(path: Path) -> Config:
    """A YAML file: optional `base: PRESET`, `name`, and `model` / `data` / `train` sections."""
    doc = read_yaml(path)
    unknown = set(doc) - {"base", "name", *SECTIONS}
    if unknown:
        raise UsageError(f"{path}: unknown key {sorted(unknown)[0]!r}")
    cfg = preset(doc["base"]) if "base" in doc else Config()
    cfg.name = str(doc.get("name", path.stem))
    for section in SECTIONS:
        values = doc.get(section) or {}
        if not isinstance(values, dict):
            raise UsageError(f"{path}: section {section!r} must be a mapping")
        for key, value in values.items():
            set_field(cfg, f"{section}.{key}", value)
    return cfg


def apply_override(cfg: Config, item: str) -> None:
    """Apply one `section.field=value` override (value parsed as YAML, lists as `a-b-c` or `NxM`)."""
    if "=" not in item:
        raise UsageError(f"--set {item!r}: expected section.field=value")
    key, text = item.split("=", 1)
    set_field(cfg, key.strip(), parse_text(text.strip()))


def parse_text(text: str) -> object:
    try:
        return yaml.safe_load(text) if text else ""
    except yaml.YAMLError:
        return text


def set_field(cfg: Config, key: str, value: object) -> None:
    if key == "name":  # a changed config names itself (records and captions say what ran)
        if not isinstance(value, str) or not value.strip():
            raise UsageError(f"name: {value!r} is not a valid name")
        cfg.name = value.strip()
        return
    section, _, name = key.partition(".")
    if section not in SECTIONS or not name:
        raise UsageError(f"unknown config key {key!r} (expected name, model.*, data.* or train.*)")
    target = getattr(cfg, section)
    hints = typing.get_type_hints(type(target))
    if name not in hints:
        raise UsageError(f"unknown config key {key!r}")
    setattr(target, name, coerce(key, value, hints[name]))


def coerce(key: str, value: object, kind: type) -> object:
    """Convert a YAML or command-line value to the field's type, or say which key is wrong."""
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            raise ValueError
        if kind is int:
            if isinstance(value, bool) or float(value) != int(float(value)):
                raise ValueError
            return int(float(value))
        if kind is float:
            number = float(value)
            if not math.isfinite(number):  # nan and inf pass every comparison test below: refuse them here
                raise ValueError
            return number
        if kind is str:
            return str(value)
        if typing.get_origin(kind) is list:
            return parse_int_list(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf)
        pass
    name = getattr(kind, "__name__", str(kind))
    if kind is float:
        name = "finite float"
    raise UsageError(f"{key}: {value!r} is not a valid {name}")


def parse_int_list(value: object) -> list[int]:
    """`[1, 2]`, `1-2`, `4x1000` (four times 1000) or a single int."""
    if isinstance(value, list):
        items = value
    elif isinstance(value, int) and not isinstance(value, bool):
        items = [value]
    elif isinstance(value, str):
        items = []
        for part in value.split("-"):
            count, times, size = part.partition("x")
            items += [int(size)] * int(count) if times else [int(part)]
    else:
        raise ValueError
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        raise ValueError
    return list(items)


# --- validation ----------------------------------------------------------------


def validate(cfg: Config) -> Config:
    """Refuse, naming the field, any config that cannot run; return it unchanged otherwise."""
    m, d, t = cfg.model, cfg.data, cfg.train
    positive = {
        "model.dense_features": m.dense_features,
        "model.embedding_dim": m.embedding_dim,
        "data.lookups_per_table": d.lookups_per_table,
        "train.batch_size": t.batch_size,
        "train.eval_batches": t.eval_batches,
    }
    for key, value in positive.items():
        if value <= 0:
            raise UsageError(f"{key} must be positive, got {value}")
    for key, widths in {"model.bottom_mlp": m.bottom_mlp, "model.top_mlp": m.top_mlp}.items():
        if not widths or min(widths) <= 0:
            raise UsageError(f"{key} must be a non-empty list of positive widths, got {widths}")
    if not m.table_rows or min(m.table_rows) <= 0:
        raise UsageError(f"model.table_rows must be a non-empty list of positive sizes, got {m.table_rows}")
    if t.steps < 0 or t.threads < 0 or t.prefetch < 0:
        raise UsageError("train.steps, train.threads and train.prefetch must not be negative")
    for key, seed in {"train.seed": t.seed, "data.teacher_seed": d.teacher_seed}.items():
        if not 0 <= seed < 2**32:  # what numpy and torch generators accept
            raise UsageError(f"{key} must be in [0, 2**32), got {seed}")
    if t.learning_rate <= 0:
        raise UsageError(f"train.learning_rate must be positive, got {t.learning_rate}")
    if m.interaction != "dot":
        raise UsageError(f"model.interaction {m.interaction!r} is not supported (only 'dot')")
    if m.bottom_mlp[-1] != m.embedding_dim:
        raise UsageError(
            f"model.bottom_mlp ends in {m.bottom_mlp[-1]} but the dot interaction needs "
            f"it to equal model.embedding_dim ({m.embedding_dim})"
        )
    if m.top_mlp[-1] != 1:
        raise UsageError(f"model.top_mlp must end in 1 (one logit), got {m.top_mlp[-1]}")
    choices = {
        "data.source": (d.source, ("synthetic", "criteo")),
        "data.pooling": (d.pooling, ("fixed", "uniform")),
        "data.id_distribution": (d.id_distribution, ("uniform", "zipf")),
        "train.loop": (t.loop, LOOPS),
        "train.precision": (t.precision, PRECISIONS),
        "train.optimizer": (t.optimizer, OPTIMIZERS),
        "train.device": (t.device, DEVICES),
    }
    for key, (value, allowed) in choices.items():
        if value not in allowed:
            raise UsageError(f"{key} {value!r} is not one of {', '.join(allowed)}")
    if t.loop in ("optimized", "torchrec") and t.device == "cuda":
        raise UsageError(f"train.loop {t.loop} runs on the CPU; use train.device=cpu (or train.loop=gpu)")
    validate_placement(cfg)
    switched_off = [name for name in OPTIMIZED_SWITCHES if not getattr(t, name)]
    if switched_off and t.loop != "optimized":
        raise UsageError(
            f"train.{switched_off[0]} switches a technique of the optimized loop (set train.loop=optimized)"
        )
    if t.precision == "bf16" and t.loop == "reference":
        raise UsageError("train.precision bf16 needs the optimized loop (the reference is fp32, as in dlrm)")
    if d.id_distribution == "zipf" and d.zipf_alpha <= 0:
        raise UsageError(f"data.zipf_alpha must be positive, got {d.zipf_alpha}")
    if d.source == "criteo":
        if not d.path:
            raise UsageError("data.path must name a Criteo TSV file when data.source is criteo")
        if m.dense_features != 13 or m.num_tables != 26:
            raise UsageError(
                "Criteo data has 13 dense and 26 categorical features: set model.dense_features=13 "
                f"and 26 model.table_rows (got {m.dense_features} and {m.num_tables})"
            )
    return cfg


def placements(cfg: Config) -> list[str]:
    """The placement of each table: `train.placement` repeated, or its comma list."""
    parts = [p.strip() for p in cfg.train.placement.split(",")]
    return parts * cfg.model.num_tables if len(parts) == 1 else parts


def validate_placement(cfg: Config) -> None:
    t = cfg.train
    if t.loop != "gpu":
        if t.placement != "hbm":
            raise UsageError(f"train.placement {t.placement} applies to the gpu loop only (set train.loop=gpu)")
        return
    single = (*PLACEMENTS, *TORCHREC_PLACEMENTS, "auto")
    each = placements(cfg)
    if "," in t.placement:
        if len(each) != cfg.model.num_tables:
            raise UsageError(
                f"train.placement lists {len(each)} placements for {cfg.model.num_tables} tables (one per table)"
            )
        bad = [p for p in each if p not in PLACEMENTS]
        if bad:
            raise UsageError(f"train.placement {bad[0]!r} in a per-table list is not one of {', '.join(PLACEMENTS)}")
    elif t.placement not in single:
        raise UsageError(f"train.placement {t.placement!r} is not one of {', '.join(single)} (or a per-table list)")
    if not 0 < t.cache_fraction <= 1:
        raise UsageError(f"train.cache_fraction must be in (0, 1], got {t.cache_fraction}")
    if t.cache_policy not in CACHE_POLICIES:
        raise UsageError(f"train.cache_policy {t.cache_policy!r} is not one of {', '.join(CACHE_POLICIES)}")
    if t.precision == "bf16" and t.placement.startswith("torchrec"):
        raise UsageError("train.precision bf16 with a torchrec placement is not supported; use fp32")


# --- memory estimate -------------------------------------------------------------

GiB = 1024**3


@dataclass
class MemoryEstimate:
    tables: int
    optimizer_state: int
    dense: int
    activations: int

    @property
    def total(self) -> int:
        return self.tables + self.optimizer_state + self.dense + self.activations


def estimate_memory(cfg: Config) -> MemoryEstimate:
    """Bytes a training run needs: fp32 tables, optimizer state, dense params, activations.

    Activations count each MLP layer's output kept for backward and its gradient, the
    interaction, and the reference loop's sparse gradient (one row per looked-up id).
    """
    m, b, lookups = cfg.model, cfg.train.batch_size, cfg.data.lookups_per_table
    rows = sum(m.table_rows)
    tables = rows * m.embedding_dim * 4
    optimizer_state = 0  # plain SGD keeps none
    layers = m.bottom_layers + m.top_layers
    dense_params = sum(fan_in * fan_out + fan_out for fan_in, fan_out in layers)
    widths = [m.dense_features, *m.bottom_mlp, m.interaction_width, *m.top_mlp]
    features = m.num_tables + 1
    per_sample = 2 * sum(widths) + 3 * features * m.embedding_dim + 2 * features * features
    ids = b * m.num_tables * lookups
    activations = 2 * b * per_sample * 4 + ids * (8 * 3 + m.embedding_dim * 4)
    return MemoryEstimate(tables, optimizer_state, dense_params * 4 * 3, activations)


def available_memory(device: str) -> int:
    """Bytes free on `device` now: MemAvailable for the CPU, free memory for a GPU."""
    if device.startswith("cuda"):
        import torch

        free, _total = torch.cuda.mem_get_info()
        return free
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def table_bytes(cfg: Config, placement: str) -> tuple[int, int]:
    """(device, host) bytes of all tables and their optimizer state if every table had `placement`."""
    m, t = cfg.model, cfg.train
    rows = sum(m.table_rows)
    table = rows * (m.embedding_dim + (t.optimizer == "rowwise_adagrad")) * 4
    if placement in ("hbm", "torchrec-fused"):
        return table, 0
    if placement == "cached":  # the cached rows, plus 8 bytes per row (its slot) and 24 per slot
        slots = max(1, math.ceil(t.cache_fraction * rows))
        return slots * (table // rows + 24) + rows * 8, table
    if placement == "torchrec-fused_uvm_caching":  # torchrec's default cache: 20% of rows
        return table // 5, table
    return 0, table  # host, uvm, torchrec-fused_uvm


def split_memory(cfg: Config) -> tuple[int, int]:
    """(device, host) bytes of a gpu-loop run with its per-table placements."""
    need = estimate_memory(cfg)
    device = need.dense + need.activations
    host = 0
    for rows, placement in zip(cfg.model.table_rows, placements(cfg), strict=True):
        one = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, table_rows=[rows]))
        on_device, on_host = table_bytes(one, placement)
        device, host = device + on_device, host + on_host
    return device, host


def check_fits(cfg: Config, device: str) -> MemoryEstimate:
    """Refuse, before allocation, a config whose estimate exceeds what `device` has free."""
    need = estimate_memory(cfg)
    if cfg.train.loop == "gpu" and device.startswith("cuda"):
        check_split_fits(cfg, device)
        return need
    have = available_memory(device)
    if need.total > have:
        raise UsageError(
            f"config {cfg.name!r} needs about {need.total / GiB:.1f} GiB "
            f"(tables {need.tables / GiB:.1f}, optimizer {need.optimizer_state / GiB:.1f}, "
            f"activations {need.activations / GiB:.1f}) but {device} has {have / GiB:.1f} GiB available"
        )
    return need


def check_split_fits(cfg: Config, device: str) -> None:
    """The gpu loop's share on the GPU and its share in host memory, each checked against what is free."""
    on_device, on_host = split_memory(cfg)
    for where, need in ((device, on_device), ("host", on_host)):
        have = available_memory("cpu" if where == "host" else device)
        if need > have:
            raise UsageError(
                f"config {cfg.name!r} with placement {cfg.train.placement} needs about {need / GiB:.1f} GiB "
                f"in {where} memory but {have / GiB:.1f} GiB is available (choose another train.placement)"
            )


# Expected speed, fastest first: device memory, hot rows cached on the device, rows read
# over PCIe by GPU kernels, then CPU lookups. Notebook 05 measures the order.
AUTO_ORDER = ("hbm", "cached", "uvm", "host")


def resolve_placement(cfg: Config, device: str) -> str:
    """`auto` -> the first placement of AUTO_ORDER that fits on `device` (others unchanged)."""
    if cfg.train.loop != "gpu" or cfg.train.placement != "auto":
        return cfg.train.placement
    if not device.startswith("cuda"):
        return "hbm"  # the CPU is its own device memory
    reasons = []
    for placement in AUTO_ORDER:
        trial = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, placement=placement))
        try:
            check_split_fits(trial, device)
            return placement
        except UsageError as err:
            reasons.append(str(err))
    raise UsageError(f"train.placement auto: no placement fits ({reasons[-1]})")
