"""Notebook 07's records: the convergence study's windowed losses and held-out evaluations, and S3's accuracy
rule (`s3_accuracy`): bf16's learned AUC gain relative to fp32's, per preset, over seeds."""

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from dlrm_study.analysis import current, stats
from dlrm_study.analysis.readers import NoRecords, check_cells, config_key, labelled, leave_out
from dlrm_study.config.variants import CPU_LOOPS, OPTIMIZED_BF16, OPTIMIZED_FP32, PLAIN_BF16, REFERENCE
from dlrm_study.plans.convergence import RECORDS, REGIMES, accuracy_configs, regime_of, variant_config
from dlrm_study.plans.profiles import CONVERGENCE_SEEDS
from dlrm_study.records import columns as col
from dlrm_study.records import store
from dlrm_study.records.machine import select
from dlrm_study.rules import literal


def convergence_records(profile: str, out: Path, machine: str | None = "this") -> pd.DataFrame:
    """The stored convergence records of a profile, for the variants' current configs, on one machine."""
    path = out / RECORDS
    if not path.exists():
        raise NoRecords(f"no records yet: {path} does not exist (run with measure=True)")
    seeds = range(CONVERGENCE_SEEDS["full"])
    labels = {(config_key(variant_config(profile, v, s)), v): f"seed {s}" for v in CPU_LOOPS for s in seeds}
    frame = select(labelled(own_study(store.load(path), f"convergence-{profile}"), labels), machine)
    return check_cells(frame, (col.MACHINE, col.RUN_ID, col.VARIANT, "train.seed", col.KIND, col.STEP))


def own_study(frame: pd.DataFrame, study: str) -> pd.DataFrame:
    """A study's own records: a loss curve is of the run that trained it (the two studies of this file may
    train one config, as the smoke profile's do, and a config's key leaves out its step count)."""
    return frame[frame[col.STUDY] == study] if col.STUDY in frame else frame


def accuracy_records(profile: str, out: Path, machine: str | None = "this") -> pd.DataFrame:
    """S3's accuracy study on the timed presets (`studies.convergence.run_accuracy`), on one machine; its records
    of configs it no longer trains counted (`readers.GONE`), as every reader counts what it leaves out."""
    path = out / RECORDS
    if not path.exists():
        raise NoRecords(f"no records yet: {path} does not exist (run with measure=True)")
    configs = accuracy_configs(profile)
    labels = {(config_key(cfg), v): f"{cfg.name} seed {s}" for v, s, cfg in configs}
    study = f"accuracy-{profile}"  # its records of an earlier config are counted as no longer measured
    frame = select(labelled(own_study(store.load(path), study), labels, [study]), machine)
    # A point's key leaves out its steps: a run trained to other steps than today's design is an earlier design
    if not frame.empty and "train.steps" in frame:
        steps = {f"{cfg.name} seed {s}": cfg.train.steps for _, s, cfg in configs}
        trained = pd.to_numeric(frame["train.steps"], errors="coerce")
        frame = leave_out(frame, trained == frame[col.POINT].map(steps), EARLIER_DESIGN)
    return check_cells(frame, (col.MACHINE, col.RUN_ID, col.POINT, col.VARIANT, col.KIND, col.STEP))


EARLIER_DESIGN = "trained to other steps than today's design (an earlier design of the accuracy benchmark)"


SEED = (col.MACHINE, col.RUN_ID, "train.seed")  # a seed's loops, trained in one run on one machine


def gaps(records: pd.DataFrame, kind: str, value: str, by: tuple[str, ...] = (), base: str = REFERENCE) -> pd.DataFrame:
    """Each loop's `value` less `base`'s, paired by seed (and by `by`, e.g. the step): the mean gap over
    seeds with its 95% t interval (`variant`, *by, `mean`, `low`, `high`, `n`)."""
    rows = records[records[col.KIND] == kind]
    keys = [k for k in SEED if k in rows]
    wide = rows.pivot_table(index=[*keys, *by], columns=col.VARIANT, values=value) if not rows.empty else None
    if wide is None or base not in wide:
        return pd.DataFrame(columns=[col.VARIANT, *by, "mean", "low", "high", "n"])
    out = []
    for variant in [v for v in wide if v != base]:
        gap = (wide[variant] - wide[base]).dropna()
        groups = gap.groupby(level=list(by)) if by else [((), gap)]
        for at, values in groups:
            mean, low, high, n = stats.mean_interval(values)
            at = at if isinstance(at, tuple) else (at,)
            out.append({col.VARIANT: variant, **dict(zip(by, at, strict=True)), "mean": mean, "low": low,
                        "high": high, "n": n})  # fmt: skip
    return pd.DataFrame(out)


def loss_gaps(records: pd.DataFrame) -> pd.DataFrame:
    """Each loop's windowed training loss less the reference's at each step, over seeds."""
    return gaps(records, "loss", col.LOSS, (col.STEP,))


def auc_gaps(records: pd.DataFrame) -> pd.DataFrame:
    """Each loop's held-out AUC less the reference's, over seeds."""
    return gaps(records, "eval", col.EVAL_AUC)


def accuracy_gaps(records: pd.DataFrame) -> pd.DataFrame:
    """S3 on the timed presets: optimized bf16's held-out AUC less optimized fp32's, per preset, over seeds (plain
    bf16 SGD, the control, left out: `s3_accuracy` judges it)."""
    found = gaps(records, "eval", col.EVAL_AUC, (col.CONFIG_NAME,), base=OPTIMIZED_FP32)
    return found[found[col.VARIANT] == OPTIMIZED_BF16] if not found.empty else found


def preset_of(records: pd.DataFrame) -> str:
    """The preset the records trained and its shape as they say it: `tiny (8 x 100,000 rows, dim 16, batch 256)`."""
    described = records.dropna(subset=[c for c in ("model.table_rows", col.CONFIG_NAME) if c in records])
    if described.empty or col.CONFIG_NAME not in described or "model.table_rows" not in described:
        return "unrecorded"
    first = described.iloc[0]
    rows = [int(r) for r in str(first["model.table_rows"]).split("-")]
    tables = f"{len(rows)} x {rows[0]:,} rows" if len(set(rows)) == 1 else f"{len(rows)} tables"
    shape = f"{tables}, dim {int(first['model.embedding_dim'])}, batch {int(first['train.batch_size'])}"
    return f"{', '.join(sorted(set(described[col.CONFIG_NAME].astype(str))))} ({shape})"


# S3's accuracy rule (docs/claims.md, written before the records it judges): on each timed preset's accuracy
# benchmark, in each regime (the benchmark's learning rate and small steps), bf16's learned gain (held-out AUC - 0.5)
# relative to fp32's, paired by seed, has its interval over seeds at or above GAIN_MARGIN; it fails when the
# interval lies below. The benchmark must have learned: fp32 reaches LEARNED_SHARE of the attainable gain (the
# teacher's own AUC - 0.5; SMALL_LEARNED_SHARE at small steps) and a held-out AUC of MIN_AUC. Plain bf16 SGD, the
# control, must fail the same rule at small steps (`control_status`): a benchmark it passes cannot tell the two apart.
GAIN_MARGIN = literal("S3_accuracy", "gain_margin")  # declared: src/dlrm_study/rules/rules.toml
LEARNED_SHARE = literal("S3_accuracy", "learned_share")
SMALL_LEARNED_SHARE = literal("S3_accuracy", "small_learned_share")
LEARNED = {REGIMES[0]: LEARNED_SHARE, REGIMES[1]: SMALL_LEARNED_SHARE}  # each regime's share: the gate's first half
MIN_AUC = literal("S3_accuracy", "min_auc")
MIN_SEEDS = literal("S3_accuracy", "min_seeds")  # per preset, counted as seeds
HOLDS, FAILS, UNDECIDED, TOO_FEW, NOT_LEARNED, NO_RECORDS = (
    "holds", "fails", "undecided", "too few seeds", "benchmark did not learn", "no records",
)  # fmt: skip
ATTAINABLE = "eval_attainable_auc"


@dataclass(frozen=True)
class Gain:
    """One precision's learned gain relative to fp32's on one preset, over seeds (`ratio` = mean of per-seed
    ratios, `low`-`high` its 95% t interval), and the steps it took to reach fp32's final held-out AUC."""

    variant: str
    preset: str
    seeds: int
    ratio: float
    low: float
    high: float
    steps_to_fp32: float  # mean over the seeds that reached it (NaN: none did)
    reached: int  # seeds that reached fp32's final AUC within the run

    @property
    def status(self) -> str:
        if self.seeds < MIN_SEEDS:
            return TOO_FEW
        if self.low >= GAIN_MARGIN:
            return HOLDS
        return FAILS if self.high < GAIN_MARGIN else UNDECIDED


@dataclass(frozen=True)
class AccuracyJudgement:
    """S3's accuracy half on one machine (and code): `status` for bf16 Split-SGD, `plain_status` for plain bf16
    SGD over every preset, `control_status` for it at small steps (the control: the rule must fail it there), each
    preset's gains (a preset per regime: `mlperf-scaled-small-steps`), and fp32's share of the attainable gain."""

    status: str
    plain_status: str
    control_status: str = NO_RECORDS
    split: list[Gain] = field(default_factory=list)
    plain: list[Gain] = field(default_factory=list)
    learned: dict[str, float] = field(default_factory=dict)  # preset -> fp32's mean share of the attainable gain
    fp32_auc: dict[str, float] = field(default_factory=dict)  # preset -> fp32's mean held-out AUC
    attainable: dict[str, float] = field(default_factory=dict)  # preset -> the teacher's mean held-out AUC
    seeds: dict[str, int] = field(default_factory=dict)  # preset -> seeds with all precisions recorded
    fp32_seeds: dict[str, int] = field(default_factory=dict)  # preset -> seeds fp32 trained (its share's seeds)
    emulated: bool = False  # bf16 trained without native bf16 (same rounding, no speed to judge beside it)


READ = {*SEED, col.CODE_FINGERPRINT, col.TRAIN_LOOP, col.KIND, col.CONFIG_NAME, col.VARIANT, col.EVAL_AUC, col.STEP}
READ |= {col.LOSS, col.POINT, col.STUDY, col.PRECISION_LABEL, ATTAINABLE}  # every column `s3_accuracy` reads


def s3_accuracy(
    frame: pd.DataFrame, machine: str, fingerprint: str | None = None, confidence: float = stats.CONFIDENCE
) -> AccuracyJudgement:
    """S3's accuracy half from accuracy records (`accuracy_records`) of one machine and, when given, one code
    (the `code_fingerprint` column, one of `fingerprint`'s: one per loop; no filter where records lack it), its
    gains' intervals at `confidence` (S3 reads "fails" at 1 - 0.05/2: one side of an "or")."""
    rows = frame[frame[col.MACHINE] == machine] if col.MACHINE in frame else frame.iloc[0:0]
    rows = rows[[c for c in rows.columns if c in READ]]  # the filters below take these columns, not every one
    if fingerprint is not None and col.CODE_FINGERPRINT in rows:
        rows = rows[current.fingerprints(rows).isin(fingerprint.split())]
    final = rows[rows[col.KIND] == "eval"] if not rows.empty else rows
    if final.empty:
        return AccuracyJudgement(NO_RECORDS, NO_RECORDS)
    judged = {preset: _preset(rows, preset, confidence) for preset in sorted(set(final[col.CONFIG_NAME].astype(str)))}
    split = [g for j in judged.values() for g in j[0] if g.variant == OPTIMIZED_BF16]
    plain = [g for j in judged.values() for g in j[0] if g.variant == PLAIN_BF16]
    learned = {p: j[1] for p, j in judged.items()}
    fp32_auc = {p: j[2] for p, j in judged.items()}
    unlearned = any(not (learned[p] >= LEARNED[regime_of(p)] and fp32_auc[p] >= MIN_AUC) for p in judged)
    control = at_small_steps(plain)
    return AccuracyJudgement(
        NOT_LEARNED if unlearned else _overall(split),
        NOT_LEARNED if unlearned else _overall(plain),
        NOT_LEARNED if unlearned else (_overall(control) if control else NO_RECORDS),
        split,
        plain,
        learned,
        fp32_auc,
        {p: j[3] for p, j in judged.items()},
        {p: j[4] for p, j in judged.items()},
        {p: fp32_seeds(final, p) for p in judged},
        emulated_bf16(final),
    )


def at_small_steps(gains: list[Gain]) -> list[Gain]:
    """The gains of the small-step regime's presets (where the control must fail)."""
    return [g for g in gains if regime_of(g.preset) == REGIMES[1]]


def emulated_bf16(final: pd.DataFrame) -> bool:
    """Whether any bf16 run was trained on a CPU without native bf16 (its precision label says so)."""
    if col.PRECISION_LABEL not in final:
        return False
    bf16 = final[final[col.VARIANT] != OPTIMIZED_FP32]
    return bool(bf16[col.PRECISION_LABEL].astype(str).str.contains("emulated").any())


def fp32_seeds(final: pd.DataFrame, preset: str) -> int:
    """The distinct seeds fp32 trained to its evaluation on a preset (one machine's records): those fp32's share of
    the attainable gain is over. A seed trained again in another run is still one seed."""
    mine = final[(final[col.CONFIG_NAME].astype(str) == preset) & (final[col.VARIANT] == OPTIMIZED_FP32)]
    return int(mine["train.seed"].nunique()) if "train.seed" in mine else len(mine)


def _overall(gains: list[Gain]) -> str:
    """Holds when it holds on every preset; fails when it fails on any."""
    statuses = {g.status for g in gains}
    if not gains or TOO_FEW in statuses:
        return TOO_FEW
    if FAILS in statuses:
        return FAILS
    return HOLDS if statuses == {HOLDS} else UNDECIDED


def _preset(rows: pd.DataFrame, preset: str, confidence: float) -> tuple[list[Gain], float, float, float, int]:
    """One preset's gains (each precision against fp32, paired by seed), fp32's share of the attainable gain,
    fp32's mean AUC, the mean attainable AUC, and the seeds that recorded every precision."""
    mine = rows[rows[col.CONFIG_NAME].astype(str) == preset]
    final = mine[mine[col.KIND] == "eval"]
    keys = [k for k in SEED if k in final]
    wide = final.pivot_table(index=keys, columns=col.VARIANT, values=col.EVAL_AUC)
    if OPTIMIZED_FP32 not in wide:
        return [], math.nan, math.nan, math.nan, 0
    base = wide[OPTIMIZED_FP32]
    fp32 = final[final[col.VARIANT] == OPTIMIZED_FP32]
    ceiling = fp32[ATTAINABLE].astype(float) if ATTAINABLE in fp32 else pd.Series(dtype=float)
    share = ((fp32[col.EVAL_AUC].astype(float) - 0.5) / (ceiling - 0.5)).mean() if not ceiling.empty else math.nan
    curves = mine[mine[col.KIND] == "auc"]
    gains = [
        _gain(wide, curves, variant, preset, confidence) for variant in (OPTIMIZED_BF16, PLAIN_BF16) if variant in wide
    ]
    seeds = int(wide.dropna().shape[0]) if set(wide) >= {OPTIMIZED_FP32, OPTIMIZED_BF16, PLAIN_BF16} else 0
    return gains, float(share), float(base.mean()), float(ceiling.mean()), seeds


def _gain(wide: pd.DataFrame, curves: pd.DataFrame, variant: str, preset: str, confidence: float) -> Gain:
    """`variant`'s gain over fp32's, paired by seed, and its steps to each seed's fp32 final AUC."""
    paired = wide[[OPTIMIZED_FP32, variant]].dropna()
    ratios = (paired[variant] - 0.5) / (paired[OPTIMIZED_FP32] - 0.5)
    mean, low, high, n = stats.mean_interval(ratios, confidence)
    by_seed = seed_curves(curves, variant)
    steps = [first_step(by_seed.get(seed if isinstance(seed, tuple) else (seed,)), target)
             for seed, target in paired[OPTIMIZED_FP32].items()]  # fmt: skip
    reached = [s for s in steps if s == s]
    return Gain(variant, preset, n, mean, low, high, sum(reached) / len(reached) if reached else math.nan,
                len(reached))  # fmt: skip


def seed_curves(curves: pd.DataFrame, variant: str) -> dict[tuple, pd.DataFrame]:
    """`variant`'s held-out AUC curves, one per seed (its SEED key as a tuple): split once, not once per seed."""
    keys = [k for k in SEED if k in curves]
    mine = curves[curves[col.VARIANT] == variant]
    if not keys:
        return {(): mine}
    return {key if isinstance(key, tuple) else (key,): group for key, group in mine.groupby(keys, sort=False)}


def first_step(curve: pd.DataFrame | None, target: float) -> float:
    """The first step at which one seed's curve (`seed_curves`) reaches `target`; nan where it never does."""
    if curve is None:
        return math.nan
    hit = curve[col.STEP][curve[col.EVAL_AUC].astype(float) >= target - 1e-12]
    return float(hit.min()) if not hit.empty else math.nan


def accuracy_words(judgement: AccuracyJudgement) -> list[str]:
    """Plain words on how much each model learned and whether the rule holds, from a judgement."""
    lines = []
    for preset, share in judgement.learned.items():
        lines.append(
            f"{preset}: fp32 reached a held-out AUC of {judgement.fp32_auc[preset]:.3f}, {share:.0%} of the gain "
            f"attainable (the teacher's own AUC, {judgement.attainable[preset]:.3f}), over "
            f"{judgement.fp32_seeds.get(preset, 0)} seeds"
        )
    for gain in [*judgement.split, *judgement.plain]:
        steps = f"reached fp32's final AUC in {gain.steps_to_fp32:.0f} steps ({gain.reached} of {gain.seeds} seeds)"
        steps = steps if gain.reached else "never reached fp32's final AUC"
        learned = gain.ratio * judgement.learned.get(gain.preset, math.nan)  # its share of the attainable gain
        lines.append(
            f"{gain.preset}, {gain.variant}: {gain.ratio:.1%} of fp32's gain [{gain.low:.1%}, {gain.high:.1%}] "
            f"over {gain.seeds} seeds ({gain.status} at {GAIN_MARGIN:.0%}), so it learned {learned:.0%} of the "
            f"attainable gain; {steps}"
        )
    if not (judgement.split or judgement.plain) and judgement.learned:
        lines.append("bf16 not trained on this machine: fp32 alone, whether the benchmark is learnable here")
        return lines
    said = f"bf16 Split-SGD: {judgement.status}; plain bf16 SGD (the control): {judgement.plain_status}"
    if judgement.emulated:
        said += " (bf16 emulated on this CPU: the same rounding as native bf16, no bf16 speed to judge beside it)"
    lines.append(said)
    return lines
