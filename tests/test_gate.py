"""docs/reproduce.md states the verdict gate the code applies: its paragraph is generated from the rules."""

from pathlib import Path

from dlrm_study.report import gate

REPO = Path(__file__).resolve().parents[1]


def test_reproduce_md_states_the_gate_and_rules_the_rules_declare() -> None:
    doc = (REPO / "docs" / "reproduce.md").read_text()
    assert gate.section(REPO) in doc, "docs/reproduce.md's verdict gate or rules are stale: make render"
    rows = gate.rules_rows((REPO / "docs" / "claims.md").read_text())
    assert [row.split(" | ")[0] for row in rows] == [f"| {c}" for c in ("H1", "H2", "H3", "H4", "S1", "S2", "S3", "S4")]


def test_the_gate_reads_the_declared_runs(monkeypatch) -> None:
    assert "at least 3 runs of each deciding comparison" in gate.text()
    monkeypatch.setattr(gate, "MIN_RUNS", 4)
    assert "at least 4 runs of each deciding comparison" in gate.text()


def test_a_stale_paragraph_is_rewritten(tmp_path: Path) -> None:
    doc = tmp_path / "docs" / "reproduce.md"
    doc.parent.mkdir()
    claims = "### Rules\n\n| id | measured by | reproduced | not reproduced |\n| --- | --- | --- | --- |\n"
    (tmp_path / "docs" / "claims.md").write_text(claims + "| S9 | a ratio | above 2x | below 2x |\n\nmore\n")
    protocol = f"{gate.PROTOCOL_BEGIN}\nquick: 2 runs\n{gate.PROTOCOL_END}\n"
    doc.write_text(f"{protocol}before\n{gate.BEGIN}\nat least 5 pairs\n{gate.END}\nafter\n")
    assert gate.write(tmp_path)
    written = doc.read_text()
    assert written.startswith(f"{gate.protocol()}\nbefore\n{gate.BEGIN}\n{gate.text()}\n")
    assert written.endswith(f"{gate.END}\nafter\n")
    assert "| S9 | above 2x | below 2x |" in written and "a ratio" not in written
    assert not gate.write(tmp_path)


def test_reproduce_md_states_the_profiles_protocol() -> None:
    from dlrm_study.plans import profiles

    doc = (REPO / "docs" / "reproduce.md").read_text()
    assert gate.protocol() in doc, "docs/reproduce.md's protocol is stale: make render"
    assert f"Quick: {profiles.described('quick')}." in gate.protocol()
    assert f"{profiles.CLAIM_RUNS['quick']} runs of the points the CPU claims' rules read" in gate.protocol()
