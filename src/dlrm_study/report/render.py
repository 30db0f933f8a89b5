"""One render of the whole study, and the check that the committed render is what the code renders.

`publish` is `make render` (records reused, nothing measured) and `make reproduce` (a short training
run, then every run of every study measured in a process of its own, `studies.runs`, then the render from
the records): every claim judged once into results/verdicts.json (`report.verdicts`, what every page
reads), then every notebook executed into results/notebooks/, the summary last, its scaffolding hidden;
every figure under results/figures/ written anew (old ones removed first, so a figure no code writes any
more is gone); the README's generated section; the manifest. Measuring, only what this machine has no
record of at this code (its loop's fingerprint, `records.code_identity`) is measured, and one line says
how many records that added (or that none were needed).

`check` is tests/test_render.py's and `make check-render`'s: the committed verdicts.json judged again
from the records (`verdicts.problems`); each notebook executed again with the records reused into a
scratch folder, then compared with the committed copy cell by cell (by cell id): each Markdown cell's
text, each code cell's code and what it printed (text and Markdown), every number and verdict word, but
not pixels, stderr, nor the output of cells tagged `provenance` (commit, time and the renderer's machine
differ by design). Every notebook of notebooks/ and every one under results/notebooks/ must be rendered
now and compared: a notebook the render skipped is a difference.
"""

import argparse
import re
import sys
import tempfile
from pathlib import Path

import nbformat

from dlrm_study.plans.profiles import REPO
from dlrm_study.records import provenance
from dlrm_study.report import gate, ledger, manifest, protocol, results_page, run_times, verdicts
from dlrm_study.report.scaffolding import hide

PROVENANCE = "provenance"  # a cell that says where and when it ran
TEXT = ("text/plain", "text/markdown")  # of a displayed value, the richer one is compared


def notebooks(repo: Path = REPO) -> list[Path]:
    """The study's notebooks in render order: 00, the summary, last (it reads what the others measured)."""
    found = sorted((repo / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    return [p for p in found if not p.name.startswith("00")] + [p for p in found if p.name.startswith("00")]


def execute(folder: Path, profile: str, publish: bool, repo: Path = REPO) -> list[Path]:
    """Each notebook executed by papermill into `folder` from the records, its scaffolding hidden."""
    import papermill

    folder.mkdir(parents=True, exist_ok=True)
    done = []
    for source in notebooks(repo):
        target = folder / source.name
        print(f"render: {source.name}", file=sys.stderr, flush=True)
        wanted = {"profile": profile, "measure": False, "publish": publish}
        known = papermill.inspect_notebook(str(source))  # 00 measures nothing: it has no `measure`
        papermill.execute_notebook(
            str(source),
            str(target),
            parameters={k: v for k, v in wanted.items() if k in known},
            kernel_name="python3",
            progress_bar=False,
            cwd=str(source.parent),
            execution_timeout=1800,
        )
        nbformat.write(steady(hide(nbformat.read(target, as_version=4)), repo), target)
        done.append(target)
    return done


INJECTED = "injected-parameters"  # papermill's tag on the cell it adds, and the id that cell is given here


def steady(book: nbformat.NotebookNode, repo: Path = REPO) -> nbformat.NotebookNode:
    """What papermill writes that depends on the run, not on the tree and its records, made steady: the
    cell it injects gets a fixed id (papermill draws a random one), and the notebook's paths are given
    from the repository (papermill stores absolute ones: the rendering machine's folders). So two renders
    of the same records are the same notebook, and `check` compares them cell by cell."""
    for cell in book.cells:
        if INJECTED in cell.metadata.get("tags", []):
            cell["id"] = INJECTED
    run = book.metadata.get("papermill", {})
    for key in ("input_path", "output_path"):
        if key in run:
            path = Path(run[key])
            run[key] = str(path.relative_to(repo)) if path.is_relative_to(repo) else path.name
    return book


def publish(profile: str, repo: Path = REPO) -> None:
    """The published study rendered anew from the records in results/ (`cli.reproduce` measures first)."""
    results = repo / "results"
    commit = provenance.git_commit()  # before the render writes docs/results.md, which git counts as a change
    for old in [*results.glob("figures/*.png"), *results.glob("figures/*.svg")]:
        old.unlink()
    print(f"judging every claim on every machine once: {verdicts.FILE}", file=sys.stderr, flush=True)
    print(f"wrote {verdicts.write(results, profile).relative_to(repo)}", file=sys.stderr)  # what every page reads
    execute(results / "notebooks", profile, publish=True, repo=repo)
    changed = ledger.write_readme(repo / "README.md", results, profile)
    print(f"README.md: generated section {'rewritten' if changed else 'unchanged'}", file=sys.stderr)
    for path in results_page.write(repo, profile):
        print(f"wrote {path.relative_to(repo)}", file=sys.stderr)
    changed = run_times.write(repo)
    print(f"docs/reproduce.md: run times {'rewritten' if changed else 'unchanged'}", file=sys.stderr)
    changed = gate.write(repo)
    print(f"docs/reproduce.md: verdict gate {'rewritten' if changed else 'unchanged'}", file=sys.stderr)
    for path in protocol.write(repo):
        print(f"{path}: the flags' paragraph rewritten from the code's limits", file=sys.stderr)
    print(f"wrote {manifest.write(results, commit)}", file=sys.stderr)


def printed(book: nbformat.NotebookNode) -> dict[str, str]:
    """Each code cell's printed text (stdout, and displayed text or Markdown), by cell id."""
    said = {}
    for cell in book.cells:
        if cell.cell_type != "code" or PROVENANCE in cell.metadata.get("tags", []):
            continue
        parts = []
        for output in cell.get("outputs", []):
            if output.output_type == "stream" and output.name == "stdout":
                parts.append(output.text)
            elif output.output_type in ("display_data", "execute_result"):
                data = output.get("data", {})
                parts.append(next((str(data[kind]) for kind in reversed(TEXT) if kind in data), ""))
            elif output.output_type == "error":
                parts.append(f"{output.ename}: {output.evalue}")
        said[cell.get("id", "")] = "".join(parts)
    return said


def said(book: nbformat.NotebookNode) -> dict[tuple[str, str], str]:
    """Everything a notebook says, by (cell id, part): each Markdown cell's text, each code cell's code (but
    papermill's parameters: `publish` is the render's, not the check's), and what each code cell printed
    (`printed`; none of a `provenance` cell)."""
    shown = printed(book)
    found = {}
    for cell in book.cells:
        cid = cell.get("id", "")
        if INJECTED not in cell.metadata.get("tags", []):
            found[(cid, cell.cell_type)] = cell.source
        if cid in shown:
            found[(cid, "output")] = shown[cid]
    return found


# What a broken output prints: a missing number (nan, None) or an interval with nothing in it.
BROKEN = re.compile(r"\b(?:nan|NaN|None)\b|\[\s*,|,\s*\]|\[\s*\]")


def broken(text: str) -> list[str]:
    """Each place in `text` where a number is missing or an interval empty, with a little of its context."""
    return [text[max(0, m.start() - 40) : m.end() + 20].replace("\n", " ") for m in BROKEN.finditer(text)]


def published(repo: Path = REPO) -> list[tuple[str, str]]:
    """What is published, as (where, text): the README, docs/*.md, and each rendered notebook's Markdown and
    printed outputs in cell order."""
    pages = [
        (str(path.relative_to(repo)), path.read_text())
        for path in [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]
    ]
    for path in sorted((repo / "results" / "notebooks").glob("*.ipynb")):
        book = nbformat.read(path, as_version=4)
        outputs = printed(book)
        texts = [c.source if c.cell_type == "markdown" else outputs.get(c.get("id", ""), "") for c in book.cells]
        pages.append((path.name, "\n\n".join(texts)))  # a cell starts a paragraph
    return pages


def broken_outputs(repo: Path = REPO) -> list[str]:
    """Every broken place in what is published (`published`; prose avoids the bare words too, so that a printed
    None is never taken for one)."""
    return [f"{where}: {place}" for where, text in published(repo) for place in broken(text)]


def differences(committed: nbformat.NotebookNode, fresh: nbformat.NotebookNode, name: str = "") -> list[str]:
    """Where two renders of a notebook say different things: a line per cell part, at its first differing line."""
    old, new = said(committed), said(fresh)
    found = [
        f"{name}: cell {cid} ({part}) is rendered now but not in the committed copy"
        for cid, part in sorted(new.keys() - old)
    ]
    found += [
        f"{name}: cell {cid} ({part}) is in the committed copy but not rendered now"
        for cid, part in sorted(old.keys() - new)
    ]
    for cid, part in sorted(old.keys() & new.keys()):
        if old[cid, part] != new[cid, part]:
            a, b = old[cid, part].splitlines(), new[cid, part].splitlines()
            at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
            was, now = (a[at] if at < len(a) else "(nothing)"), (b[at] if at < len(b) else "(nothing)")
            found.append(f"{name}: cell {cid} ({part}), line {at + 1}: committed {was!r}, rendered now {now!r}")
    return found


def notebook_problems(committed: Path, fresh: list[Path], repo: Path = REPO) -> list[str]:
    """Every difference between the committed notebooks (the folder `committed`) and a fresh render of them
    (`fresh`); every notebook of notebooks/ and of `committed` must be among the fresh ones, or the check
    would pass a render that skipped it."""
    rendered = {path.name: path for path in fresh}
    wanted = {p.name for p in (repo / "notebooks").glob("[0-9][0-9]_*.ipynb")} | {
        p.name for p in committed.glob("*.ipynb")
    }
    found = [f"{name}: not rendered now (the render skipped it)" for name in sorted(wanted - rendered.keys())]
    for name in sorted(rendered):
        if not (committed / name).exists():
            found.append(f"{name}: not under {committed.name}/ (run make render)")
            continue
        old, new = nbformat.read(committed / name, as_version=4), nbformat.read(rendered[name], as_version=4)
        found += differences(old, new, name)
    return found


def readme_problems(readme: str, results: Path, profile: str = "quick", fresh: str | None = None) -> list[str]:
    """Where the README's generated section is not what the records give (`fresh`, computed from them when
    not given), at its first differing line."""
    fresh = ledger.readme_section(results, profile) if fresh is None else fresh
    if fresh in readme:
        return []
    begin, end = readme.find(ledger.MARK_BEGIN), readme.find(ledger.MARK_END)
    if begin < 0 or end < 0:
        return ["README.md: no generated section (its two marker comments)"]
    old, new = readme[begin : end + len(ledger.MARK_END)].splitlines(), fresh.splitlines()
    at = next((i for i, (x, y) in enumerate(zip(old, new, strict=False)) if x != y), min(len(old), len(new)))
    was = old[at][:160] if at < len(old) else "(nothing)"
    return [f"README.md: generated section line {at + 1} reads {was!r}, the records give another (run make render)"]


def check(profile: str = "quick", repo: Path = REPO, folder: Path | None = None) -> list[str]:
    """Every difference between the committed render (its notebooks, README's generated section and
    manifest) and what the working tree renders from the same records."""
    found = [f"results/manifest.json: {p}" for p in manifest.problems(repo / "results", repo)]
    found += readme_problems((repo / "README.md").read_text(), repo / "results", profile)
    found += results_page.problems(repo, profile)
    found += [f"results/{p}" for p in verdicts.problems(repo / "results", profile)]
    found += [f"broken output: {where}" for where in broken_outputs(repo)]
    with tempfile.TemporaryDirectory() as scratch:
        fresh = execute(folder or Path(scratch), profile, publish=False, repo=repo)
        found += notebook_problems(repo / "results" / "notebooks", fresh, repo)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m dlrm_study.report.render", description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default="quick", help="smoke | quick | full (default quick)")
    parser.add_argument("--check", action="store_true", help="compare a fresh render with the committed one")
    args = parser.parse_args()
    if not args.check:
        publish(args.profile)
        return
    problems = check(args.profile)
    print("\n".join(problems) or "the committed render is what the code renders from these records")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
