"""Notebook 07: the CPU loops trained from several seeds; windowed losses and held-out AUC."""

import itertools
from pathlib import Path

from dlrm_study import config
from dlrm_study.config.variants import CPU_LOOPS, REGISTRY
from dlrm_study.data import make_data
from dlrm_study.measure import runner
from dlrm_study.measure.sweep import runnable
from dlrm_study.records import columns as col
from dlrm_study.records import store
from dlrm_study.records.record import make_record
from dlrm_study.studies.profiles import CONVERGENCE_SEEDS, CONVERGENCE_STEPS, LOSS_WINDOW
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

    path, study = out / "convergence.csv", f"convergence-{profile}"
    steps, window = CONVERGENCE_STEPS[profile], LOSS_WINDOW[profile]
    stored = store.stored_keys(path)
    kept = runnable(variants or list(CPU_LOOPS))[0]
    for seed, variant in itertools.product(range(CONVERGENCE_SEEDS[profile]), kept):
        cfg = variant_config(profile, variant, seed)
        if store.key_here(cfg, variant, repeat=seed) in stored:
            runner.tally(reused=1)
            continue
        runner.tally(measured=1)
        run = build(cfg)
        losses = train(run, make_data(cfg).batches(), steps)
        metrics = evaluate(run, itertools.islice(make_data(cfg, "eval").batches(), cfg.train.eval_batches))
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
