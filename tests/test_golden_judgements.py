"""The golden judgements: today's rules decide on the committed fixture (tests/golden/records.jsonl) exactly as
src/dlrm_study/rules/golden.json says, and the fixture reaches every status each claim can reach."""

import pytest
from tests.golden import fixture

from dlrm_study.analysis.judgement import Status
from dlrm_study.claims import registry

WORDS = {Status.REPRODUCED, Status.NOT_REPRODUCED, Status.INCONCLUSIVE, Status.FRAGILE}
SHORT = {Status.ONE_RUN, Status.TOO_FEW, Status.NOT_YET, Status.UNRECORDED}
REACHABLE = {  # what each claim's rule can say (docs/claims.md, Outcomes)
    "H1": WORDS | SHORT | {Status.NOT_MEASURABLE},
    "H2": WORDS | SHORT | {Status.NOT_MEASURABLE},
    "H3": WORDS | SHORT | {Status.NOT_MEASURABLE},
    "H4": WORDS | SHORT | {Status.NOT_MEASURABLE},
    "S1": WORDS | SHORT | {Status.NOT_MEASURABLE},
    "S2": WORDS | SHORT,  # every machine can profile the reference
    "S3": WORDS | SHORT | {Status.NOT_MEASURABLE},
    "S4": {Status.NOT_MEASURABLE, Status.NOT_YET, Status.UNRECORDED},  # needs a cluster
}


@pytest.mark.slow
def test_todays_rules_decide_as_the_golden_judgements_say() -> None:
    moved = fixture.moved(fixture.judgements(), fixture.written())
    assert not moved, f"{len(moved)} judgements moved (python -m tests.golden says which): {moved[:5]}"


def test_the_fixture_reaches_every_status_of_every_claim() -> None:
    assert sorted(REACHABLE) == sorted(registry.BY_ID), "a claim of the registry without golden scenarios, or one gone"
    reached: dict[str, set[str]] = {}
    for judgement in fixture.written().values():
        if "claim" in judgement:
            reached.setdefault(judgement["claim"], set()).add(judgement["status"])
    assert reached == {claim: {str(s) for s in statuses} for claim, statuses in REACHABLE.items()}
    rows = {j["status"] for name, j in fixture.written().items() if name.startswith("class row")}
    assert {str(Status.MACHINES_DISAGREE), str(Status.REPRODUCED)} <= rows


def test_a_judgement_keeps_what_was_decided_not_its_sentences() -> None:
    from dlrm_study.analysis import stats
    from dlrm_study.analysis.judgement import Judgement

    numbers = {"a": stats.Ratio(1.9, 1.8, 2.0, 9, 0.05, 3)}
    one = fixture.kept(Judgement(Status.REPRODUCED, "one way of saying it", numbers, 3, 9))
    other = fixture.kept(Judgement(Status.REPRODUCED, "another", numbers, 3, 9))
    assert one == other
    assert one != fixture.kept(Judgement(Status.REPRODUCED, "", {"a": numbers["a"]._replace(low=1.79)}, 3, 9))
