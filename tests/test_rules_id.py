"""The rules' id: the declared literals (src/dlrm_study/rules/rules.toml) and the golden judgements, pinned in
rules.lock; a comment keeps it, a value or a judgement moves it; docs/claims.md says every declared literal."""

import json
import shutil
from pathlib import Path

import pytest

from dlrm_study import rules
from dlrm_study.rules import literal

ROOT = Path(__file__).resolve().parents[1]
CLAIMS_DOC = ROOT / "docs" / "claims.md"


@pytest.fixture
def copies(tmp_path: Path) -> tuple[Path, Path]:
    """rules.toml and golden.json, copied to be changed."""
    toml, golden = tmp_path / "rules.toml", tmp_path / "golden.json"
    shutil.copy(rules.RULES, toml)
    shutil.copy(rules.GOLDEN, golden)
    return toml, golden


def id_of(toml: Path, golden: Path) -> str:
    rules.rules_id.cache_clear()
    return rules.rules_id(toml, golden)


def test_the_rules_id_is_the_one_the_lock_names() -> None:
    """A change of the rules' id is deliberate: rules.lock is written with it (`python -m tests.golden --write`)."""
    assert rules.rules_id() == rules.LOCK.read_text().strip(), "the rules moved: say so and write rules.lock"


def test_a_comment_or_a_layout_change_keeps_the_id(copies) -> None:
    toml, golden = copies
    before = id_of(toml, golden)
    toml.write_text("# a new comment\n" + toml.read_text().replace("margin = 0.1 ", "margin   =   0.1 "))
    assert id_of(toml, golden) == before


def test_a_changed_literal_moves_the_values_half_of_the_id(copies) -> None:
    toml, golden = copies
    before = id_of(toml, golden)
    toml.write_text(toml.read_text().replace("margin = 0.1 ", "margin = 0.15 "))
    after = id_of(toml, golden)
    assert after.split("-")[0] != before.split("-")[0] and after.split("-")[1] == before.split("-")[1]


def test_a_moved_judgement_moves_the_judgements_half_of_the_id(copies) -> None:
    toml, golden = copies
    before = id_of(toml, golden)
    judged = json.loads(golden.read_text())
    judged["s3 reproduced"]["status"] = "inconclusive"
    golden.write_text(json.dumps(judged))
    after = id_of(toml, golden)
    assert after.split("-")[0] == before.split("-")[0] and after.split("-")[1] != before.split("-")[1]


def test_without_its_files_the_id_is_empty(tmp_path: Path) -> None:
    assert id_of(tmp_path / "none.toml", rules.GOLDEN) == ""


def said() -> list[str]:
    """Each declared literal as docs/claims.md says it."""
    runs, confidence = literal("intervals", "min_runs"), literal("intervals", "confidence")
    h1, knobs, grid = literal("H1", "factor"), literal("H1", "knobs"), literal("H2_H3", "margin")
    s1, s2 = literal("S1", "factor"), literal("S2", "share")
    s3, margin = literal("S3", "factor"), literal("S3", "margin")
    gain, share, auc = literal("S3_accuracy", "gain_margin"), literal("S3_accuracy", "learned_share"), literal(
        "S3_accuracy", "min_auc")  # fmt: skip
    presets = ", ".join(f"`{p}`" for p in literal("S2", "presets"))
    return [
        f"`MIN_RUNS` in `analysis/clusters.py`: {runs}",
        f"1 - {1 - confidence:.2f}/{len(knobs)}",
        f"beyond {h1}x either way (above {h1} or below 1/{h1})",
        f"equivalence margin {grid}x",
        f"lies below 1/{grid} ({1 / grid:.2f})",
        f'against {literal("H4", "recovery"):.0%} ("most")',
        f"on `{literal('S1', 'preset')}`, at a full socket's {literal('S1', 'cores')} cores",
        f"the interval lies above {s1:g}x",
        f"at each timed preset of the CPU study ({presets})",
        f"every preset's interval lies above {s2:.0%}",
        " and ".join(f"`{p}`" for p in literal("S3", "presets")),
        f"against {s3}x less a {margin:.0%} margin ({s3 * (1 - margin):.2f}x)",
        f'"{literal("S3", "exceeded")} {s3}x" where a preset\'s whole interval lies above {s3}x',
        f'"{literal("S3", "reached")} {s3 * (1 - margin):.2f}x, not {s3}x" where it lies above the margin only',
        f"over >= {literal('S3_accuracy', 'min_seeds')} seeds",
        f"**Same accuracy** when every preset's interval lies at or above {gain}",
        f"below {auc:.2f} or below {share:.0%} of the attainable gain",
        f"that rate divided by {literal('S3_accuracy', 'small_steps')}",
        f"for {['', 'once', 'twice'][literal('S3_accuracy', 'small_steps_length')]} the steps",
        f"below {literal('S3_accuracy', 'small_learned_share'):.0%} of the attainable gain)",
    ]


@pytest.mark.parametrize("words", said())
def test_docs_claims_says_each_declared_literal(words: str) -> None:
    text = " ".join(CLAIMS_DOC.read_text().split())
    assert words in text, f"docs/claims.md does not say {words!r}: rules.toml and the page disagree"


def test_s2s_presets_are_the_cpu_studys_timed_presets_and_h1s_knobs_are_swept() -> None:
    from dlrm_study.plans.cpu import CPU_PRESETS
    from dlrm_study.plans.sensitivity import KNOBS

    assert tuple(literal("S2", "presets")) == tuple(CPU_PRESETS)
    assert set(literal("H1", "knobs")) <= set(KNOBS)
