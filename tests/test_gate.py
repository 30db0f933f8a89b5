"""docs/reproduce.md states the verdict gate the code applies: its paragraph is generated from the rules."""

from pathlib import Path

from dlrm_study.report import gate

REPO = Path(__file__).resolve().parents[1]


def test_reproduce_md_states_the_gate_the_rules_declare() -> None:
    doc = (REPO / "docs" / "reproduce.md").read_text()
    assert f"{gate.BEGIN}\n{gate.text()}\n{gate.END}" in doc, "docs/reproduce.md's verdict gate is stale: make render"


def test_the_gate_reads_the_declared_runs(monkeypatch) -> None:
    assert "at least 3 runs of each deciding comparison" in gate.text()
    monkeypatch.setattr(gate, "MIN_RUNS", 4)
    assert "at least 4 runs of each deciding comparison" in gate.text()


def test_a_stale_paragraph_is_rewritten(tmp_path: Path) -> None:
    doc = tmp_path / "docs" / "reproduce.md"
    doc.parent.mkdir()
    doc.write_text(f"before\n{gate.BEGIN}\nat least 5 pairs\n{gate.END}\nafter\n")
    assert gate.write(tmp_path)
    assert doc.read_text() == f"before\n{gate.BEGIN}\n{gate.text()}\n{gate.END}\nafter\n"
    assert not gate.write(tmp_path)
