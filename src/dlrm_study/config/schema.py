"""The config's shape: three dataclasses (model, data, train) under one `Config`, and the allowed choices.

What picks code (the loop, the precision, where tables live) is an enum, so a module compares
members, never spelled strings. They are `StrEnum`s: a member is its text wherever a config is
written (YAML, records, hashes), so the stored configs and config hashes are those of plain text.
"""

import dataclasses
import enum
import hashlib
import itertools
import json
from dataclasses import dataclass, field


class Loop(enum.StrEnum):
    """The training loop: facebookresearch/dlrm's, SC20's optimized CPU loop, torchrec's, the GPU's."""

    REFERENCE = "reference"
    OPTIMIZED = "optimized"
    TORCHREC = "torchrec"
    GPU = "gpu"


class Precision(enum.StrEnum):
    FP32 = "fp32"
    BF16 = "bf16"


class Placement(enum.StrEnum):
    """Where the gpu loop keeps its tables (model/tables/placement.py); `train.placement` may list one per table."""

    HBM = "hbm"
    HOST = "host"
    UVM = "uvm"
    CACHED = "cached"
    TORCHREC_FUSED = "torchrec-fused"
    TORCHREC_FUSED_UVM = "torchrec-fused_uvm"
    TORCHREC_FUSED_UVM_CACHING = "torchrec-fused_uvm_caching"
    AUTO = "auto"  # the fastest placement that fits (config/auto_placement.py)


LOOPS = tuple(Loop)
PRECISIONS = tuple(Precision)
OPTIMIZERS = ("sgd", "rowwise_adagrad")  # for the tables; dense parameters always use SGD
DEVICES = ("cpu", "cuda", "auto")
# Per-table placements (a comma list may name these), and torchrec's, which place every table.
PLACEMENTS = (Placement.HBM, Placement.HOST, Placement.UVM, Placement.CACHED)
TORCHREC_PLACEMENTS = (Placement.TORCHREC_FUSED, Placement.TORCHREC_FUSED_UVM, Placement.TORCHREC_FUSED_UVM_CACHING)
# The fields that pick code, and their enums: a valid text given for one becomes its member.
CHOICES: dict[str, type[enum.StrEnum]] = {"loop": Loop, "precision": Precision, "placement": Placement}
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
    teacher: str = "additive"  # additive | dlrm (data/synthetic.py)


@dataclass
class TrainConfig:
    """How one run trains and what it runs on."""

    loop: Loop = Loop.REFERENCE
    precision: Precision = Precision.FP32
    optimizer: str = "sgd"
    device: str = "cpu"
    batch_size: int = 64
    learning_rate: float = 0.01
    steps: int = 100
    seed: int = 0
    eval_batches: int = 16
    threads: int = 0  # 0: leave torch's default
    prefetch: int = 0  # batches made ahead on a background thread by `train` (0: inline; see README)
    placement: str = Placement.HBM  # gpu loop: a Placement, or one per table ("hbm,host,...")
    cache_fraction: float = 0.1  # cached placement: share of all rows the device cache holds
    cache_policy: str = "lru"  # cached placement: lru | lfu
    # gpu loop on a GPU: the whole step captured as a CUDA graph where the placement's shapes are
    # fixed (false: eager, the gpu-eager variant); records say which ran (`capture`).
    cuda_graph: bool = True
    # The optimized loop's techniques, each on by default; notebook 02's ablation adds them one at a time.
    table_batching: bool = True  # one kernel call for all tables (false: one call per table)
    huge_pages: bool = True  # tables on transparent huge pages where the OS allows
    # The fused dense path: the dot-interaction kernel and the MLP layers as oneDNN matmuls with bias and ReLU
    # fused in (false: bmm and nn.Linear, as the reference).
    fused_interaction: bool = True
    # bf16 in the optimized loop: Split-SGD keeps each weight's lower 16 bits (false: plain bf16 weights, each
    # update rounded to bf16, the variant Split-SGD exists to beat; see train/split_sgd.py).
    split_sgd: bool = True

    def __post_init__(self) -> None:
        for name, kind in CHOICES.items():  # a config made from text (a checkpoint, a test) holds members too
            setattr(self, name, as_member(kind, getattr(self, name)))


@dataclass
class Config:
    name: str = "custom"
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict:
        """Plain values only (a choice as its text), as YAML, JSON and checkpoints store them."""
        return dataclasses.asdict(self, dict_factory=lambda items: {k: plain(v) for k, v in items})

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
LATER_FIELDS = {
    "train.table_batching": True,
    "train.huge_pages": True,
    "train.fused_interaction": True,
    # Before it existed the gpu loop ran eager: records tell the two apart by their `capture` field.
    "train.cuda_graph": True,
    "data.teacher": "additive",
    # Before it existed bf16 always kept Split-SGD's lower halves (false: plain bf16 weights and SGD).
    "train.split_sgd": True,
}


def plain(value: object) -> object:
    """A choice's text (`Loop.GPU` -> "gpu"); any other value as it is."""
    return str(value) if isinstance(value, enum.Enum) else value


def as_member(kind: type[enum.StrEnum], value: object) -> object:
    """`value` as a member of `kind` where it names one; else unchanged (`validate` refuses it, naming the field)."""
    try:
        return kind(value)
    except ValueError:
        return value


def format_value(value: object) -> object:
    if isinstance(value, list):
        return "-".join(str(v) for v in value)
    return value
