"""Notebook 07: the CPU loops trained from several seeds; windowed losses and held-out AUC.

Two studies: the convergence of every CPU loop on a small model (`run_convergence`), and S3's accuracy
half on the presets S3 times (`run_accuracy`: optimized fp32, bf16 Split-SGD and plain bf16 SGD on a
reduction of dlrm-benchmark and mlperf-scaled labelled by a teacher DLRM, from the same seeds and data).
"""

from pathlib import Path

import torch
from tqdm import tqdm  # a plain bar: no widget warning in notebooks

from dlrm_study import config
from dlrm_study.config.variants import ACCURACY_PRECISIONS, CPU_LOOPS, OPTIMIZED_FP32
from dlrm_study.data import SyntheticData, make_data
from dlrm_study.errors import UsageError
from dlrm_study.measure import context, runner
from dlrm_study.plans.convergence import RECORDS, accuracy_configs, variant_config
from dlrm_study.plans.profiles import CONVERGENCE_SEEDS, LOSS_WINDOW
from dlrm_study.plans.sweep import runnable
from dlrm_study.platform import native_bf16
from dlrm_study.records import columns as col
from dlrm_study.records import store
from dlrm_study.records.record import make_record
from dlrm_study.train import build, evaluate, train
from dlrm_study.train.evaluate import auc
from dlrm_study.train.run import precision_label


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


def run_accuracy(profile: str, out: Path, emulated: bool = False, variants: tuple[str, ...] | None = None) -> bool:
    """S3's accuracy half: optimized fp32, bf16 Split-SGD and plain bf16 SGD trained from the same seeds on the
    same teacher-labelled data; each run's windowed losses, held-out AUC and the teacher's own (attainable) AUC.

    Every precision where the CPU has native bf16 (S3's speed half is judged only there, and its accuracy half
    reads the same machine), and in the smoke profile everywhere. Elsewhere fp32 alone by default: whether the
    benchmark is learnable on this CPU (fp32's share of the attainable gain), no bf16 to judge. Emulated bf16
    only with `emulated`: it rounds as native bf16 does (records say `bf16 (emulated)`), but on a loaded 2-core
    Zen 3 its steps are about 3x slower than fp32's, about 2.5 hours of `make reproduce`'s time for a verdict no
    rule reads (docs/reproduce.md). `variants` asks for precisions (ACCURACY_PRECISIONS); a bf16 one waits for
    native bf16 or `emulated`. Returns whether it measured.
    """
    bf16_here = emulated or profile == "smoke" or native_bf16()
    wanted = variants or (ACCURACY_PRECISIONS if bf16_here else (OPTIMIZED_FP32,))
    unknown = sorted(set(wanted) - set(ACCURACY_PRECISIONS))
    if unknown or not wanted:
        raise UsageError(f"accuracy variants {unknown or '(none)'}: choose among {', '.join(ACCURACY_PRECISIONS)}")
    if not bf16_here:
        if any(v != OPTIMIZED_FP32 for v in wanted):
            runner.say(f"accuracy-{profile}: not measured on this CPU: no native bf16, so S3 is not measurable here "
                       "(run_accuracy(..., emulated=True) measures it anyway)")  # fmt: skip
            return False
        runner.say(f"accuracy-{profile}: fp32 alone on this CPU (no native bf16): is the benchmark learnable here")
    configs = accuracy_configs(profile, tuple(wanted))
    train_and_record(configs, out / RECORDS, f"accuracy-{profile}", LOSS_WINDOW[profile], curve=True)
    return True


def train_and_record(
    configs: list[tuple[str, int, config.Config]], path: Path, study: str, window: int, curve: bool = False
) -> None:
    """Train each config to its `train.steps`, then evaluate it on held-out batches; its windowed losses and
    evaluation (with the teacher's own AUC) are appended together (`repeat` = the seed), so an interrupted study
    resumes at the first config not yet recorded. With `curve`, the held-out AUC is also taken every window
    (records of kind `auc`). A run's records are reused only where none of its records is of other code
    (`store.mixed_runs`): each loop's gap to the reference pairs within one run, so a change to one loop's code
    trains every variant again."""
    keys = [store.key_here(cfg, variant, repeat=seed) for variant, seed, cfg in configs]
    stored = store.stored_keys(path, today=set(keys))
    todo = [c for c, key in zip(configs, keys, strict=True) if key not in stored]
    context.current().tally(reused=len(configs) - len(todo))
    bar = tqdm(total=sum(cfg.train.steps for _, _, cfg in todo), desc=study, unit="step")
    for variant, seed, cfg in todo:
        context.current().tally(measured=1)
        rows = trained_rows(cfg, study, min(window, cfg.train.steps), curve, bar, variant=variant, repeat=seed)
        store.append_many(path, rows)
        held_out = rows[-1].get(col.EVAL_AUC, float("nan"))
        runner.say(f"{study}: {cfg.name} {variant} seed {seed}, {cfg.train.steps} steps: held-out AUC {held_out:.4f}")
    bar.close()


def trained_rows(cfg: config.Config, study: str, window: int, curve: bool, bar: tqdm, **labels) -> list[dict]:
    """One config trained window by window: its loss records (and held-out AUC records with `curve`), then its
    final evaluation's, each labelled with the precision that ran (`bf16 (emulated)`, plain bf16 SGD)."""
    run, data, steps = build(cfg), make_data(cfg), cfg.train.steps
    held_out = [make_data(cfg, "eval").batch(i) for i in range(cfg.train.eval_batches)]
    ran = {col.PRECISION_LABEL: precision_label(cfg.train.precision, run.device, cfg.train.split_sgd)}
    rows = []
    for end in range(window, steps + 1, window):
        losses = train(run, data.batches(run.step), end, on_step=lambda *_: bar.update())
        rows.append({col.KIND: "loss", col.STEP: end, col.LOSS: sum(losses[-window:]) / window, **ran})
        if curve:
            rows.append({col.KIND: "auc", col.STEP: end, col.EVAL_AUC: evaluate(run, held_out)["auc"], **ran})
    train(run, data.batches(run.step), steps, on_step=lambda *_: bar.update())  # a last part window
    metrics = evaluate(run, held_out) | ceiling(cfg)
    rows.append({col.KIND: "eval", col.STEP: steps, **ran, **{f"eval_{k}": v for k, v in metrics.items()}})
    return [make_record(study, fields, cfg, **labels) for fields in rows]


def ceiling(cfg: config.Config) -> dict[str, float]:
    """The teacher's own AUC on the held-out labels it drew (`attainable_auc`): no model can expect more.
    Empty where the data has no teacher (Criteo)."""
    data = make_data(cfg, "eval")
    if not isinstance(data, SyntheticData):
        return {}
    drawn = [data.sample(i) for i in range(cfg.train.eval_batches)]
    return {"attainable_auc": auc(torch.cat([p for _, p in drawn]), torch.cat([b.labels for b, _ in drawn]))}
