"""The design of the claims' deciding measurements, derived from power and written before the records it judges.

A verdict is a t interval over run means (`clusters.over_runs`) that must lie wholly on one side of a margin and
stay there with any one run left out (not fragile). Whether a design of R runs x P repeats can say a word depends
on two spreads, each on the scale the rule summarizes on (log for ratios, logit for shares, linear for H4's
recovery): the spread of a repeat's pair around its run's mean (within run) and the spread of run means beyond
what their repeats explain (between runs). `variance_components` measures both from committed records;
`simulate` draws designs from them and applies the rule as `over_runs` does. Each claim's module (`claims/`) holds
its committed `Design`s: its assumptions and where every number came from (`Measured`, read by its `Reader`);
`claims.designs` collects them and tabulates the powers they give. tests/test_power.py holds the design to its
targets and the literals to the records and to `plans.profiles`.
"""

import dataclasses
import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from dlrm_study.analysis import clusters, current, stats
from dlrm_study.config.variants import OPTIMIZED_BF16, OPTIMIZED_FP32
from dlrm_study.plans.profiles import REPO
from dlrm_study.records import code_identity, store
from dlrm_study.records import columns as col
from dlrm_study.rules import literal

# The committed design, declared with the rules (src/dlrm_study/rules/rules.toml, [design]; tests/test_power.py
# checks it equals profiles.CLAIM_RUNS["quick"] and PRESETS["quick"]): a change to either must run this analysis
# again. Each variant warms up until its step time settles, so every timed repeat counts; PROFILE_STEPS are as many
# as the records had, so theirs are not rescaled.
RUNS, PAIRS, STEPS = literal("design", "claim_runs"), literal("design", "pairs"), literal("design", "steps")
PROFILE_STEPS = literal("design", "profile_steps")
TARGET_POWER = literal("design", "target_power")
TARGET_FALSE = literal("design", "target_false")
N_SIMS = 4000
SEED = 20261205
MAX_RUNS = 60  # `runs_needed` looks no further

RESULTS = REPO / "results"
XEON_AMX = "intel-xeon-f6m207s2/avx512f+avx512_bf16+amx_bf16/2cpu"  # the first runs measured as processes
GPU_SPREAD = "assumed (no runs of these points yet)"
# A GPU claim's design is one lending's (`lending.gpu_lending`: 3 runs, each a process; 3 repeats a run for H1 and
# H4, 1 for H2 and H3): tests/test_gpu_lending.py holds these literals to the plan.
LENDING_RUNS = 3


# --- variance components ----------------------------------------------------------------------------


def transformed(values: pd.Series, scale: str) -> np.ndarray:
    """Values on the scale a rule summarizes them on (as `clusters.logs` does)."""
    x = values.astype(float).to_numpy()
    return {"log": np.log, "logit": lambda v: np.log(v / (1 - v)), "linear": lambda v: v}[scale](x)


def to_scale(value: float, scale: str) -> float:
    """One truth or margin on a rule's scale."""
    if scale == "log":
        return math.log(value)
    return math.log(value / (1 - value)) if scale == "logit" else value


def variance_components(
    pairs: pd.DataFrame, value: str = "ratio", share: bool = False, linear: bool = False, steps: int | None = None
) -> tuple[float, float, int, int]:
    """(within_sd, between_sd, runs, pairs) of `value` on the log (logit: `share`; as it is: `linear`) scale,
    runs grouped by `clusters.RUN_KEYS`: the pooled SD of pairs around their run mean, and the between-run SD of
    the one-way random-effects ANOVA by the method of moments, max(0, (MS_between - MS_within) / n0).

    `steps`: the within-run SD as if each repeat had timed `steps` steps: each pair's deviation from its run mean
    is scaled by sqrt(its `steps` column / `steps`), since a repeat's value is the median of its timed steps,
    whose variance falls about as 1/steps (conservative: any noise of a repeat that does not fall with more steps
    is scaled up too). The between-run SD is the ANOVA's on the values as measured.
    """
    found = pairs[pairs[value].notna()]
    y = transformed(found[value], "logit" if share else "linear" if linear else "log")
    keys = [k for k in clusters.RUN_KEYS if k in found]
    group = found.groupby(keys, dropna=False, sort=True).ngroup().to_numpy() if keys else np.zeros(len(y), int)
    n = np.bincount(group).astype(float)
    k, total = len(n), int(n.sum())
    means = np.bincount(group, weights=y) / n
    residual = y - means[group]
    ms_within = float(residual @ residual) / (total - k) if total > k else math.nan
    within = ms_within
    if steps is not None and total > k:
        scaled = residual * np.sqrt(found[col.STEPS].astype(float).to_numpy() / steps)
        within = float(scaled @ scaled) / (total - k)
    if k < 2:
        return math.sqrt(within), math.nan, k, total
    ms_between = float(n @ (means - y.mean()) ** 2) / (k - 1)
    n0 = (total - float(n @ n) / total) / (k - 1)
    spread = ms_between - (ms_within if ms_within == ms_within else 0.0)  # one pair a run: all of it, conservative
    return math.sqrt(within), math.sqrt(max(0.0, spread / n0)), k, total


# --- the records behind the variances ---------------------------------------------------------------


@functools.cache
def load(name: str) -> pd.DataFrame:
    """A committed records file under results/, read once."""
    return store.load(RESULTS / name)


def records(files: tuple[tuple[str, str], ...], machine: str, code: str, runs: int | None = None) -> pd.DataFrame:
    """One machine's records of these (file, study) at one code fingerprint ("": records without one) and its
    most threads, less the warm-ups the verdicts leave out (`current.without_warm_up`: repeat 0 of a protocol-1
    run; a protocol-2 run warmed up until settled and counts every repeat). `runs`: only the first runs, slots
    1..runs (`first_runs`: a design fitted on a study's first runs names what it read, whatever came after)."""
    parts = []
    for name, study in files:
        frame = load(name)
        wanted = [code_identity.code_of(loop, code) for loop in current.loops(frame)]  # as `fingerprints` reads it
        same = current.fingerprints(frame) == pd.Series(wanted, index=frame.index, dtype=str)
        parts.append(frame[(frame[col.STUDY] == study) & (frame[col.MACHINE] == machine) & same])
    found = pd.concat(parts, ignore_index=True)
    if runs is not None and col.RUN_SLOT in found:
        found = first_runs(found, runs)
    found = current.without_warm_up(found[found[col.ERROR].isna()])
    return found[found[col.THREADS].astype(float) == found[col.THREADS].astype(float).max()]


def first_runs(found: pd.DataFrame, runs: int) -> pd.DataFrame:
    """The records of run slots 1..runs measured before any record of a later slot: what a design fitted on a
    study's first runs read, whatever came after (later slots, or the same slots measured again at this code beside
    another loop's new code: `runner.pending` measures such runs again whole)."""
    slot = pd.to_numeric(found[col.RUN_SLOT], errors="coerce")
    early, later = found[slot.isna() | (slot <= runs)], found[slot > runs]
    if later.empty or col.TIMESTAMP not in found:
        return early
    return early[early[col.TIMESTAMP].astype(str) < later[col.TIMESTAMP].astype(str).min()]


def with_steps(pairs: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """The pairs with the timed steps of their run's records (the largest, where a run's records differ)."""
    steps = frame.groupby(col.RUN_ID)[col.STEPS].max().rename(col.STEPS)
    return pairs.merge(steps, left_on=col.RUN_ID, right_index=True, how="left")


class Reader(NamedTuple):
    """How a claim's design reads its comparison's values from committed records: `read(machine, code,
    comparison, runs)`, the column it reads (`value`), the rule's scale, and whether its within-run SD is rescaled
    to `STEPS` timed steps (only timed steps are: S2's shares come from the profiled window, `profile_steps`, and a
    GPU point times blocks of steps, `measure.gpu`)."""

    read: Callable[[str, str, str, int | None], pd.DataFrame]
    value: str
    scale: str
    timed: bool


@dataclasses.dataclass(frozen=True)
class Measured:
    """One machine's records behind a claim's variances: what they were (machine, code, runs, pairs, the timed
    steps of their repeats) and what they gave (centre; within-run SD at `STEPS` steps; between-run SD, NaN
    with one run), on the rule's scale."""

    machine: str
    code: str  # its loop's code fingerprint (`records.code_identity`); "" for records measured before fingerprints
    runs: int
    pairs: int
    steps: tuple[int, ...]  # timed steps of its repeats (() where its values carry none: H4's recoveries)
    center: float
    within_sd: float
    between_sd: float


def measure(reader: Reader, comparison: str, machine: str, code: str, runs: int | None = None) -> Measured:
    """`Measured` of one machine's committed records of a claim's comparison, as its `reader` reads them (the
    provenance a literal names; `runs`: its first run slots only); a timed reader's within-run SD rescaled to
    `STEPS` timed steps (`variance_components`), the others as measured."""
    read, value, scale, timed = reader
    found = read(machine, code, comparison, runs)
    scaled = timed and col.STEPS in found
    within, between, runs, n = variance_components(
        found, value, share=scale == "logit", linear=scale == "linear", steps=STEPS if scaled else None
    )
    center = clusters.over_runs(found, value, share=scale == "logit", linear=scale == "linear").center
    steps = tuple(sorted({int(s) for s in found[col.STEPS]})) if col.STEPS in found else ()
    return Measured(machine, code, runs, n, steps, round(center, 4), round(within, 4), round(between, 4))


# --- simulation -----------------------------------------------------------------------------------


class Power(NamedTuple):
    reproduced: float  # the interval wholly on the claim's side of the margin, and not fragile
    not_reproduced: float  # wholly on the other side (H1: within the band), and not fragile
    inconclusive: float  # neither: spanning the margin, or fragile


@functools.cache
def t_quantile(confidence: float, df: int) -> float:
    return stats.t_quantile(1 - (1 - confidence) / 2, df)


def draw(effect: float, within_sd: float, between_sd: float, runs: int, pairs_per_run: int, n_sims: int,
         seed: int) -> np.ndarray:  # fmt: skip
    """(n_sims, runs, pairs_per_run) pair values on the rule's scale: each run a between-run effect
    N(0, between_sd) plus, per pair, a within-run draw N(0, within_sd), around `effect`."""
    rng = np.random.default_rng(seed)
    run = rng.standard_normal((n_sims, runs, 1)) * between_sd
    return effect + run + rng.standard_normal((n_sims, runs, pairs_per_run)) * within_sd


def intervals(means: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) per row of run means: Student's t over the runs, runs - 1 df, as `clusters.over_runs`."""
    runs = means.shape[-1]
    if runs < 2:
        nan = np.full(means.shape[:-1], np.nan)
        return nan, nan
    center = means.mean(axis=-1)
    half = t_quantile(confidence, runs - 1) * means.std(axis=-1, ddof=1) / math.sqrt(runs)
    return center - half, center + half


def left_one_out(means: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) per row and left-out run: the t interval over the other runs (the fragility check)."""
    runs = means.shape[-1]
    if runs < 3:  # one run left: no interval, so no word survives
        nan = np.full(means.shape, np.nan)
        return nan, nan
    total, squares = means.sum(axis=-1, keepdims=True), (means**2).sum(axis=-1, keepdims=True)
    rest = (total - means) / (runs - 1)
    variance = np.maximum((squares - means**2 - (runs - 1) * rest**2) / (runs - 2), 0.0)
    half = t_quantile(confidence, runs - 2) * np.sqrt(variance / (runs - 1))
    return rest - half, rest + half


def holds(low: np.ndarray, high: np.ndarray, margin: float, side: str) -> np.ndarray:
    """Whether intervals lie wholly above (below) the margin; "within": inside [-margin, margin] (H1's band)."""
    with np.errstate(invalid="ignore"):
        if side == "above":
            return low > margin
        if side == "below":
            return high < margin
        return (low > -margin) & (high < margin)


def word(means: np.ndarray, margin: float, side: str, confidence: float) -> np.ndarray:
    """Per simulated data set: the rule's word on that side, and still said with any one run left out."""
    if means.shape[-1] < clusters.MIN_RUNS:
        return np.zeros(means.shape[0], bool)
    said = holds(*intervals(means, confidence), margin, side)
    return said & holds(*left_one_out(means, confidence), margin, side).all(axis=-1)


def simulate(
    effect: float,
    margin: float,
    within_sd: float,
    between_sd: float,
    runs: int,
    pairs_per_run: int,
    confidence: float,
    n_sims: int = N_SIMS,
    seed: int = SEED,
    refute_confidence: float | None = None,
    direction: str = "above",
    band: bool = False,
) -> Power:
    """How often R runs x P pairs, drawn around a true `effect`, say each word against `margin` (all on the rule's
    scale): "reproduced" where the interval at `confidence` lies wholly on the claim's side (`direction`), "not
    reproduced" where the interval at `refute_confidence` (default: the same) lies wholly on the other side
    (`band`: wholly within [-margin, margin], H1's refutation), each only where leaving out any one run leaves
    the same word (not fragile). A word needs `clusters.MIN_RUNS` runs."""
    means = draw(effect, within_sd, between_sd, runs, pairs_per_run, n_sims, seed).mean(axis=-1)
    other = "within" if band else {"above": "below", "below": "above"}[direction]
    yes = word(means, margin, direction, confidence)
    no = word(means, margin, other, confidence if refute_confidence is None else refute_confidence)
    p, q = float(yes.mean()), float((no & ~yes).mean())
    return Power(p, q, 1 - p - q)


# --- the committed design --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Design:
    """One claim's comparison (a preset, a knob, a change along the grid) under the committed design: the truths
    it must tell apart, the rule's margin and confidences, the variances assumed and where they came from.

    Truths and the margin are in the rule's units (1.62x, 50%); `within_sd` and `between_sd` on its scale
    (`scale`), the within-run SD at `STEPS` timed steps. `reproduce` and `refute` say how the rule combines this
    comparison with its siblings: ("any", k) where one of k suffices, ("all", k) where every one must (combined
    as independent; comparisons measured in the same runs are positively related, which makes "all" likelier)."""

    claim: str
    comparison: str
    scale: str
    margin: float
    claimed: float | None  # the truth under the claim; None where the records deny the claim here (`basis` says)
    other: float  # a truth clearly on the other side
    confidence: float  # of the intervals "reproduced" reads
    refute_confidence: float  # of those "not reproduced" reads
    within_sd: float
    between_sd: float
    basis: str  # where the truths and SDs came from, assumptions said as such
    sources: tuple[Measured, ...] = ()
    direction: str = "above"
    band: bool = False  # "not reproduced": the interval within [1/margin, margin] (H1)
    reproduce: tuple[str, int] = ("all", 1)
    refute: tuple[str, int] = ("any", 1)
    runs: int = RUNS
    pairs: int = PAIRS


def on_scale(design: Design, value: float) -> float:
    """A truth or margin on the design's scale (H1's band: its upper end)."""
    return to_scale(value, design.scale)


def powers(design: Design, runs: int | None = None, n_sims: int = N_SIMS, seed: int = SEED) -> dict[str, float]:
    """The design's chances, its comparisons combined as the rule combines them: "reproduced" where the truth is
    the claim (NaN without one), "not reproduced" where it is `other`, "false reproduced" where it sits on the
    margin (every comparison of an "any" rule there; one of an "all" rule, the others certainly holding)."""
    runs = design.runs if runs is None else runs

    def at(truth: float) -> Power:
        return simulate(on_scale(design, truth), on_scale(design, design.margin), design.within_sd,
                        design.between_sd, runs, design.pairs, design.confidence, n_sims, seed,
                        design.refute_confidence, design.direction, design.band)  # fmt: skip

    (how, k), (refute_how, refute_k) = design.reproduce, design.refute
    p = at(design.claimed).reproduced if design.claimed is not None else math.nan
    false = at(design.margin).reproduced
    q = at(design.other).not_reproduced
    return {
        "reproduced": p**k if how == "all" else p,  # "any": the claim may hold at one comparison only
        "not_reproduced": q**refute_k if refute_how == "all" else q,
        "false_reproduced": 1 - (1 - false) ** k if how == "any" else false,
    }


def meets(found: dict[str, float]) -> bool:
    """Whether the chances meet the targets (a missing truth under the claim is no target)."""
    p = found["reproduced"]
    power = p != p or p >= TARGET_POWER
    return power and found["not_reproduced"] >= TARGET_POWER and found["false_reproduced"] <= TARGET_FALSE


def runs_needed(design: Design, n_sims: int = N_SIMS, seed: int = SEED) -> int | None:
    """The fewest runs (of `design.pairs` repeats) meeting every target; None within `MAX_RUNS`."""
    for runs in range(max(3, clusters.MIN_RUNS), MAX_RUNS + 1):
        if meets(powers(design, runs, n_sims, seed)):
            return runs
    return None


def amount(value: float | None, scale: str) -> str:
    if value is None or value != value:
        return "-"
    return f"{value:.2f}x" if scale == "log" else f"{value:.1%}"


def chance(value: float) -> str:
    return "-" if value != value else f"{value:.1%}"


# --- the sequential design: looks, and where it stops ---------------------------------------------------


class Schedule(NamedTuple):
    """A claim's chances under the sequential design, at one truth per comparison: the word said where it stopped
    (or at the cap) and the mean runs it measured."""

    reproduced: float
    not_reproduced: float
    runs: float


def schedule(
    designs: tuple[Design, ...], truths: tuple[float, ...], between_sds: tuple[float, ...] | None = None,
    within_sds: tuple[float, ...] | None = None, n_sims: int = N_SIMS, seed: int = SEED,
) -> Schedule:  # fmt: skip
    """A claim's comparisons (`designs`, in the units of their margins, at `truths`) measured in the same runs and
    judged at every look of `sequential` as the rule judges them: each comparison's word at its look's level
    (`sequential.look_confidence`) and not fragile, combined as the claim combines them (`Design.reproduce`,
    `.refute`); the runs stop at the first look where the claim has a word, else at the last. SDs: the designs'
    own, unless given (a machine class's)."""
    from dlrm_study.analysis.sequential import LOOKS, look_confidence  # the looks' levels: simulated once, on use

    between_sds = between_sds or tuple(d.between_sd for d in designs)
    within_sds = within_sds or tuple(d.within_sd for d in designs)
    top = max(LOOKS)
    means = [
        draw(on_scale(d, t), w, b, top, d.pairs, n_sims, seed + i).mean(axis=-1)
        for i, (d, t, w, b) in enumerate(zip(designs, truths, within_sds, between_sds, strict=True))
    ]
    said_yes, said_no = np.zeros(n_sims, bool), np.zeros(n_sims, bool)
    stopped = np.full(n_sims, float(top))
    (how, _), (refute_how, _) = designs[0].reproduce, designs[0].refute
    combine = {"any": np.logical_or.reduce, "all": np.logical_and.reduce}
    for look in LOOKS:
        yes, no = [], []
        for d, m in zip(designs, means, strict=True):
            margin, other = on_scale(d, d.margin), "within" if d.band else {"above": "below", "below": "above"}[
                d.direction]  # fmt: skip
            yes.append(word(m[:, :look], margin, d.direction, look_confidence(d.confidence)))
            no.append(word(m[:, :look], margin, other, look_confidence(d.refute_confidence)))
        claim_yes, claim_no = combine[how](yes), combine[refute_how](no)
        new = ~(said_yes | said_no) & (claim_yes | claim_no)
        said_yes |= new & claim_yes
        said_no |= new & ~claim_yes & claim_no
        stopped[new] = look
    return Schedule(float(said_yes.mean()), float(said_no.mean()), float(stopped.mean()))


def scenarios(designs: tuple[Design, ...]) -> dict[str, tuple[float, ...]]:
    """The truths a claim's targets are read at: "claimed" (an "any" claim at one comparison only, the others on
    the margin), "other" (a "refute any" claim missed at one comparison, the others at the claim) and "margin" (an
    "any" claim with every comparison on the margin; an "all" claim with one there, the others at the claim)."""
    k, first = len(designs), designs[0]
    claimed = tuple(d.claimed if d.claimed is not None else d.margin for d in designs)
    at_margin = tuple(d.margin for d in designs)
    one = lambda at, rest: (at[0], *rest[1:])  # noqa: E731
    return {
        "claimed": one(claimed, at_margin) if first.reproduce[0] == "any" and k > 1 else claimed,
        "other": one(tuple(d.other for d in designs), claimed)
        if first.refute[0] == "any" and k > 1
        else tuple(d.other for d in designs),
        "margin": at_margin if first.reproduce[0] == "any" else one(at_margin, claimed),
    }


def sequential_powers(designs: tuple[Design, ...], n_sims: int = N_SIMS, seed: int = SEED) -> dict[str, float]:
    """A claim's chances under the sequential design at the truths of `scenarios`, and its mean runs there."""
    truths = scenarios(designs)
    yes, no, margin = (schedule(designs, truths[name], n_sims=n_sims, seed=seed) for name in ("claimed", "other",
                                                                                                 "margin"))  # fmt: skip
    return {
        "reproduced": yes.reproduced if all(d.claimed is not None for d in designs) else math.nan,
        "not_reproduced": no.not_reproduced,
        "false_reproduced": margin.reproduced,
        "runs_claimed": yes.runs,
        "runs_other": no.runs,
        "runs_margin": margin.runs,
    }


# --- S3's accuracy half: seeds, not runs -----------------------------------------------------------

ACCURACY_SEEDS = 6  # seeds per preset (profiles.ACCURACY_SEEDS["quick"]: tests/test_power.py holds them equal)
ACCURACY_MARGIN = 0.99  # bf16's learned gain at or above 99% of fp32's: the same accuracy
ACCURACY_CLAIMED, ACCURACY_OTHER = 1.0, 0.98  # the same accuracy, and one clearly short of it
# The records the seeds were designed from (the machines with bf16 seeds when the design was written): later
# machines' seeds are judged by it, not folded into it.
ACCURACY_MACHINES = ("amd-epyc-f23m1s2/avx2/2cpu",)


def accuracy_spreads(results: Path = RESULTS) -> list[tuple[str, str, int, float]]:
    """(machine, preset, seeds, SD over seeds) of bf16 Split-SGD's learned gain over fp32's, from the accuracy
    records of the quick study (results/convergence.csv) of ACCURACY_MACHINES: what the seeds' interval is made of."""
    from dlrm_study.analysis.convergence import accuracy_records  # the S3 reader, only where the seeds are asked of

    final = accuracy_records("quick", results, None)
    final = final[(final[col.KIND] == "eval") & final[col.MACHINE].isin(ACCURACY_MACHINES)]
    found = []
    for (machine, preset), rows in final.groupby([col.MACHINE, col.CONFIG_NAME]):
        wide = rows.pivot_table(index=[col.RUN_ID, "train.seed"], columns=col.VARIANT, values=col.EVAL_AUC)
        if not {OPTIMIZED_FP32, OPTIMIZED_BF16} <= set(wide):
            continue
        paired = wide[[OPTIMIZED_FP32, OPTIMIZED_BF16]].dropna()
        gain = (paired[OPTIMIZED_BF16] - 0.5) / (paired[OPTIMIZED_FP32] - 0.5)
        if len(gain) >= 2:
            found.append((str(machine), str(preset), len(gain), float(gain.std(ddof=1))))
    return found


def accuracy_power(seeds: int, sd: float, n_sims: int = N_SIMS, seed: int = SEED) -> dict[str, float]:
    """How often `seeds` seeds' 95% t interval (two-sided, as `stats.mean_interval`) says "holds" (wholly at or
    above ACCURACY_MARGIN) at a true 100%, "fails" (wholly below, at 1 - 0.05/2 as S3 reads it) at a true 98%, and
    "holds" at the margin itself."""
    rng = np.random.default_rng(seed)

    def interval(truth: float, confidence: float) -> tuple[np.ndarray, np.ndarray]:
        gains = rng.normal(truth, sd, size=(n_sims, seeds))
        half = t_quantile(confidence, seeds - 1) * gains.std(axis=1, ddof=1) / math.sqrt(seeds)  # two-sided
        return gains.mean(axis=1) - half, gains.mean(axis=1) + half

    return {
        "holds": float((interval(ACCURACY_CLAIMED, 0.95)[0] >= ACCURACY_MARGIN).mean()),
        "fails": float((interval(ACCURACY_OTHER, 0.975)[1] < ACCURACY_MARGIN).mean()),
        "false_holds": float((interval(ACCURACY_MARGIN, 0.95)[0] >= ACCURACY_MARGIN).mean()),
    }


def accuracy_markdown() -> str:
    """S3's accuracy half's seeds, their power at the largest spread the records show, and where it came from."""
    spreads = accuracy_spreads()
    sd = max((s for *_, s in spreads), default=math.nan)
    found = accuracy_power(ACCURACY_SEEDS, sd)
    fewest = next((n for n in range(3, 21) if accuracy_meets(accuracy_power(n, sd))), "more than 20")
    lines = [
        f"S3's accuracy half: {ACCURACY_SEEDS} seeds per preset; bf16 Split-SGD's learned gain over fp32's, SD over "
        f"seeds {sd:.4f} (the largest below); at a true {ACCURACY_CLAIMED:.0%} it holds (interval at or above "
        f"{ACCURACY_MARGIN:.0%}) {found['holds']:.1%} of the time, at a true {ACCURACY_OTHER:.0%} it fails "
        f"{found['fails']:.1%}, at {ACCURACY_MARGIN:.0%} itself it holds {found['false_holds']:.1%}; "
        f"{'met' if accuracy_meets(found) else 'missed'} (fewest seeds meeting the targets: {fewest}).",
        "",
    ]
    lines += [f"  - `{m}` {p}: {n} seeds, SD {s:.4f}" for m, p, n, s in spreads]
    return "\n".join(lines) + "\n"


def accuracy_meets(found: dict[str, float]) -> bool:
    return found["holds"] >= TARGET_POWER and found["fails"] >= TARGET_POWER and found["false_holds"] <= TARGET_FALSE


BEGIN, END = "<!-- power: begin -->", "<!-- power: end -->"  # docs/claims.md's table (`claims.designs`)


def section(doc: str) -> str:
    """What docs/claims.md holds between the power markers."""
    start, stop = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    return doc[start:stop].strip("\n") + "\n"
