"""The sequential design (docs/claims.md, "Design and power"): looks written with the rules, each read at the level
that keeps a false word at any look as rare as at one, the claims' chances under it, and `make reproduce`'s claim
runs stopping at the first look where every claim has its word."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dlrm_study.analysis import clusters, power, sequential, stats
from dlrm_study.claims import designs
from dlrm_study.plans import profiles
from dlrm_study.studies import runs


def test_the_looks_end_at_the_cap() -> None:
    """The looks rise from a verdict word's fewest runs to the design's cap, the claim runs `make reproduce` may
    measure."""
    looks = profiles.LOOKS
    assert list(looks) == sorted(set(looks)) and looks[0] >= clusters.MIN_RUNS
    assert looks[-1] == profiles.CLAIM_RUNS["quick"] == power.RUNS
    assert profiles.next_look(3) == 5 and profiles.next_look(looks[-1]) is None


def crossings(level: float, looks: tuple[int, ...], n_sims: int, seed: int) -> float:
    """How often a t statistic over null run means crosses its bound at `level` at some look (a fresh simulation,
    not `sequential.nominal`'s own)."""
    rng = np.random.default_rng(seed)
    means = rng.standard_normal((n_sims, max(looks)))
    crossed = np.zeros(n_sims, bool)
    for look in looks:
        m = means[:, :look]
        t = m.mean(axis=1) / (m.std(axis=1, ddof=1) / np.sqrt(look))
        crossed |= t > stats.t_quantile(1 - level, look - 1)
    return float(crossed.mean())


@pytest.mark.parametrize("alpha", [0.0125, 0.025])
def test_each_look_reads_at_the_level_that_keeps_the_overall_rate(alpha: float) -> None:
    """At the per-look level, a false word at some look is as likely as `alpha` (to the simulation's error); read at
    `alpha` at every look, it would be about three times as likely: the adjustment is what keeps the rate."""
    level = sequential.nominal(alpha)
    assert level < alpha / 3
    found = crossings(level, profiles.LOOKS, 200_000, seed=7)
    assert found == pytest.approx(alpha, rel=0.12)
    assert crossings(alpha, profiles.LOOKS, 200_000, seed=7) > 2.5 * alpha


def test_look_confidence_widens_the_rules_own() -> None:
    for confidence in (stats.CONFIDENCE, stats.family(2), stats.family(3)):
        wider = sequential.look_confidence(confidence)
        assert confidence < wider < 1
        assert 1 - wider == pytest.approx(2 * sequential.nominal(round((1 - confidence) / 2, 12)))


@pytest.mark.parametrize("claim", designs.SEQUENTIAL)
def test_the_sequential_claims_meet_their_targets(claim: str) -> None:
    """At the designs' SDs: >= 80% for each word where the truth is on its side, <= 2.5% "reproduced" on the
    margin, with the claim's comparisons combined as its rule combines them."""
    row = designs.sequential_table().set_index("claim").loc[claim]
    said = row.to_dict()
    assert row.reproduced != row.reproduced or row.reproduced >= power.TARGET_POWER, said
    assert row.not_reproduced >= power.TARGET_POWER, said
    assert row.false_reproduced <= power.TARGET_FALSE, said


def test_a_class_far_from_the_margin_stops_early_and_one_near_it_does_not() -> None:
    """The AMX Xeon's S3 (2.34x, 3.45x against 1.62x) stops by the second look; the Zen 4's (1.59x, 1.73x) measures
    far longer: the design pays where the truth sits near the margin, not everywhere."""
    found = designs.class_runs().set_index(["class", "claim"])
    assert found.loc[("AMX Xeon", "S3")].runs <= profiles.LOOKS[1] + 1
    assert found.loc[("AMX Xeon", "S3")].reproduced >= power.TARGET_POWER
    assert found.loc[("Zen 4", "S3")].runs > 3 * found.loc[("AMX Xeon", "S3")].runs


def fake_study(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A sequential study of the design's cap of runs, each slot's process faked: the slots `runs.measure` launches."""
    study = runs.Study("fake", lambda _: profiles.LOOKS[-1], lambda *_: "", sequential=True)
    monkeypatch.setattr(runs, "STUDIES", (study,))
    monkeypatch.setattr(runs, "BY_NAME", {"fake": study})
    launched: list[int] = []

    def launch(command: list[str], env: dict[str, str]) -> tuple[int, str, int]:
        launched.append(int(command[command.index("--slot") + 1]))
        return 0, "measured\n", 4242

    monkeypatch.setattr(runs, "launch", launch)
    return launched


def test_claim_runs_stop_at_the_first_look_with_every_word(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    launched = fake_study(monkeypatch)
    looked: list[int] = []

    def look(out: Path, profile: str, machine: str) -> tuple[bool, str]:
        looked.append(len(launched))
        return len(launched) >= profiles.LOOKS[1], "S2 not reproduced, S3 reproduced"

    assert runs.measure("quick", tmp_path, look=look) == 0
    assert launched == list(range(1, profiles.LOOKS[1] + 1))
    assert looked == list(profiles.LOOKS[:2])


def test_without_a_word_the_claim_runs_go_to_the_cap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    launched = fake_study(monkeypatch)
    assert runs.measure("quick", tmp_path, look=lambda *_: (False, "S3 inconclusive")) == 0
    assert launched == list(range(1, profiles.LOOKS[-1] + 1))


# --- invocations as a level -------------------------------------------------------------------------


def invocation_of(n: int, ratio: float, name: str) -> list[dict]:
    """S3's bf16 and fp32 in `n` runs of one invocation, each run's ratio `ratio` within 1%."""
    from tests.test_verdicts import XEON, speed

    wobble = [ratio * (1 + 0.01 * ((i % 3) - 1)) for i in range(n)]
    return [{**r, "invocation": name} for r in speed(XEON, wobble, run=name)]


def test_a_disturbed_invocation_no_single_run_reveals_makes_the_word_fragile() -> None:
    """Ten runs of a quiet invocation at 2.3x beside four of one disturbed together (every run slowed to 1.6x):
    over all fourteen S3 reads reproduced, and no single run left out turns it; left out whole, the quiet
    invocation leaves the disturbed one, which does not reach 1.62x: fragile, and the invocation is named."""
    from tests.test_verdicts import SAME, XEON, aucs, judged, verdict

    loops = pd.DataFrame(invocation_of(10, 2.3, "quiet") + invocation_of(4, 1.6, "loaded"))
    assert verdict("S3", XEON, cpu_loops=loops, accuracy=aucs(XEON, SAME)).status == "reproduced"
    found = judged("S3", XEON, cpu_loops=loops, accuracy=aucs(XEON, SAME))
    assert found.status == "fragile" and "without invocation quiet" in found.detail, found.detail
    assert "2 invocations" in found.notes
    one = loops.assign(invocation="one")  # the same runs as one invocation: no run alone turns the word
    assert judged("S3", XEON, cpu_loops=one, accuracy=aucs(XEON, SAME)).status == "reproduced"


def test_records_without_an_invocation_are_grouped_by_their_commit() -> None:
    frame = pd.DataFrame(
        {"run_id": ["a", "b", "c", "d"], "invocation": ["x", "x", "", None], "git_commit": ["1", "1", "2", "3"]}
    )
    assert clusters.invocations([frame]) == {
        "commit 2": frozenset({"c"}),
        "commit 3": frozenset({"d"}),
        "x": frozenset({"a", "b"}),
    }
