"""Variants: the names records give to what ran (loop, precision, placement, switches), both ways.

A variant name stands for config overrides (`Variant.named(name).overrides`), and a config
has one name (`Variant.of(cfg).name`): the registered variant whose overrides, applied to
any base, give the config's variant-relevant fields (`FIELDS`). The two are inverses for every
registered variant (tests/test_variants.py), so `dlrm-study bench` and a sweep label one
config alike, and their resume keys agree; an alias (`host-optimized-fp32`: a CPU loop measured
in a GPU's sweep) names its loop's config and reads back as the loop's name. A config no
registered variant describes gets a descriptive name (`optimized-fp32-no-huge-pages`), which
names no variant.
"""

import dataclasses

from dlrm_study.config import Config, apply_override
from dlrm_study.config.schema import Loop, Placement, Precision

# The fields a variant sets: what ran, apart from the model and the data.
FIELDS = (
    "loop", "precision", "placement", "cache_policy", "cuda_graph", "table_batching", "huge_pages", "fused_interaction",
    "split_sgd",
)  # fmt: skip
HOST = "host-"  # a CPU loop run on a GPU machine's host, in the GPU's sweep: GPU over CPU paired in one run
SWITCHES = ("table_batching", "huge_pages", "fused_interaction")  # the optimized loop's techniques

# The registered names, for readers that pick records of one variant (each is a REGISTRY key).
REFERENCE, TORCHREC, OPTIMIZED_FP32, OPTIMIZED_BF16 = "reference", "torchrec", "optimized-fp32", "optimized-bf16"
PLAIN_BF16 = "optimized-bf16-plain-sgd"  # bf16 weights, no Split-SGD lower halves: the control S3's accuracy needs
GPU_HBM, GPU_HBM_FP32, GPU_EAGER = "gpu-hbm", "gpu-hbm-fp32", "gpu-eager"
GPU_HOST, GPU_UVM, GPU_CACHED, GPU_CACHED_LFU = "gpu-host", "gpu-uvm", "gpu-cached", "gpu-cached-lfu"
FUSED_UPDATE, TABLE_BATCHING, HUGE_PAGES = "fused-update", "+table-batching", "+huge-pages"

REGISTRY: dict[str, list[str]] = {
    REFERENCE: ["train.loop=reference"],
    OPTIMIZED_FP32: ["train.loop=optimized", "train.precision=fp32"],
    OPTIMIZED_BF16: ["train.loop=optimized", "train.precision=bf16"],
    PLAIN_BF16: ["train.loop=optimized", "train.precision=bf16", "train.split_sgd=false"],
    TORCHREC: ["train.loop=torchrec"],
    # The gpu loop: the dense part in bf16 (autocast) unless -fp32; tables placed as named.
    # The device is the sweep's to set (train.device=cuda; cpu for a dry run of the GPU script).
    GPU_HBM_FP32: ["train.loop=gpu", "train.placement=hbm", "train.precision=fp32"],
    GPU_HBM: ["train.loop=gpu", "train.placement=hbm", "train.precision=bf16"],
    GPU_HOST: ["train.loop=gpu", "train.placement=host", "train.precision=bf16"],
    GPU_UVM: ["train.loop=gpu", "train.placement=uvm", "train.precision=bf16"],
    GPU_CACHED: ["train.loop=gpu", "train.placement=cached", "train.precision=bf16"],
    GPU_CACHED_LFU: ["train.loop=gpu", "train.placement=cached", "train.cache_policy=lfu", "train.precision=bf16"],
    # gpu-hbm's step run eagerly, not captured as a CUDA graph: what the capture buys.
    GPU_EAGER: ["train.loop=gpu", "train.placement=hbm", "train.precision=bf16", "train.cuda_graph=false"],
}
# Aliases: the CPU loops on the host of a GPU, in the GPU grid's own sweep (whose device is the GPU's, so
# they set device=cpu back). Their configs are the plain loops'; the name says where they were measured,
# and `Variant.of` gives the plain name.
# (The reference loop too: the same-host pair, plans.gpu.same_host; the sensitivity grid's host loops
# are the optimized ones, so it does not gain one.)
ALIASES = {f"{HOST}{name}": name for name in (REFERENCE, OPTIMIZED_FP32, OPTIMIZED_BF16)}
REGISTRY |= {alias: [*REGISTRY[name], "train.device=cpu"] for alias, name in ALIASES.items()}
HOST_REFERENCE, HOST_OPTIMIZED_BF16 = f"{HOST}{REFERENCE}", f"{HOST}{OPTIMIZED_BF16}"
# Notebook 02's ablation: the reference, then the optimized loop's techniques added one at a time.
_OFF = ["train.loop=optimized", "train.precision=fp32", "train.huge_pages=false", "train.fused_interaction=false"]
REGISTRY |= {
    FUSED_UPDATE: [*_OFF, "train.table_batching=false"],
    TABLE_BATCHING: _OFF,
    HUGE_PAGES: [*_OFF[:2], "train.fused_interaction=false"],
}

# The groups studies run and readers show, in their order.
CPU_LOOPS = (REFERENCE, OPTIMIZED_FP32, OPTIMIZED_BF16, TORCHREC)  # `dlrm-study compare`'s default
BF16_PAIR = (OPTIMIZED_FP32, OPTIMIZED_BF16)  # the optimized loop in fp32 and in bf16 (S3)
ACCURACY_PRECISIONS = (*BF16_PAIR, PLAIN_BF16)  # S3's accuracy half: the pair, and the control that must fail
# `optimized-fp32` is the ablation's step that adds the fused interaction, `optimized-bf16` the one that adds bf16.
ABLATION = (REFERENCE, FUSED_UPDATE, TABLE_BATCHING, HUGE_PAGES, OPTIMIZED_FP32, OPTIMIZED_BF16)
GPU_PLACEMENTS = (GPU_HBM, GPU_CACHED, GPU_CACHED_LFU, GPU_UVM, GPU_HOST)
GPU_PRESETS = (GPU_HBM, GPU_HBM_FP32, GPU_EAGER)  # bf16 against fp32, graph against eager
# The order figures and tables show variants in (then any others, in their own order).
ORDER = (
    REFERENCE, FUSED_UPDATE, TABLE_BATCHING, HUGE_PAGES, TORCHREC, OPTIMIZED_FP32, OPTIMIZED_BF16, PLAIN_BF16,
    GPU_HBM_FP32, GPU_HBM, GPU_CACHED, GPU_CACHED_LFU, GPU_UVM, GPU_HOST,
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str

    @property
    def overrides(self) -> list[str]:
        return list(REGISTRY[self.name])

    def setting(self, field: str) -> str | None:
        """The value this variant gives `train.<field>` (None: it leaves the base's)."""
        found = [item.partition("=")[2] for item in REGISTRY[self.name] if item.partition("=")[0] == f"train.{field}"]
        return found[-1] if found else None

    @classmethod
    def named(cls, name: str) -> "Variant":
        if name not in REGISTRY:
            raise KeyError(f"unknown variant {name!r} (choose from {', '.join(REGISTRY)})")
        return cls(name)

    @classmethod
    def of(cls, cfg) -> "Variant":  # cfg: config.Config
        """The registered variant that describes `cfg`, else a descriptive name that is no variant."""
        mine = signature(cfg)
        for name in REGISTRY:
            if name not in ALIASES and signature(applied(cfg, name)) == mine:
                return cls(name)
        return cls(describe(cfg))


def applied(cfg, name: str):
    """`cfg` with variant `name`'s overrides applied over its own variant fields reset to the defaults."""

    base = Config.from_dict(cfg.to_dict())
    defaults = type(base.train)()
    for field in FIELDS:
        setattr(base.train, field, getattr(defaults, field))
    for item in REGISTRY[name]:
        apply_override(base, item)
    return base


def signature(cfg) -> tuple:
    """The variant fields that matter for what ran: placement, cache policy and capture only on the gpu loop."""
    t = cfg.train
    gpu = t.loop == Loop.GPU
    switches = tuple(getattr(t, s) for s in SWITCHES) if t.loop == Loop.OPTIMIZED else ()
    if t.loop == Loop.OPTIMIZED and t.precision == Precision.BF16 and not t.split_sgd:
        switches += ("plain-sgd",)
    placement = (t.placement, t.cache_policy if t.placement == Placement.CACHED else "", t.cuda_graph) if gpu else ()
    precision = t.precision if t.loop in (Loop.OPTIMIZED, Loop.GPU) else ""
    return (t.loop, precision, placement, switches)


def describe(cfg) -> str:
    """A name for a config no variant describes: what ran, and which techniques were off."""
    t = cfg.train
    if t.loop in (Loop.REFERENCE, Loop.TORCHREC):
        return t.loop
    if t.loop == Loop.OPTIMIZED:
        off = "".join(f"-no-{name.replace('_', '-')}" for name in SWITCHES if not getattr(t, name))
        plain = "-plain-sgd" if t.precision == Precision.BF16 and not t.split_sgd else ""
        return f"optimized-{t.precision}{plain}{off}"
    name = f"gpu-{t.placement}" + ("-lfu" if t.placement == Placement.CACHED and t.cache_policy == "lfu" else "")
    name = name if t.precision == Precision.BF16 else f"{name}-fp32"
    return name if t.cuda_graph else f"{name}-eager"


# Notebook 02's ablation (`ABLATION` above), each step named by what it adds.
ABLATION_LABELS = {
    REFERENCE: "reference",
    FUSED_UPDATE: "+ fused embedding update",
    TABLE_BATCHING: "+ table batching",
    HUGE_PAGES: "+ huge pages",
    # Records without `mlp_kernels` predate the fused MLP layers: their step fused the interaction only.
    OPTIMIZED_FP32: "+ fused interaction and MLP layers (optimized fp32)",
    OPTIMIZED_BF16: "+ bf16 Split-SGD and bf16 MLPs (optimized bf16)",
}
