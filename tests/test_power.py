"""The design of the claims' deciding points (each claim's DESIGNS, `claims.designs`) against its targets, its
literals against the records and `plans.profiles`, its simulation (`analysis.power`) against the rule's own
interval, and docs/claims.md's table against `power_markdown()`."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dlrm_study.analysis import clusters, power
from dlrm_study.claims import designs
from dlrm_study.plans import profiles
from dlrm_study.records import columns as col

CLAIMS_DOC = Path(__file__).resolve().parents[1] / "docs" / "claims.md"
CPU_DESIGNS = [d for d in designs.DESIGNS if not d.claim.startswith("H")]  # the GPU claims': one lending's runs
IDS = [f"{d.claim}-{d.comparison}" for d in CPU_DESIGNS]


@pytest.mark.parametrize("design", CPU_DESIGNS, ids=IDS)
def test_design_meets_targets(design: power.Design) -> None:
    """At the committed variances: >= 80% for each word where the truth is on its side, <= 2.5% "reproduced"
    where the truth sits on the margin (a miss names the row; `runs_needed` says what would meet it)."""
    found = designs.power_table().set_index(["claim", "comparison"]).loc[(design.claim, design.comparison)]
    said = (
        f"reproduced {found.reproduced:.1%}, not reproduced {found.not_reproduced:.1%}, false "
        f"{found.false_reproduced:.1%} at {design.runs} runs x {design.pairs}; needs {found.runs_needed} runs"
    )
    assert math.isnan(found.reproduced) or found.reproduced >= power.TARGET_POWER, said
    assert found.not_reproduced >= power.TARGET_POWER, said
    assert found.false_reproduced <= power.TARGET_FALSE, said


def test_design_is_the_profiles() -> None:
    """The design the power analysis ran is the one `make reproduce` measures: a change to either runs it again."""
    quick = profiles.PRESETS["quick"]
    assert (profiles.CLAIM_RUNS["quick"], quick.repeats, quick.steps) == (power.RUNS, power.PAIRS, power.STEPS)
    assert quick.profile_steps == power.PROFILE_STEPS  # S2's shares are not rescaled: the records' window
    assert all((d.runs, d.pairs) == (power.RUNS, power.PAIRS) for d in CPU_DESIGNS)


def test_variances_come_from_the_records() -> None:
    """Every source literal is what `measure` reads from the committed records it names, and every design's SDs
    the largest of its sources' (or said to be assumed)."""
    for design in designs.DESIGNS:
        for source in design.sources:
            found = designs.measure(design.claim, design.comparison, source.machine, source.code, source.runs)
            assert alike(found, source), f"{design.claim} {design.comparison}: {found} in the records, {source} written"
    by_claim: dict[str, list[power.Measured]] = {}
    for design in designs.DESIGNS:
        by_claim.setdefault(design.claim, []).extend(design.sources)
    for design in designs.DESIGNS:
        if not design.sources or design.basis.startswith("assumed"):
            continue
        assert design.within_sd == max(s.within_sd for s in design.sources)
        pool = by_claim["S3"] if design.claim == "S3" else design.sources  # S3: the same runs measure both presets
        betweens = [s.between_sd for s in pool if not math.isnan(s.between_sd)]
        if betweens:
            assert design.between_sd == max(betweens)
        else:
            assert "between: assumed" in design.basis
        if design.claim == "S2":  # its truths: the shares the machines nearest 50% showed, on either side
            above = [s.center for s in design.sources if s.center > design.margin]
            assert design.claimed == (min(above) if above else None)
            assert design.other == max(s.center for s in design.sources if s.center < design.margin)


def alike(a: power.Measured, b: power.Measured) -> bool:
    """Two Measured alike: the same records (machine, code, runs, pairs, steps), numbers within 1e-4."""
    same = (a.machine, a.code, a.runs, a.pairs, a.steps) == (b.machine, b.code, b.runs, b.pairs, b.steps)
    numbers = zip((a.center, a.within_sd, a.between_sd), (b.center, b.within_sd, b.between_sd), strict=True)
    return same and all((math.isnan(x) and math.isnan(y)) or abs(x - y) <= 1e-4 for x, y in numbers)


def test_simulation_judges_what_the_rule_judges() -> None:
    """One drawn data set: the simulation's interval and its leave-one-out intervals are `clusters.over_runs`'s
    over the same pairs (ratios on the log scale), and over the runs left with one out."""
    runs, pairs, confidence = 6, 3, 0.975
    drawn = power.draw(math.log(1.7), 0.12, 0.06, runs, pairs, n_sims=1, seed=7)[0]
    frame = pd.DataFrame([{col.MACHINE: "m", col.THREADS: 2, col.RUN_ID: f"r{r}", "ratio": math.exp(drawn[r, p])}
                          for r in range(runs) for p in range(pairs)])  # fmt: skip
    means = drawn.mean(axis=-1)[None, :]
    low, high = power.intervals(means, confidence)
    r = clusters.over_runs(frame, "ratio", confidence)
    assert (math.exp(low[0]), math.exp(high[0])) == pytest.approx((r.low, r.high), rel=1e-9)
    lows, highs = power.left_one_out(means, confidence)
    for j in range(runs):
        rest = clusters.over_runs(frame[frame[col.RUN_ID] != f"r{j}"], "ratio", confidence)
        assert (math.exp(lows[0, j]), math.exp(highs[0, j])) == pytest.approx((rest.low, rest.high), rel=1e-9)


def test_the_simulation_can_fail() -> None:
    """Two runs say no word (a word needs MIN_RUNS, and one left out leaves no interval): the design misses."""
    s3 = designs.DESIGNS[0]
    found = power.powers(s3, runs=2, n_sims=2000)
    assert found["reproduced"] < power.TARGET_POWER and found["not_reproduced"] < power.TARGET_POWER
    assert not power.meets(found)


def test_false_reproduced_at_the_margin_is_at_most_the_one_sided_rate() -> None:
    """At the margin, "reproduced" (a 95% interval above it, not fragile) happens at most 2.5% of the time."""
    found = power.simulate(0.0, 0.0, 0.1, 0.05, 10, 3, 0.95, n_sims=20000, seed=3)
    assert found.reproduced <= 0.025 and found.not_reproduced <= 0.025


def test_variance_components_recover_known_spreads() -> None:
    """Synthetic pairs with known within and between SDs (log scale): both come back within sampling error,
    and `steps` rescales the within-run SD by sqrt(steps / target)."""
    rng = np.random.default_rng(11)
    runs, pairs = 400, 4
    run_effect = rng.normal(0, 0.05, runs)
    run = {col.MACHINE: "m", col.THREADS: 2, col.STEPS: 20}
    frame = pd.DataFrame(
        [{**run, col.RUN_ID: f"r{r}", "ratio": math.exp(0.3 + run_effect[r] + rng.normal(0, 0.1))}
         for r in range(runs) for _ in range(pairs)]
    )  # fmt: skip
    within, between, n_runs, n_pairs = power.variance_components(frame)
    assert (n_runs, n_pairs) == (runs, runs * pairs)
    assert within == pytest.approx(0.1, rel=0.05) and between == pytest.approx(0.05, rel=0.2)
    rescaled = power.variance_components(frame, steps=10)
    assert rescaled[0] == pytest.approx(within * math.sqrt(2)) and rescaled[1] == between


def test_docs_table_is_current() -> None:
    """docs/claims.md's "Design and power" table is `power_markdown()` (`python scripts/power_table.py`)."""
    assert power.section(CLAIMS_DOC.read_text()) == designs.power_markdown()


def test_the_accuracy_power_reads_the_rules_own_intervals():
    """`accuracy_power` simulates the intervals S3's accuracy half reads (`stats.mean_interval`: two-sided, at 95%
    for "holds", at 1 - 0.05/2 for "fails"), not intervals whose alpha is halved once more."""
    from dlrm_study.analysis import stats

    sd, seeds, n = 0.0043, 6, 400
    found = power.accuracy_power(seeds, sd, n_sims=n, seed=1)
    rng = np.random.default_rng(1)
    truths = (power.ACCURACY_CLAIMED, power.ACCURACY_OTHER, power.ACCURACY_MARGIN)  # the order it draws them
    drawn = [rng.normal(truth, sd, size=(n, seeds)) for truth in truths]

    def share(gains: np.ndarray, confidence: float, end: int, holds) -> float:
        return float(np.mean([holds(stats.mean_interval(g, confidence)[end]) for g in gains]))

    assert found == pytest.approx({
        "holds": share(drawn[0], stats.CONFIDENCE, 1, lambda low: low >= power.ACCURACY_MARGIN),
        "fails": share(drawn[1], stats.family(2), 2, lambda high: high < power.ACCURACY_MARGIN),
        "false_holds": share(drawn[2], stats.CONFIDENCE, 1, lambda low: low >= power.ACCURACY_MARGIN),
    })  # fmt: skip


def test_the_accuracy_half_has_the_seeds_its_spread_asks_for():
    """S3's accuracy seeds: the committed count is profiles' and meets the targets at the largest spread of the
    records; 3 seeds (the earlier design) miss them."""
    assert profiles.ACCURACY_SEEDS["quick"] == power.ACCURACY_SEEDS
    sd = max(s for *_, s in power.accuracy_spreads())
    assert power.accuracy_meets(power.accuracy_power(power.ACCURACY_SEEDS, sd))
    assert not power.accuracy_meets(power.accuracy_power(3, sd))
