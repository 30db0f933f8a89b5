"""scripts/rerule.py: records measured under another rules' id (or a digest from before the rules were declared) take
today's id only where the code of the commit that gives it judges the golden fixture as today's rules do; others
stay. `store.relabel` underneath."""

import runpy
from pathlib import Path

import pytest

from dlrm_study import rules
from dlrm_study.records import store

ROOT = Path(__file__).resolve().parents[1]


def test_relabel_keeps_the_value_measured_under_and_runs_once(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    store.append_many(path, [{"rules_hash": "aaa", "x": 1}, {"rules_hash": "bbb", "x": 2}])
    with open(path, "a") as f:
        f.write("aaa\n")  # a line cut short: as found
    done = store.relabel(path, "rules_hash", "measured", {"aaa": "new"})
    assert done == {"aaa": 1}
    header, rows = store.raw_rows(path)
    assert header == ["rules_hash", "x", "measured"]
    assert rows == [["new", "1", "aaa"], ["bbb", "2", ""], ["aaa"]]
    before = path.read_bytes()
    assert not store.relabel(path, "rules_hash", "measured", {"aaa": "new"}) and path.read_bytes() == before
    # A later id for the same rules: matched by what the row was measured under, which stays.
    assert store.relabel(path, "rules_hash", "measured", {"aaa": "newer"}) == {"aaa": 1}
    assert store.raw_rows(path)[1][0] == ["newer", "1", "aaa"]


@pytest.mark.slow
def test_a_digest_whose_commit_judges_as_today_gets_the_id_and_others_stay(tmp_path: Path, capsys) -> None:
    """20eb8d1's code gave the digest 7096abd47112 (a literal from results/) and, until the sequential design moved
    the golden judgements (the looks' level), today's judgements: now its records keep their digest, as a digest no
    named commit gives does; a record of today's id stays today's."""
    store.append_many(tmp_path / "r.csv", [
        {"rules_hash": "7096abd47112", "git_commit": "20eb8d19562a6d6c83f469de7ddb4d5ed3be9ef5", "x": 1},
        {"rules_hash": "0123456789ab", "git_commit": "deadbeef00", "x": 2},
        {"rules_hash": rules.rules_id(), "git_commit": "", "x": 3},
    ])  # fmt: skip
    script = runpy.run_path(str(ROOT / "scripts" / "rerule.py"))
    script["sys"].argv = ["rerule.py", str(tmp_path)]
    assert script["main"]() == 0
    rows = store.read_rows(tmp_path / "r.csv")[1]
    assert [r["rules_hash"] for r in rows] == ["7096abd47112", "0123456789ab", rules.rules_id()]
    said = capsys.readouterr().out
    assert "7096abd47112: other rules" in said and "0123456789ab: other rules" in said
    before = (tmp_path / "r.csv").read_bytes()
    assert script["main"]() == 0 and (tmp_path / "r.csv").read_bytes() == before
