"""docs/results.md: its numbers are the ledger's, its cells short, its text free of internal names, and the
headline quantities it prints agree with every other place that prints them."""

import dataclasses
import functools
import re

import nbformat
import pandas as pd
import pytest
from tests.conftest import ROOT

from dlrm_study.analysis.clusters import MIN_RUNS
from dlrm_study.analysis.evidence import Evidence
from dlrm_study.analysis.wording import Share, amount
from dlrm_study.report import ledger, readable, reading, results_page

RESULTS = ROOT / "results"


@functools.cache
def found() -> dict:
    return results_page.judged(evidence())


@functools.cache
def evidence() -> Evidence:
    return reading.evidence(RESULTS, "quick")  # judged once for every test here


def test_s2_and_s3_print_their_numbers_through_the_one_formatter():
    """The verdict's text, its ledger cell and the page print a judged number alike (`wording.amount`), S2's as a
    share of repeats (`Share`), S3's as a ratio of pairs."""
    table = reading.verdicts_of(evidence())
    printed = 0
    for claim, unit in (("S2", "%"), ("S3", "x")):
        for machine, v in table[claim].items():
            for r in (r for r in v.numbers.values() if r.n):
                said = amount(r)
                assert isinstance(r, Share) == (claim == "S2") and unit + " [" in said, (claim, machine, said)
                assert said in v.detail, (claim, machine, said)
                printed += 1
    assert printed, "the committed records give S2 and S3 no number: the test has nothing to check"


@functools.cache
def page() -> str:
    return results_page.page(RESULTS, "quick")


def test_every_number_on_the_page_is_the_ledgers():
    cells, checked = ledger.ledger(evidence()), 0
    for claim, by_machine in found().items():
        for machine, j in by_machine.items():
            for _, figure in [] if j.old_loop else j.figures:
                assert figure in j.cell, (claim, machine, figure)
                assert figure in cells, (claim, machine, figure)
                assert figure in page(), (claim, machine, figure)
                checked += 1
    assert checked, "no verdict printed a number: the test has nothing to check"


def test_the_page_shows_a_number_wherever_the_verdict_decided_one():
    decided = [j for by in found().values() for j in by.values() if j.word in results_page.DECIDED]
    if not decided:  # the records committed so far measured 2 runs per study: short of every verdict
        pytest.skip(
            f"the committed records decide no claim anywhere (a verdict needs {MIN_RUNS} runs): nothing to check"
        )
    assert all(j.figures for j in decided)


def test_cells_are_short():
    cells = [j.cell for by in found().values() for j in by.values()]
    assert cells and not [c for c in cells if readable.too_long(c)]
    assert readable.too_long("x" * (readable.MAX_CELL + 1)) and not readable.too_long("**" + "x" * readable.MAX_CELL)


@pytest.mark.parametrize(
    "text, names",
    [
        ("gpu-hbm samples/s", ["gpu-hbm"]),
        ("the cpu-loops-quick study", ["cpu-loops-quick"]),
        ("embedding_backward_update takes 54%", ["embedding_backward_update"]),
        ("must exceed needed(host) = host + 0.5", ["needed(host)"]),
        ("optimized-bf16 over the reference", ["optimized-bf16"]),
        ("dlrm-benchmark and mlperf-scaled, 1.67x [1.36, 2.05] at 2 thread(s)", []),
        ("[04](results/notebooks/04_model_shape_sensitivity.ipynb), `make render`", []),
    ],
)
def test_identifiers_finds_internal_names_only(text, names):
    assert readable.identifiers(text) == names


def test_the_page_and_first_screen_name_nothing_internal():
    assert readable.identifiers(page()) == []
    assert readable.identifiers(results_page.first_screen(RESULTS, "quick")) == []


def rendered_texts() -> dict[str, str]:
    """What a reader reads: the README's generated parts and each rendered notebook's Markdown and printed text."""
    readme = (ROOT / "README.md").read_text()
    begin, end = readme.find(ledger.MARK_BEGIN), readme.find(ledger.MARK_END)
    texts = {"README.md": readme[begin:end], "docs/results.md": page()}
    for path in sorted((RESULTS / "notebooks").glob("*.ipynb")):
        parts = []
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "markdown":
                parts.append(cell.source)
            for output in cell.get("outputs", []):
                parts.append(output.get("text", "") + str(output.get("data", {}).get("text/markdown", "")))
        texts[path.name] = "\n".join(parts)
    return texts


def ledger_cells() -> list[str]:
    """Every machine's cell of every claim row of the ledger, as the README and notebook 00 print it."""
    table = ledger.ledger(evidence())
    rows = [line for line in table.splitlines() if re.match(r"\| [HS]\d \|", line)]
    return [cell.strip() for row in rows for cell in row.split(" | ")[2:-1]]


def test_every_ledger_cell_is_at_most_max_cell_characters():
    cells = ledger_cells()
    assert len(cells) >= 8, "the ledger has no claim rows to check"
    assert not [c for c in cells if readable.too_long(c)]


def test_no_internal_name_in_what_the_render_writes():
    """What `make render` writes from the records: the README's generated section, docs/results.md and the
    README's first screen (generated here, so the check does not wait for the next render)."""
    texts = {
        "README section": ledger.readme_section(RESULTS, "quick"),
        "docs/results.md": page(),
        "first screen": results_page.first_screen(RESULTS, "quick"),
    }
    named = {name: readable.identifiers(text) for name, text in texts.items()}
    assert not {name: ids for name, ids in named.items() if ids}


def test_no_internal_name_reaches_rendered_text():
    """The rendered notebooks print through `readable.words` / `readable.for_readers` (session.say, show_table):
    this reads results/notebooks/, so it passes once `make render` has re-rendered them with that code."""
    named = {name: readable.identifiers(text) for name, text in rendered_texts().items()}
    assert not {name: ids for name, ids in named.items() if ids}


TALLY = re.compile(r"(\d+) of (\d+) inside the model's ranges; (\d+) of \d+ inside one constant range")
PAGE_TALLY = re.compile(r"\((\d+) points, samples/s\), (\d+) fell inside the model's predicted range and (\d+) inside")


def test_the_prediction_tally_is_one_number_everywhere():
    assert PAGE_TALLY.search(page()), "docs/results.md prints no prediction tally"
    said = set()
    for text in rendered_texts().values():
        said |= {(int(m[1]), int(m[0]), int(m[2])) for m in TALLY.findall(text)}
        said |= {(int(m[0]), int(m[1]), int(m[2])) for m in PAGE_TALLY.findall(text)}
    assert len(said) == 1, f"the prediction tally (points, model inside, naive inside) printed as {sorted(said)}"


def test_the_committed_page_and_first_screen_are_what_the_records_give():
    assert results_page.problems(ROOT) == []


PROTOCOL = "a 95% t-interval (on the log scale)"  # a phrase of the measurement protocol's paragraph


def test_the_protocol_is_said_once_and_the_other_notebooks_link_to_it():
    from dlrm_study.report import protocol

    sources = {p.name: p.read_text() for p in sorted((ROOT / "notebooks").glob("0*.ipynb"))}
    assert PROTOCOL in protocol.statement()  # generated, not typed: no notebook's source says it
    assert [name for name, text in sources.items() if PROTOCOL in text] == []
    saying = [name for name, text in sources.items() if "protocol.statement()" in text]
    assert saying == ["00_summary.ipynb"] and "## The measurement protocol" in sources[saying[0]]
    for name in ("01", "02", "03", "04", "05", "06"):
        (text,) = [t for n, t in sources.items() if n.startswith(name)]
        assert "00_summary.ipynb#The-measurement-protocol" in text, name


def test_a_machine_key_is_named_on_purpose_and_its_words_tell_machines_apart():
    keys = ["amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu", "amd-epyc-f26m2s1/avx512f+avx512_bf16/2cpu",
            "intel-xeon/avx512f+avx512_bf16+amx_bf16/16cpu/nvidia-h200"]  # fmt: skip
    assert readable.identifiers(" ".join(keys)) == []
    words = [readable.machine_words(k) for k in keys]
    assert len(set(words)) == len(keys) and readable.identifiers(" ".join(words)) == []
    assert words[2] == "Intel Xeon, 16 CPUs, bf16 with AMX, NVIDIA H200"


def test_reproduce_gives_a_tolerance_for_every_claim():
    from dlrm_study.claims.registry import BY_ID as CLAIMS

    text = (ROOT / "docs" / "reproduce.md").read_text()
    section = text[text.index("## Tolerance per claim") :]
    rows = {cell.strip() for line in section.splitlines() if line.startswith("| ") for cell in [line.split("|")[1]]}
    named = {claim for row in rows for claim in CLAIMS if claim in row.replace(" ", "").split(",")}
    assert named == set(CLAIMS)


def test_each_number_on_the_page_is_printed_alike_in_the_readme_and_notebook_00():
    texts = rendered_texts()
    figures = [f for by in found().values() for j in by.values() if not j.old_loop for _, f in j.figures]
    assert figures
    for figure in figures:
        for name in ("README.md", "00_summary.ipynb"):
            assert figure in texts[name], f"{name} does not print {figure} as docs/results.md does"


def test_the_readme_section_and_the_page_name_the_code_commit_the_records_digest_and_the_rules_hash():
    from dlrm_study.records import provenance
    from dlrm_study.report import manifest

    named = (manifest.code_commit(ROOT), manifest.records_digest(RESULTS), provenance.rules_hash())
    assert named[0] != "unknown" and all(named)
    section = ledger.readme_section(RESULTS, "quick")
    assert all(f"`{thing}`" in section for thing in named)
    assert all(f"`{thing}`" in page() for thing in named)


def test_the_gpu_half_reads_each_target_from_its_own_study_and_says_which_kernels_ran():
    frame = pd.DataFrame({
        "study": ["gpu-targets", "gpu-placements", "gpu-placements"], "loop": ["gpu"] * 3,
        "config_name": ["mlperf-scaled"] * 3, "batch_size": [2048] * 3, "variant": ["gpu-hbm", "gpu-hbm", "gpu-host"],
        "samples_per_s": [1.6e6, 1.0e6, 1.0e5], "kernel_path": ["torch", "torch", "cpp"],
        "kernel_fallback": ["triton failed (RuntimeError: PassManager::run failed); the torch twin ran", None, None],
    })  # fmt: skip
    lines = results_page.target_lines(frame)
    met = "mlperf-scaled at batch 2,048: 1,600,000 samples/s (1 repeat) against today's target 1,500,000: met"
    assert lines[0] == met
    assert lines[1].endswith("not measured") and lines[2].endswith("not measured")
    said = results_page.kernels_ran(frame)
    assert said.startswith("Their embedding kernels: C++ on the host's cores, PyTorch ops. In 1 of 3, Triton's")
    assert readable.identifiers(said) == []


def test_why_speaks_of_the_captured_loop_once_a_gpu_host_ran_it():
    old_host, new_host = "intel-xeon/avx512f/16cpu/nvidia-h200", "intel-xeon-f6m207s2/avx512f/16cpu/nvidia-h200"
    old = results_page.Judged("one run", [], "old reason", True, "")
    new = results_page.Judged("one run", [], "new reason", False, "")
    cpu = results_page.Judged("not measurable here", [], "no GPU", False, "")
    assert results_page.why("H4", {"amd-epyc/avx2/2cpu": cpu, old_host: old}).startswith("Only the old")
    said = results_page.why("H4", {"amd-epyc/avx2/2cpu": cpu, old_host: old, new_host: new})
    assert said == "No machine could decide it: not measurable here (no GPU); one run (new reason)."


def test_the_papers_words_stand_beside_the_studys_own_readings(tmp_path):
    """Each claim's words and source come from docs/claims.md's claims table; a claim whose source is the study's
    hypothesis says so on the first screen and in the table, the others do not."""
    words = results_page.claim_words()
    assert sorted(words) == ["H1", "H2", "H3", "H4", "S1", "S2", "S3", "S4"]
    assert words["S2"][0].startswith("In the reference CPU implementation") and words["S2"][1] == "SC20, hypothesis"
    assert [c for c in words if results_page.hypothesis(c)] == ["H2", "H3", "H4", "S2"]
    moved = tmp_path / "claims.md"
    moved.write_text("# Claims\n\nno table here\n")
    assert results_page.claim_words(moved) == {}
    word = results_page.Judged("not reproduced", [], "", False, "")
    found = {"S2": {"m": word}, "S3": {"m": dataclasses.replace(word, word="reproduced")}}
    line = results_page.paper_paragraph("SC20", ("S2", "S3"), found)
    assert "Of its 1 claim (S3), 1 could be judged: S3 reproduced on 1 machine" in line
    assert "of the study's 1 hypothesis read from it (S2), 1 could be judged: S2 not reproduced on 1 machine" in line
    said = {"S3": {"m": dataclasses.replace(word, word="reproduced", qualifier="exceeded 1.8x at a")}}
    assert "S3 reproduced (exceeded 1.8x at a) on 1 machine" in results_page.paper_paragraph("SC20", ("S3",), said)
