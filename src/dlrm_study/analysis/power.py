"""The design of the claims' deciding measurements, derived from power and written before the records it judges.

A verdict is a t interval over run means (`clusters.over_runs`) that must lie wholly on one side of a margin and
stay there with any one run left out (not fragile). Whether a design of R runs x P repeats can say a word depends
on two spreads, each on the scale the rule summarizes on (log for ratios, logit for shares, linear for H4's
recovery): the spread of a repeat's pair around its run's mean (within run) and the spread of run means beyond
what their repeats explain (between runs). `variance_components` measures both from committed records;
`simulate` draws designs from them and applies the rule as `over_runs` does; `DESIGNS` holds the committed
design, each claim's assumptions and where every number came from, and `power_table` the powers it gives.
tests/test_power.py holds the design to its targets and the literals to the records and to `plans.profiles`.
"""

import dataclasses
import functools
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from dlrm_study.analysis import clusters, current, stats
from dlrm_study.analysis.cpu import embedding_share_rows
from dlrm_study.analysis.placement import recovery
from dlrm_study.config.variants import GPU_CACHED, GPU_HBM, GPU_HOST, OPTIMIZED_BF16, OPTIMIZED_FP32, REFERENCE
from dlrm_study.plans.profiles import REPO
from dlrm_study.records import columns as col
from dlrm_study.records import store
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
S3_FILES = (("sweeps.csv", "cpu-loops-quick"), ("bench.csv", "cpu-compare"))  # S3 pools both (claims.s3.s3_records)
S2_FILES = (("sweeps.csv", "cpu-loops-quick"),)
H4_FILES = (("gpu_sweeps.csv", "gpu-placements"),)


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
    run; a protocol-2 run warmed up until settled and counts every repeat). `runs`: only run slots 1..runs (a
    design fitted on a study's first runs names what it read, whatever runs came after)."""
    parts = []
    for name, study in files:
        frame = load(name)
        fingerprint = frame[col.CODE_FINGERPRINT].fillna("").astype(str)
        parts.append(frame[(frame[col.STUDY] == study) & (frame[col.MACHINE] == machine) & (fingerprint == code)])
    found = pd.concat(parts, ignore_index=True)
    if runs is not None and col.RUN_SLOT in found:
        slot = pd.to_numeric(found[col.RUN_SLOT], errors="coerce")
        found = found[slot.isna() | (slot <= runs)]
    found = current.without_warm_up(found[found[col.ERROR].isna()])
    return found[found[col.THREADS].astype(float) == found[col.THREADS].astype(float).max()]


def with_steps(pairs: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """The pairs with the timed steps of their run's records (the largest, where a run's records differ)."""
    steps = frame.groupby(col.RUN_ID)[col.STEPS].max().rename(col.STEPS)
    return pairs.merge(steps, left_on=col.RUN_ID, right_index=True, how="left")


def s3_pairs(machine: str, code: str, preset: str, runs: int | None = None) -> pd.DataFrame:
    """bf16 over fp32 samples/s per repeat on one preset (the pairs S3's rule reads), with their steps."""
    frame = records(S3_FILES, machine, code, runs)
    frame = frame[frame[col.CONFIG_NAME] == preset]
    return with_steps(stats.pairs(frame, OPTIMIZED_BF16, OPTIMIZED_FP32), frame)


def s2_shares(machine: str, code: str, preset: str, runs: int | None = None) -> pd.DataFrame:
    """The reference's share of its profiled iteration in embedding backward + update, per profiled repeat."""
    frame = records(S2_FILES, machine, code, runs)
    frame = frame[(frame[col.CONFIG_NAME] == preset) & (frame[col.VARIANT] == REFERENCE)]
    return embedding_share_rows(frame[frame[col.op_column("embedding_backward_update")].notna()])


def h4_recoveries(machine: str, code: str, comparison: str = "recovery", runs: int | None = None) -> pd.DataFrame:
    """H4's recovery (c - h) / (1 - h) per repeat (`placement.recovery`, the rule's own arithmetic), from host and
    cached over hbm."""
    frame = records(H4_FILES, machine, code, runs)
    return recovery(stats.pairs(frame, GPU_HOST, GPU_HBM), stats.pairs(frame, GPU_CACHED, GPU_HBM))


# claim: (reader, value, scale, whether its within-run SD is rescaled to `STEPS` timed steps). Only S3's pairs
# are timed steps; S2's shares come from the profiled window (`profile_steps`, 5 in the records and the design),
# and a GPU point times blocks of steps (`measure.gpu`), not `STEPS`.
READERS = {
    "S3": (s3_pairs, "ratio", "log", True),
    "S2": (s2_shares, "share", "logit", False),
    "H4": (h4_recoveries, "ratio", "linear", False),
}


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


def measure(claim: str, comparison: str, machine: str, code: str, runs: int | None = None) -> Measured:
    """`Measured` of one machine's committed records of a claim's comparison (the provenance a literal names;
    `runs`: its first run slots only); S3's within-run SD rescaled to `STEPS` timed steps (`variance_components`),
    the others as measured."""
    read, value, scale, timed = READERS[claim]
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


# Every machine's records of a claim's comparison at its newest code, read as `measure` reads them (repeat 0 out).
XEON_AMX = "intel-xeon-f6m207s2/avx512f+avx512_bf16+amx_bf16/2cpu"  # the first runs measured as processes
S3_SOURCES = {
    "dlrm-benchmark": (
        Measured("amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu", "", 2, 6, (10, 20), 1.6136, 0.1152, 0.0),
        Measured("intel-xeon/avx512f+avx512_bf16/2cpu", "", 2, 6, (10, 20), 0.7619, 0.0708, 0.0),
        Measured(XEON_AMX, "9e2daaf70920", 7, 21, (10,), 2.2779, 0.1831, 0.1116),
    ),
    "mlperf-scaled": (
        Measured("amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu", "", 2, 6, (10, 20), 1.9399, 0.1403, 0.0572),
        Measured("intel-xeon/avx512f+avx512_bf16/2cpu", "", 2, 6, (10, 20), 0.6519, 0.0444, 0.0),
        Measured(XEON_AMX, "9e2daaf70920", 7, 21, (10,), 2.8457, 0.1982, 0.1272),
    ),
}
S2_SOURCES = {
    "dlrm-benchmark": (
        Measured("amd-epyc-f23m1s2/avx2/2cpu", "ec2605cfdf0d", 2, 4, (15,), 0.4507, 0.013, 0.0),
        Measured("amd-epyc-f25m1s1/avx2/2cpu", "4558f71d66c2", 2, 4, (15,), 0.5543, 0.046, 0.0322),
        Measured("amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu", "", 1, 4, (20,), 0.5369, 0.0448, math.nan),
        Measured("intel-xeon/avx512f+avx512_bf16/2cpu", "", 2, 6, (10, 20), 0.6614, 0.255, 0.0),
        Measured(XEON_AMX, "a3d3afd44e4d", 7, 21, (10,), 0.6176, 0.0597, 0.0199),
    ),
    "mlperf-scaled": (
        Measured("amd-epyc-f23m1s2/avx2/2cpu", "ec2605cfdf0d", 2, 4, (15,), 0.0392, 0.0283, 0.1387),
        Measured("amd-epyc-f25m1s1/avx2/2cpu", "4558f71d66c2", 2, 4, (15,), 0.0536, 0.0617, 0.0818),
        Measured("amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu", "", 1, 4, (20,), 0.0614, 0.2506, math.nan),
        Measured("intel-xeon/avx512f+avx512_bf16/2cpu", "", 2, 6, (10, 20), 0.0711, 0.1376, 0.1023),
        Measured(XEON_AMX, "a3d3afd44e4d", 7, 21, (10,), 0.0715, 0.0716, 0.0889),
    ),
    "kaggle": (
        Measured("amd-epyc-f23m1s2/avx2/2cpu", "ec2605cfdf0d", 2, 4, (15,), 0.1816, 0.0778, 0.031),
        Measured("amd-epyc-f25m1s1/avx2/2cpu", "4558f71d66c2", 2, 4, (15,), 0.2204, 0.0753, 0.0),
        Measured("amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu", "", 1, 4, (20,), 0.1726, 0.0749, math.nan),
        Measured("intel-xeon/avx512f+avx512_bf16/2cpu", "", 2, 6, (10, 20), 0.1986, 0.0736, 0.0),
        Measured(XEON_AMX, "a3d3afd44e4d", 7, 21, (10,), 0.2166, 0.0893, 0.0806),
    ),
}
H200 = "avx512f+avx512_bf16+amx_bf16/16cpu/nvidia-h200"
H4_SOURCES = {
    "mlperf-scaled": (
        Measured(f"intel-xeon-f6m207s2/{H200}", "d21ede0945ba", 1, 4, (), 0.1439, 0.0124, math.nan),
        Measured(f"intel-xeon/{H200}", "", 1, 2, (), 0.6756, 0.0091, math.nan),
    ),
}

S3_BASIS = (
    "bf16 / fp32 pairs of the native-bf16 machines (results/sweeps.csv cpu-loops-quick and results/bench.csv "
    "cpu-compare, pooled); within: the largest, rescaled to 10 timed steps; between: the largest over both presets "
    "(the same runs measure both). The largest come from the first machine measured in separate processes, 7 "
    "runs (intel-xeon-f6m207s2); the earlier sources rest on 2 runs of one process, which understated the "
    "between-run spread about twofold"
)
S2_BASIS = (
    "the reference's profiled shares on every machine's newest code (results/sweeps.csv cpu-loops-quick); the "
    "largest within and between SDs (a share comes from the profiled window, 5 steps in the records and the design: "
    "not rescaled); truths: the shares the machines nearest 50% showed"
)
GPU_SPREAD = "assumed (no runs of these points yet)"
# A GPU claim's design is one lending's (`studies.gpu_lending`: 3 runs, each a process; 3 repeats a run for H1 and
# H4, 1 for H2 and H3): tests/test_gpu_lending.py holds these literals to the plan.
LENDING_RUNS = 3
DESIGNS = (
    Design("S3", "dlrm-benchmark", "log", 1.62, 1.8, 1.0, 0.975, 0.975, 0.1831, 0.1272, S3_BASIS,
           S3_SOURCES["dlrm-benchmark"], reproduce=("any", 2), refute=("all", 2)),
    Design("S3", "mlperf-scaled", "log", 1.62, 1.8, 1.0, 0.975, 0.975, 0.1982, 0.1272, S3_BASIS,
           S3_SOURCES["mlperf-scaled"], reproduce=("any", 2), refute=("all", 2)),
    Design("S2", "dlrm-benchmark", "logit", 0.5, 0.5369, 0.4507, 0.95, 1 - 0.05 / 3, 0.255, 0.0322, S2_BASIS,
           S2_SOURCES["dlrm-benchmark"]),
    Design("S2", "mlperf-scaled", "logit", 0.5, None, 0.0715, 0.95, 1 - 0.05 / 3, 0.2506, 0.1387,
           S2_BASIS + "; no machine's share lies above 50% here (4-7%), so no truth under the claim",
           S2_SOURCES["mlperf-scaled"]),
    Design("S2", "kaggle", "logit", 0.5, None, 0.2204, 0.95, 1 - 0.05 / 3, 0.0893, 0.0806,
           S2_BASIS + "; no machine's share lies above 50% here (17-22%), so no truth under the claim",
           S2_SOURCES["kaggle"]),
    Design("H4", "recovery", "linear", 0.5, 0.7, 0.3, 0.95, 0.975, 0.0124, 0.10,
           "within: the largest of the H200 placements' recoveries (results/gpu_sweeps.csv gpu-placements, one run "
           "each); between: assumed 0.10 (10 points of recovery: one run per machine, none to estimate it from); "
           "host below hbm taken as given (its ratio was 0.05-0.08x)", H4_SOURCES["mlperf-scaled"],
           refute=("any", 2), runs=LENDING_RUNS, pairs=3),
    Design("H1", "each knob", "log", 1.5, 1.875, 1.0, 1 - 0.05 / 6, 0.95, 0.10, 0.10,
           f"{GPU_SPREAD}: a GPU ratio, whose repeats spread 0.1-6% on the H200; 0.10 each, within and between",
           band=True, reproduce=("any", 6), refute=("all", 6), runs=LENDING_RUNS, pairs=3),
    Design("H2", "each table count", "log", 1.25, 1.5625, 1.0, 0.95, 1 - 0.05 / 3, 0.20, 0.10,
           f"{GPU_SPREAD}: a ratio of four records, two of them CPU loops (S3's pairs spread up to 0.14); within "
           "0.20, between 0.10", reproduce=("all", 3), refute=("any", 3), runs=LENDING_RUNS, pairs=1),
    Design("H3", "each dense count", "log", 0.8, 0.64, 1.0, 0.95, 1 - 0.05 / 3, 0.20, 0.10,
           f"{GPU_SPREAD}: as H2's", direction="below", reproduce=("all", 3), refute=("any", 3), runs=LENDING_RUNS,
           pairs=1),
)  # fmt: skip


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


@functools.cache
def table(n_sims: int = N_SIMS, seed: int = SEED) -> pd.DataFrame:
    rows = []
    for d in DESIGNS:
        found = powers(d, None, n_sims, seed)
        rows.append({"claim": d.claim, "comparison": d.comparison, "scale": d.scale, "margin": d.margin,
                     "claimed": d.claimed, "other": d.other, "confidence": d.confidence,
                     "refute_confidence": d.refute_confidence, "within_sd": d.within_sd, "between_sd": d.between_sd,
                     "runs": d.runs, "pairs": d.pairs, "steps": STEPS, **found, "meets": meets(found),
                     "runs_needed": runs_needed(d, n_sims, seed)})  # fmt: skip
    return pd.DataFrame(rows)


def power_table(n_sims: int = N_SIMS, seed: int = SEED) -> pd.DataFrame:
    """One row per claim and comparison: the truths, margin, variances, design, the chances of each word at its
    truth, whether they meet the targets, and the fewest runs that would."""
    return table(n_sims, seed).copy()


def amount(value: float | None, scale: str) -> str:
    if value is None or value != value:
        return "-"
    return f"{value:.2f}x" if scale == "log" else f"{value:.1%}"


def chance(value: float) -> str:
    return "-" if value != value else f"{value:.1%}"


def power_markdown(n_sims: int = N_SIMS, seed: int = SEED) -> str:
    """The table of `power_table` as docs/claims.md shows it, with each row's basis."""
    found = power_table(n_sims, seed)
    lines = [
        f"Design: the CPU claims {RUNS} runs x {PAIRS} repeats x {STEPS} timed steps per deciding point; the GPU "
        f"claims one lending's runs (the design column); targets: >= {TARGET_POWER:.0%} for each word where the "
        f'truth is on its side, <= {TARGET_FALSE:.1%} "reproduced" where it sits on the margin; {N_SIMS:,} '
        f"simulated designs each (seed {SEED}).",
        "",
        "| claim | comparison | design (runs x repeats) | margin | truth: claim / other | within SD | between SD | "
        "reproduced | not reproduced | false reproduced | targets | runs needed (x the row's repeats) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for d, row in zip(DESIGNS, found.itertuples(), strict=True):
        needed = "more than 60" if row.runs_needed is None or row.runs_needed != row.runs_needed else int(
            row.runs_needed)  # fmt: skip
        lines.append(
            f"| {d.claim} | {d.comparison} | {d.runs} x {d.pairs} | {amount(d.margin, d.scale)} | "
            f"{amount(d.claimed, d.scale)} / "
            f"{amount(d.other, d.scale)} | {d.within_sd:.3f} | {d.between_sd:.3f} | {chance(row.reproduced)} | "
            f"{chance(row.not_reproduced)} | {chance(row.false_reproduced)} | {'met' if row.meets else 'missed'} | "
            f"{needed} |"
        )
    lines += ["", "Where the numbers came from (SDs on the rule's scale: log, logit for shares, linear for H4):", ""]
    for d in DESIGNS:
        lines.append(f"- {d.claim} {d.comparison}: {d.basis}.")
        for s in d.sources:
            between = "-" if s.between_sd != s.between_sd else f"{s.between_sd:.4f}"
            steps = f", {'/'.join(map(str, s.steps))} steps" if s.steps else ""
            runs = f"{s.runs} run{'s' * (s.runs != 1)}"
            lines.append(
                f"  - `{s.machine}` (code {s.code or 'unfingerprinted'}): {runs}, {s.pairs} pairs{steps}; "
                f"centre {amount(s.center, d.scale)}, within {s.within_sd:.4f}, between {between}"
            )
    return "\n".join(lines) + "\n\n" + accuracy_markdown()


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
        half = t_quantile(1 - (1 - confidence) / 2, seeds - 1) * gains.std(axis=1, ddof=1) / math.sqrt(seeds)
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


BEGIN, END = "<!-- power: begin -->", "<!-- power: end -->"


def section(doc: str) -> str:
    """What docs/claims.md holds between the power markers."""
    start, stop = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    return doc[start:stop].strip("\n") + "\n"


def with_table(doc: str, text: str | None = None) -> str:
    """docs/claims.md with the text between the power markers replaced by `text` (`power_markdown()`)."""
    text = power_markdown() if text is None else text
    start, stop = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    return doc[:start] + "\n" + text + doc[stop:]
