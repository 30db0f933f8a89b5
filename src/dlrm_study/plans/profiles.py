"""Profiles: how much every study measures, in one place.

- `smoke`: seconds; what nbval runs in CI. Tiny configs, two repeats (so every interval
  code path runs), records in a scratch folder.
- `quick`: what `make reproduce` runs: one run (RUNS) of every descriptive study and CLAIM_RUNS runs
  of the points the CPU claims' rules read, each run its own process (docs/reproduce.md gives the
  budget per study). To afford the runs it measures fewer points than `full`; each notebook says
  what it left out.
- `full`: paper-grade: more repeats and steps, every point.
"""

import tempfile
from dataclasses import dataclass
from pathlib import Path

from dlrm_study import settings
from dlrm_study.errors import UsageError
from dlrm_study.rules import literal

PROFILES = ("smoke", "quick", "full")


@dataclass(frozen=True)
class Protocol:
    """How one point is measured: repeats, each a warm-up then timed (and profiled) steps."""

    repeats: int
    steps: int
    warmup: int
    profile_steps: int = 0


# A run is a process (`studies.runs`): a fresh interpreter with its own run id, measuring one run of one
# study. Descriptive studies (figures, sensitivity, ablation, breakdowns, scaling) get RUNS runs: their
# intervals are printed, no verdict reads them on a CPU, and with one run the interval shown is over that
# run's pairs and says so. The points a CPU claim's rule reads (S2's reference breakdown, S3's bf16 and
# fp32) get CLAIM_RUNS runs: the design of docs/claims.md ("Design and power"), derived from the variances
# the records showed by `analysis.power`, declared with the rules (src/dlrm_study/rules/rules.toml) and held to
# its targets by tests/test_power.py.
RUNS = {"smoke": 2, "quick": 1, "full": 2}
CLAIM_RUNS = {"smoke": 3, "quick": literal("design", "claim_runs"), "full": literal("design", "claim_runs")}
# The claim runs are sequential: judged after the runs of each look, they stop at the first look where every claim
# they feed has its word (`claims.looks`); CLAIM_RUNS is the last look, the cap (`analysis.sequential`).
LOOKS: tuple[int, ...] = tuple(literal("design", "looks"))


def next_look(runs: int) -> int | None:
    """The first look after `runs` runs (None past the last: the cap)."""
    return next((look for look in LOOKS if look > runs), None)


# Repeats are per run, and every one counts: each variant warms up untimed until its step time settles
# (`measure.settle`, at least `warmup` steps), so first-use costs stay out of the first repeat.
# Timed studies at small configs (the sensitivity sweeps, the dense x sparse grid). The
# reference loop's steps vary most (its sparse gradients are allocated anew every step), so
# a repeat times 15 of them; notebook 03 prints the intervals this gives at the base point.
SWEEP = {"smoke": Protocol(2, 2, 1), "quick": Protocol(3, 15, 2), "full": Protocol(6, 30, 5)}
# The CPU presets (notebooks 01, 02): big tables take seconds to build (each repeat builds anew), so
# fewer steps: 2 runs x 3 repeats x 15 steps cost about what 5 repeats x 20 steps of one run did.
PRESETS = {"smoke": Protocol(2, 2, 1, 1), "quick": Protocol(3, 10, 2, 5), "full": Protocol(5, 30, 3, 5)}
# The 2020 baseline (notebook 02's S1 decomposition, `make baseline-2020`): big presets at 1 and 2
# threads, few steps each, since the 2020 reference takes about a second a step.
BASELINE = {"smoke": Protocol(2, 2, 1), "quick": Protocol(3, 6, 2), "full": Protocol(5, 20, 3)}
# Distributed points (notebook 06) and local against remote tables (notebook 05), one process each.
RANKS = {"smoke": Protocol(2, 2, 1), "quick": Protocol(3, 15, 3), "full": Protocol(5, 30, 5)}

# Convergence (notebook 07): steps trained and the window the loss is averaged over.
CONVERGENCE_STEPS = {"smoke": 40, "quick": 1500, "full": 20000}
# S3's accuracy benchmark (a reduction of the timed presets, batch 256: `studies/convergence.py`): steps each
# seed trains in each precision; quick: fp32 reached 90-91% of the attainable gain in 1,000 steps (one seed per
# preset), so 1,200 leave a margin; 18 such runs cost more than 25 minutes on 2 loaded cores (docs/reproduce.md).
ACCURACY_STEPS = {"smoke": 20, "quick": 1200, "full": 4000}
# Seeds each loop trains from: S3's accuracy half needs an interval over at least 3 (docs/claims.md).
CONVERGENCE_SEEDS = {"smoke": 2, "quick": 3, "full": 5}
# Seeds of S3's accuracy half, from the seed-to-seed spread of bf16's gain over fp32's: with 3 seeds a true
# 100% read "undecided" against 99% (99.8% [97.9%, 101.7%] on a Zen 4); `analysis.power.accuracy_power` holds
# 6 to >= 80% power (docs/claims.md, "Design and power").
ACCURACY_SEEDS = {"smoke": 2, "quick": 6, "full": 6}
LOSS_WINDOW = {"smoke": 10, "quick": 50, "full": 500}

# The cache study (notebook 05): Zipf exponents, cache sizes, and (most warm-up, counted) batches:
# a cache warms until it has evicted rows for as many batches as are counted (steady state), or
# for the most warm-up batches where it never fills. On mlperf-scaled at Zipf 1.05 a 1% cache
# first evicts after 5 batches, 5% after 55, 10% after 153 (then ~3,100 rows a batch); 20% not
# within 400. A 10% LRU cache counted over batches 200-400 and 400-600 gave the same 94.2%.
CACHE_ALPHAS = {"smoke": [0.8, 1.2], "quick": [0.6, 0.8, 1.05, 1.2, 1.4], "full": [0.4, 0.6, 0.8, 1.0, 1.05, 1.2, 1.4]}
CACHE_FRACTIONS = {"smoke": [0.3, 0.5], "quick": [0.01, 0.05, 0.1, 0.2], "full": [0.005, 0.01, 0.02, 0.05, 0.1, 0.2]}
CACHE_BATCHES = {"smoke": (20, 4), "quick": (300, 100), "full": (3000, 500)}


def described(name: str) -> str:
    """A profile's design in words, from the literals above (the README's profiles line is this sentence)."""
    cpu, sweep, ranks = PRESETS[name], SWEEP[name], RANKS[name]
    claim_runs = (
        f"up to {CLAIM_RUNS[name]} runs of the points the CPU claims' rules read (judged after "
        f"{', '.join(map(str, LOOKS))} runs, stopped at the first look where every claim they feed has its word)"
    )
    return (
        f"{RUNS[name]} run(s) of each descriptive study and {claim_runs}, each run a process; per run, "
        f"{cpu.repeats} repeats of {cpu.steps} timed and {cpu.profile_steps} profiled steps at the full presets, "
        f"{sweep.repeats} repeats of {sweep.steps} timed steps at the sensitivity points and the ablation, "
        f"{ranks.repeats} repeats of {ranks.steps} steps per distributed point; {CONVERGENCE_SEEDS[name]} seeds per "
        f"loop for convergence and {ACCURACY_SEEDS[name]} per precision for S3's accuracy"
    )


def profile(value: str | None = None) -> str:
    """The profile asked for, else $DLRM_STUDY_PROFILE, else quick."""
    chosen = value or settings.current().profile or "quick"
    if chosen not in PROFILES:
        raise UsageError(f"profile {chosen!r} is not one of {', '.join(PROFILES)}")
    return chosen


# The repository this package was installed from (an editable install): its results/ hold the
# published records, found from here rather than from the working directory.
REPO = Path(__file__).resolve().parents[3]


SCRATCH = "dlrm-study-smoke-"  # a smoke run's records folder, one a process, under the system's temporary folder


def results_dir(profile: str, value: str | None = None) -> Path:
    """Where records and figures go: the given folder; a scratch folder for smoke runs; else
    the repository's results/ (wherever the notebook runs from)."""
    if value:
        return Path(value)
    if profile == "smoke":
        return Path(tempfile.mkdtemp(prefix=SCRATCH))
    if not (REPO / "pyproject.toml").is_file():
        raise UsageError(f"no repository at {REPO} (dlrm-study not installed from a checkout): pass results_dir")
    return REPO / "results"


def shown(path: Path | str) -> str:
    """A path as a reader should see it: relative to the repository when inside it."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)
