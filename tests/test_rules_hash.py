"""The rules hash covers the deciding code by its import graph, not by a hand list."""

from pathlib import Path

from dlrm_study.records import provenance

RULES = "# claims\n<!-- rules: begin -->\nH1: a rule\n<!-- rules: end -->\n"


def package(tmp_path: Path) -> tuple[Path, Path]:
    """A package `dlrm_study` whose claims import a rule module, beside a module nothing imports yet."""
    pkg = tmp_path / "dlrm_study"
    (pkg / "analysis").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "analysis" / "__init__.py").write_text("")
    (pkg / "analysis" / "claims.py").write_text("from dlrm_study.analysis import rules\n")
    (pkg / "analysis" / "rules.py").write_text("MARGIN = 0.1\n")
    (pkg / "thresholds.py").write_text("SPREAD = 1.5\n")
    docs = tmp_path / "claims.md"
    docs.write_text(RULES)
    return pkg, docs


def digest(pkg: Path, docs: Path) -> str:
    provenance.rules_hash.cache_clear()
    return provenance.rules_hash(docs, pkg, ("analysis/claims.py",))


def test_an_added_import_changes_the_hash(tmp_path: Path) -> None:
    pkg, docs = package(tmp_path)
    before = digest(pkg, docs)
    (pkg / "thresholds.py").write_text("SPREAD = 2.0\n")
    assert digest(pkg, docs) == before  # not imported: not deciding code
    (pkg / "analysis" / "rules.py").write_text("import dlrm_study.thresholds\nMARGIN = 0.1\n")
    with_import = digest(pkg, docs)
    assert with_import != before
    (pkg / "thresholds.py").write_text("SPREAD = 2.5\n")  # now reached through the graph
    assert digest(pkg, docs) != with_import


def test_a_changed_rule_module_or_rules_block_changes_the_hash(tmp_path: Path) -> None:
    pkg, docs = package(tmp_path)
    before = digest(pkg, docs)
    (pkg / "analysis" / "rules.py").write_text("MARGIN = 0.15\n")
    after = digest(pkg, docs)
    assert after != before
    docs.write_text(RULES.replace("a rule", "another rule"))
    assert digest(pkg, docs) != after


def test_the_deciding_code_reaches_what_the_audit_found_missing() -> None:
    """The modules the first hand list left out are in the graph of the claims."""
    names = {str(p.relative_to(provenance.PACKAGE)) for p in provenance.deciding_code()}
    expected = {"analysis/evidence.py", "analysis/sensitivity.py", "analysis/cpu.py", "analysis/convergence.py",
                "analysis/placement.py", "analysis/baseline.py", "analysis/scaling.py", "records/machine.py",
                "measure/selfcheck.py", "studies/cpu.py", "studies/sensitivity.py", "analysis/current.py"}  # fmt: skip
    assert expected <= names
