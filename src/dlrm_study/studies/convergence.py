"""Notebook 07: the CPU loops trained from several seeds; windowed losses and held-out AUC.

Two studies: the convergence of every CPU loop on a small model (`run_convergence`), and S3's accuracy
half on the presets S3 times (`run_accuracy`: optimized fp32 against bf16 Split-SGD on dlrm-benchmark
and mlperf-scaled, from the same seeds and data).
"""

import itertools
from pathlib import Path

from dlrm_study import config
from dlrm_study.config.variants import BF16_PAIR, CPU_LOOPS, REGISTRY
from dlrm_study.data import make_data
from dlrm_study.measure import runner
from dlrm_study.measure.sweep import runnable
from dlrm_study.records import columns as col
from dlrm_study.records import store
from dlrm_study.records.record import make_record
from dlrm_study.studies.profiles import ACCURACY_STEPS, CONVERGENCE_SEEDS, CONVERGENCE_STEPS, LOSS_WINDOW
from dlrm_study.train import build, evaluate, train


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


def run_convergence(profile: str, out: Path, variants: list[str] | None = None) -> None:
    """Train each variant from each of the profile's seeds (seed by seed, the variants interleaved
    within each); record windowed losses and held-out AUC, `repeat` = the seed.

    A run's rows are appended together, so an interrupted study resumes at the first run not
    yet recorded (`records.store.resume_key`). bf16 runs only where it is native: an
    emulated run would train the same numbers, so it says nothing the fp32 run does not.
    """

    kept = runnable(variants or list(CPU_LOOPS))[0]
    configs = [(v, seed, variant_config(profile, v, seed)) for seed in range(CONVERGENCE_SEEDS[profile]) for v in kept]
    train_and_record(configs, out / RECORDS, f"convergence-{profile}", LOSS_WINDOW[profile])


RECORDS = "convergence.csv"
# S3 is timed on these presets; its accuracy half trains them (smoke: tiny).
ACCURACY_PRESETS = ("dlrm-benchmark", "mlperf-scaled")


def accuracy_config(profile: str, preset: str, variant: str, seed: int) -> config.Config:
    """A timed preset as S3 times it, trained for ACCURACY_STEPS steps from `seed` in fp32 or bf16."""
    base = "tiny" if profile == "smoke" else preset
    smoke = ["train.batch_size=32"] if profile == "smoke" else []
    steps = [f"train.steps={ACCURACY_STEPS[profile]}", f"train.seed={seed}"]
    return config.load(base, [*smoke, *REGISTRY[variant], *steps])


def accuracy_configs(profile: str) -> list[tuple[str, int, config.Config]]:
    """(variant, seed, config) of S3's accuracy study: each timed preset in fp32 and bf16, from every seed."""
    presets = ACCURACY_PRESETS[:1] if profile == "smoke" else ACCURACY_PRESETS
    seeds = range(CONVERGENCE_SEEDS[profile])
    return [(v, s, accuracy_config(profile, p, v, s)) for p in presets for s in seeds for v in BF16_PAIR]


def run_accuracy(profile: str, out: Path) -> None:
    """S3's accuracy half: held-out AUC of optimized fp32 and bf16 on the timed presets, paired by seed
    (on a CPU without native bf16 nothing runs: emulated bf16 would train the fp32 run's numbers)."""
    configs = [c for c in accuracy_configs(profile) if c[0] in runnable(list(BF16_PAIR))[0]]
    if len(configs) < len(accuracy_configs(profile)):
        return
    train_and_record(configs, out / RECORDS, f"accuracy-{profile}", LOSS_WINDOW[profile])


def train_and_record(configs: list[tuple[str, int, config.Config]], path: Path, study: str, window: int) -> None:
    """Train each config to its `train.steps`, then evaluate it on held-out batches; its windowed losses and
    evaluation are appended together (`repeat` = the seed), so an interrupted study resumes at the first
    config not yet recorded."""
    stored = store.stored_keys(path)
    for variant, seed, cfg in configs:
        if store.key_here(cfg, variant, repeat=seed) in stored:
            runner.tally(reused=1)
            continue
        runner.tally(measured=1)
        steps = cfg.train.steps
        run = build(cfg)
        losses = train(run, make_data(cfg).batches(), steps)
        metrics = evaluate(run, itertools.islice(make_data(cfg, "eval").batches(), cfg.train.eval_batches))
        window = min(window, steps)
        rows = [
            make_record(
                study,
                {col.KIND: "loss", col.STEP: end, col.LOSS: sum(losses[end - window : end]) / window},
                cfg,
                variant=variant,
                repeat=seed,
            )
            for end in range(window, steps + 1, window)
        ]
        evaluation = {col.KIND: "eval", col.STEP: steps, **{f"eval_{k}": v for k, v in metrics.items()}}
        rows.append(make_record(study, evaluation, cfg, variant=variant, repeat=seed))
        store.append_many(path, rows)
