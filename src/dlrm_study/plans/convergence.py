"""Notebook 07's plans: the convergence study's configs (every CPU loop on a small model, from several seeds) and
S3's accuracy benchmark (a reduction of each preset S3 times, in each precision, from the same seeds).
`studies.convergence` trains them.
"""

from dlrm_study import config
from dlrm_study.config.variants import ACCURACY_PRECISIONS, REGISTRY
from dlrm_study.plans.profiles import ACCURACY_SEEDS, ACCURACY_STEPS, CONVERGENCE_STEPS
from dlrm_study.rules import literal


def convergence_config(profile: str) -> list[str]:
    """Overrides of `tiny` for the convergence study: bigger tables, Zipf ids, 256 per batch."""
    if profile == "smoke":
        return ["train.batch_size=32", f"train.steps={CONVERGENCE_STEPS[profile]}"]
    return [
        "model.table_rows=8x100000",
        "model.embedding_dim=16",
        "model.bottom_mlp=64-16",
        "model.top_mlp=64-1",
        "train.batch_size=256",
        f"train.steps={CONVERGENCE_STEPS[profile]}",
    ]


def variant_config(profile: str, variant: str, seed: int = 0) -> config.Config:
    """A loop's convergence config; seed 0 is the config's own (no override: the hash of its first records)."""
    seeded = [f"train.seed={seed}"] if seed else []
    return config.load("tiny", [*convergence_config(profile), *REGISTRY[variant], *seeded])


RECORDS = "convergence.csv"
# S3 is timed on these presets; its accuracy half trains a reduction of each (smoke: of tiny).
ACCURACY_PRESETS = ("dlrm-benchmark", "mlperf-scaled")
# The reduction (`accuracy_reduction`): every table keeps its dim and pooling (ids: ACCURACY_IDS) and the fused sparse
# update (Split-SGD's in bf16); rows are capped, MLPs narrowed and batches smaller, so that three precisions
# from three seeds on both presets train in minutes on two cores. Dense features are cut to mlperf-scaled's 13:
# dlrm-benchmark's 512 uncentred inputs (|x|^2 near 170) made SGD diverge above a learning rate of 0.05, too
# slow to learn in budget, and S3's accuracy question is the embedding update's, not the dense input's.
ACCURACY_ROW_CAP = 20_000
# Each preset's ids and row cap. dlrm-benchmark's bags of 100 Zipf ids repeat their hottest rows about ten times
# a bag, so those rows' summed gradients cap its learning rate (0.2 diverged) and the rest learn too slowly; its
# timed runs' own uniform ids spread the update evenly. Over 500 rows (each looked up about 50 times a step) one
# fp32 seed learned 90% of the attainable gain in 1,000 steps; over 1,000 rows 85%, over 2,000 84%.
ACCURACY_IDS = {"dlrm-benchmark": ("uniform", 500), "mlperf-scaled": ("zipf", ACCURACY_ROW_CAP)}
ACCURACY_BATCH = 256
ACCURACY_DENSE = 13
ACCURACY_TOP_MLP = "256-256-1"
# Each preset's learning rate: the largest tried that trained without diverging in one fp32 seed (dlrm-benchmark,
# uniform ids: 0.05, 0.3; mlperf-scaled: 0.3, 1.0).
ACCURACY_LR = {"dlrm-benchmark": 0.3, "mlperf-scaled": 1.0, "tiny": 0.3}


# Each preset is also trained in a small-step regime: its learning rate divided by SMALL_STEPS (rules.toml), the same
# steps and seeds. A bf16 weight keeps 8 significant bits, so an update below half its spacing (about 2^-9 of the
# weight) rounds away under plain bf16 SGD; at the benchmark's own rate most embedding updates are several spacings
# and SGD's noise dithers the rest, so plain bf16 keeps fp32's accuracy there and cannot fail the rule. At small
# steps the updates fall near or below half a spacing: where plain bf16 should lose and Split-SGD should not.
SMALL_STEPS = literal("S3_accuracy", "small_steps")
# Smaller steps learn less in as many: the regime trains SMALL_LENGTH times the steps. Its first design trained the
# benchmark's own steps, and there dlrm-benchmark's fp32 fell short of the regime's learned share (its records stay,
# left out as an earlier design: `analysis.convergence.accuracy_records`).
SMALL_LENGTH = literal("S3_accuracy", "small_steps_length")
SMALL = "-small-steps"  # the regime's config names: `mlperf-scaled-small-steps`
REGIMES = ("benchmark", "small-steps")


def regime_of(name: str) -> str:
    """The regime a config of the accuracy study trained in, from its name."""
    return REGIMES[1] if name.endswith(SMALL) else REGIMES[0]


def accuracy_reduction(preset: str) -> list[str]:
    """Overrides that make a timed preset S3's accuracy benchmark: teacher-labelled Zipf data at its table shapes,
    rows capped (ACCURACY_IDS), ACCURACY_DENSE dense features, a narrower MLP (the bottom ends in the embedding
    dim) and smaller batches."""
    cfg = config.load(preset)
    ids, cap = ACCURACY_IDS[preset]
    rows = "-".join(str(min(r, cap)) for r in cfg.model.table_rows)
    dim = cfg.model.embedding_dim
    return [
        f"data.id_distribution={ids}",
        "data.teacher=dlrm",
        f"model.table_rows={rows}",
        f"model.dense_features={ACCURACY_DENSE}",
        f"model.bottom_mlp=128-{dim}",
        f"model.top_mlp={ACCURACY_TOP_MLP}",
        f"train.batch_size={ACCURACY_BATCH}",
        f"train.learning_rate={ACCURACY_LR[preset]}",
    ]


def accuracy_config(profile: str, preset: str, variant: str, seed: int, regime: str = REGIMES[0]) -> config.Config:
    """A timed preset's accuracy benchmark (`accuracy_reduction`) in one precision, ACCURACY_STEPS from `seed`; in the
    small-step regime at its learning rate over SMALL_STEPS for SMALL_LENGTH times the steps, named
    `<preset>-small-steps`."""
    base = "tiny" if profile == "smoke" else preset
    shape = ["data.teacher=dlrm", "train.batch_size=32"] if profile == "smoke" else accuracy_reduction(preset)
    length = ACCURACY_STEPS[profile]
    if regime == REGIMES[1]:
        rate = config.load(base, shape).train.learning_rate / SMALL_STEPS
        shape, length = [*shape, f"train.learning_rate={rate:g}", f"name={base}{SMALL}"], length * SMALL_LENGTH
    steps = [f"train.steps={length}", f"train.seed={seed}"]
    return config.load(base, [*shape, *REGISTRY[variant], *steps])


def accuracy_configs(
    profile: str, variants: tuple[str, ...] = ACCURACY_PRECISIONS
) -> list[tuple[str, int, config.Config]]:
    """(variant, seed, config) of S3's accuracy study: each timed preset in fp32, bf16 Split-SGD and plain bf16 SGD,
    from every seed, in each regime (the benchmark's own learning rate first)."""
    presets = ACCURACY_PRESETS[:1] if profile == "smoke" else ACCURACY_PRESETS
    seeds = range(ACCURACY_SEEDS[profile])
    return [(v, s, accuracy_config(profile, p, v, s, r)) for r in REGIMES for p in presets for s in seeds
            for v in variants]  # fmt: skip
