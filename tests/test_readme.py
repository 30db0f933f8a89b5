"""The README's generated section matches the committed records; documents cite only files in the repository."""

import re

from tests.conftest import ROOT

from dlrm_study.report import ledger


def test_the_readme_section_regenerates_unchanged_from_the_committed_records():
    readme = (ROOT / "README.md").read_text()
    pattern = re.escape(ledger.MARK_BEGIN) + ".*?" + re.escape(ledger.MARK_END)
    committed = re.search(pattern, readme, re.DOTALL)
    assert committed, "README.md has no generated section"
    assert committed.group(0) == ledger.readme_section(ROOT / "results", "quick")


def test_documents_cite_only_files_in_the_repository():
    documents = [ROOT / "README.md", ROOT / "notebooks" / "README.md", ROOT / "results" / "README.md",
                 ROOT / "docs" / "claims.md", *sorted((ROOT / "notebooks").glob("*.ipynb"))]  # fmt: skip
    for path in documents:
        text = path.read_text()
        assert "DESIGN.md" not in text and "../shared" not in text, path.name
        for target in re.findall(r"\]\(((?!https?:)[^)#\s]+)", text):
            base = (path.parent / target) if path.suffix == ".md" else ROOT / "results" / "notebooks" / target
            assert base.exists() or (path.parent / target).exists(), f"{path.name}: {target}"


def test_the_citation_names_the_readmes_repository_url_and_an_entity_author():
    import yaml

    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["repository-code"] in (ROOT / "README.md").read_text()
    assert cff["authors"] and all(set(a) == {"name"} for a in cff["authors"])


def test_the_readmes_profile_line_is_the_profiles_own_words():
    """The quick profile's design in the README is `profiles.described("quick")`: a changed literal changes it."""
    from dlrm_study.plans import profiles

    readme = " ".join((ROOT / "README.md").read_text().split())
    assert profiles.described("quick") in readme
    assert f"up to {profiles.CLAIM_RUNS['quick']} runs of the points the CPU claims' rules read" in readme
