"""The package's folders follow the pipeline: each imports only from the folders before it in PIPELINE.

A newcomer can tell a module's room from its path: the model never sees records, whatever reads
records lives in `analysis/` or after it, and no general module reaches into a specialization by
a lazy import. Read from the source (every import statement, at module level or inside a function).
"""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "dlrm_study"
# The order data flows in (README's Layout): config -> batches -> model -> training -> records -> ... -> figures.
PIPELINE = (
    "errors", "settings", "rules", "config", "platform", "data", "model", "train", "distributed", "records", "plans",
    "perfmodel", "measure", "studies", "analysis", "claims", "report", "lending", "cli", "__main__",
)  # fmt: skip


def room(module: str) -> str:
    """`dlrm_study.model.tables.base` -> `model`."""
    return module.split(".")[1]


def module_of(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(p for p in parts if p != "__init__")


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported dlrm_study module or name) of every import in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dlrm_study"):
            if node.module == "dlrm_study":
                found += [(node.lineno, f"dlrm_study.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("dlrm_study.")]
    return found


def backward(path: Path) -> list[str]:
    """The imports of `path` that run back up the pipeline (or name a room it does not list)."""
    mine = room(module_of(path))
    wrong = []
    for line, target in imports(path):
        theirs = room(target)
        if theirs not in PIPELINE or mine not in PIPELINE or PIPELINE.index(theirs) > PIPELINE.index(mine):
            wrong.append(f"line {line}: {target}")
    return wrong


MODULES = sorted(p for p in SRC.rglob("*.py") if p != SRC / "__init__.py")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_imports_run_down_the_pipeline(path: Path) -> None:
    assert not backward(path), f"{path.relative_to(SRC)} imports from a later folder: {backward(path)}"


# Rooms a room may not import though the pipeline allows it: plans are data (what is measured, never how),
# analysis reads records by those plans, never by the code that measured them, and the claims judge what analysis
# reads, never measuring.
NARROWER = {
    "plans": {"errors", "settings", "rules", "config", "platform", "records", "plans"},
    "analysis": set(PIPELINE[: PIPELINE.index("analysis") + 1]) - {"measure", "studies"},
    "claims": set(PIPELINE[: PIPELINE.index("claims") + 1]) - {"measure", "studies"},
}


@pytest.mark.parametrize("folder", sorted(NARROWER))
def test_plans_are_data_and_analysis_reads_no_measuring_code(folder: str) -> None:
    wrong = [f"{p.relative_to(SRC)} line {line}: {target}" for p in MODULES if room(module_of(p)) == folder
             for line, target in imports(p) if room(target) not in NARROWER[folder]]  # fmt: skip
    assert not wrong, wrong


def test_every_folder_is_a_room_of_the_pipeline() -> None:
    rooms = {room(module_of(p)) for p in MODULES}
    assert rooms <= set(PIPELINE), rooms - set(PIPELINE)


def test_the_rule_is_seen_when_broken(tmp_path: Path) -> None:
    """The check itself: a model module that imports records is caught, one that imports config is not."""
    fake = SRC / "model" / "_probe_for_test.py"
    try:
        fake.write_text("from dlrm_study.config import Config\n")
        assert backward(fake) == []
        fake.write_text("def f():\n    from dlrm_study.records import store\n")
        assert backward(fake) == ["line 2: dlrm_study.records"]
    finally:
        fake.unlink(missing_ok=True)


def edges() -> dict[str, set[str]]:
    """Module -> the package modules it imports (a name that is a submodule counts as that module)."""
    known = {module_of(p) for p in MODULES} | {"dlrm_study"}
    graph: dict[str, set[str]] = {}
    for path in MODULES:
        me = module_of(path)
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dlrm_study"):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    targets.add(sub if sub in known else node.module)
        graph[me] = {t for t in targets if t in known and t != me}
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                top = stack.pop()
                group.add(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_one_that_imports_it_back() -> None:
    assert circles(edges()) == []


def test_a_circle_is_seen() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


# The lab measures and writes records; the court reads records and writes verdicts (issue 71). Below both: errors,
# settings, and `rules` (rules.toml: the rules and the designs that feed them, written before the records, which the
# lab reads for its run counts and stamps on every record, and the court judges by). Above both: what runs them in
# turn (`lending`: a GPU lending's logistics; `cli`: the command line and `make reproduce`).
LAB = ("config", "platform", "data", "model", "train", "distributed", "records", "plans", "perfmodel", "measure",
       "studies")  # fmt: skip
COURT = ("analysis", "claims", "report")
# What the court reads of the lab: the config, the records' schemas, the plans (what was measured, to find its
# records) and the performance models (the bounds a measurement is read against). Nothing that measures.
COURT_READS = {"config", "platform", "records", "plans", "perfmodel"}
# Where the court still reaches into the lab, each with its reason; a new one fails the test below.
COURT_EXCEPTIONS = {
    # the notebooks' numerics check trains three steps of two loops (`fused_matches_reference`)
    "report/checks.py": {"data", "model", "train"},
    # a notebook's footer counts what its run measured; a scratch folder's holder is a live process
    "report/session.py": {"measure", "train"},
    # the GPU records' kernel-path fallback's name (a record's value, spelt where it is written)
    "report/results_page.py": {"measure"},
}


def lab_or_court_imports(side: tuple[str, ...], paths: list[Path] = MODULES) -> dict[str, set[str]]:
    """Per module of one side, the rooms it imports (`file -> {room}`)."""
    found: dict[str, set[str]] = {}
    for path in paths:
        if room(module_of(path)) in side:
            found[str(path.relative_to(SRC))] = {room(target) for _, target in imports(path)}
    return found


def court_reached(paths: list[Path] = MODULES) -> dict[str, set[str]]:
    """The lab's modules that import the court or what runs it, with the rooms they reach."""
    found = {f: rooms & {*COURT, "lending", "cli"} for f, rooms in lab_or_court_imports(LAB, paths).items()}
    return {f: rooms for f, rooms in found.items() if rooms}


def test_the_lab_never_imports_the_court() -> None:
    assert court_reached() == {}


def test_a_lab_module_reaching_the_court_is_seen() -> None:
    fake = SRC / "records" / "_probe_for_test.py"
    try:
        fake.write_text("def f():\n    from dlrm_study.report import reading\n")
        assert court_reached([fake]) == {"records/_probe_for_test.py": {"report"}}
    finally:
        fake.unlink(missing_ok=True)


def test_the_court_reads_of_the_lab_only_its_records_and_plans() -> None:
    lab = set(LAB) - COURT_READS
    wrong = {f: (rooms & lab) - COURT_EXCEPTIONS.get(f, set()) for f, rooms in lab_or_court_imports(COURT).items()}
    assert not {f: r for f, r in wrong.items() if r}, wrong
    stale = {f: r for f, r in COURT_EXCEPTIONS.items() if not r <= lab_or_court_imports(COURT).get(f, set())}
    assert not stale, f"exceptions no longer needed (remove them): {stale}"


def test_every_room_is_on_one_side_or_runs_both() -> None:
    assert set(PIPELINE) == {*LAB, *COURT, "errors", "settings", "rules", "lending", "cli", "__main__"}
