"""The protocol's statements are generated from the limits the code applies, not typed (issue 69, item 5): notebook
00 prints them (`report.protocol`), and the README and docs/claims.md carry the flags' paragraph between markers
that `make render` rewrites."""

import json
import re
from pathlib import Path

import pytest

from dlrm_study.report import protocol

REPO = Path(__file__).resolve().parents[1]
# What a typed protocol line would say: a limit's number beside the word it limits.
TYPED = re.compile(r"p10 to p90|p90/p10|robust standard deviations|\d+% (off|away from) its timed median|t-interval")


def markdown_of(notebook: Path) -> str:
    cells = json.loads(notebook.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def test_notebook_00_types_no_protocol_line_and_prints_the_generated_ones() -> None:
    notebook = REPO / "notebooks" / "00_summary.ipynb"
    assert not TYPED.search(markdown_of(notebook)), "a protocol line typed in notebook 00's markdown"
    code = notebook.read_text()
    assert "protocol.statement()" in code and "protocol.words()" in code


@pytest.mark.parametrize("doc", protocol.DOCS, ids=str)
def test_each_document_carries_the_generated_flags_paragraph_once(doc: Path) -> None:
    text = (REPO / doc).read_text()
    assert protocol.flags_paragraph() in text, f"{doc}: its flags paragraph is not today's (make render writes it)"
    outside = text.replace(protocol.flags_paragraph(), "")
    assert not re.search(r"p10 to p90|p90/p10|robust standard deviations", outside), f"{doc}: a typed copy"


def test_the_words_follow_the_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Change a limit and the text changes with it: the numbers are read, not typed."""
    before = (protocol.statement(), protocol.words(), protocol.flags_paragraph())
    assert "1.5x from p10 to p90" in before[0] and "15% off its timed median" in before[2]
    monkeypatch.setattr(protocol, "SPREAD_LIMIT", 2.0)
    monkeypatch.setattr(protocol, "PROFILE_TOLERANCE", 0.2)
    monkeypatch.setattr(protocol, "OUTLIER_Z", 4.0)
    monkeypatch.setattr(protocol, "MIN_RUNS", 4)
    monkeypatch.setattr(protocol, "CONFIDENCE", 0.9)
    statement, words, flags = protocol.statement(), protocol.words(), protocol.flags_paragraph()
    assert "2x from p10 to p90" in statement and "20% off its timed median" in flags
    assert "more than 4 robust standard deviations" in words and "a verdict word 4 runs" in statement
    assert "90% t-interval" in words and "95%" not in statement


def test_render_rewrites_a_stale_paragraph(tmp_path: Path) -> None:
    doc = tmp_path / "README.md"
    doc.write_text(f"head\n{protocol.BEGIN}\nflags above 1.2, typed\n{protocol.END}\ntail\n")
    (tmp_path / "docs").mkdir()
    assert protocol.write(tmp_path) == [Path("README.md")]  # docs/claims.md absent: nothing to rewrite
    assert doc.read_text() == f"head\n{protocol.flags_paragraph()}\ntail\n"
    assert protocol.write(tmp_path) == []  # already today's
