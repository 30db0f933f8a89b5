"""A record's code is its loop's: the files that loop executes, less comments and docstrings, with the protocol's
number (`records.code_identity`). A docstring changes nothing, a kernel only the loops that run it, a protocol
every loop; every file a loop's tiny run executes is in its fingerprint; a change to the procedure must choose
between a new protocol and a declared refactor."""

import json
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from dlrm_study.records import code_identity as ci
from dlrm_study.records import columns as col

TESTS = Path(__file__).parent


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path.name} no longer holds {old!r}: pick another edit"
    path.write_text(text.replace(old, new, 1))
    ci.fingerprint_here.cache_clear()


def changed(before: dict[str, str]) -> set[str]:
    return {loop for loop, fp in ci.loop_fingerprints().items() if fp != before[loop]}


def test_a_docstring_a_comment_or_a_blank_line_changes_no_fingerprint(package):
    before = ci.loop_fingerprints()
    edit(package / "model/dlrm.py", '"""', '"""Reworded. ')
    edit(package / "model/interaction.py", "\n\n", "\n\n# a comment, then a blank line\n\n")
    edit(package / "model/kernels/fused_cpu.cpp", "\n", "\n// a comment\n/* and a block\n   comment */\n")
    assert changed(before) == set()
    edit(package / "model/dlrm.py", "import torch", "import torch\nimport math")  # code: every loop builds it
    assert changed(before) == set(ci.LOOPS)


def test_a_kernel_changes_only_the_loops_that_run_it(package):
    before = ci.loop_fingerprints()
    edit(package / "model/kernels/fused_cpu.cpp", "#include", "static const int edited = 1;\n#include")
    assert changed(before) == {"optimized", "gpu"}  # the gpu loop's host placement runs the fused CPU kernels
    before = ci.loop_fingerprints()
    edit(package / "model/kernels/triton_ops.py", "import torch", "import torch\nimport math")
    assert changed(before) == {"gpu"}
    before = ci.loop_fingerprints()
    edit(package / "model/tables/reference.py", "import torch", "import torch\nimport math")
    assert changed(before) == {"reference"}
    before = ci.loop_fingerprints()
    edit(package / "config/schema.py", "import enum", "import enum\nimport math")  # what every loop is given
    assert changed(before) == set(ci.LOOPS)


def test_the_procedure_is_its_protocols_number_and_a_protocol_changes_every_loop(package):
    before = ci.loop_fingerprints()
    edit(package / "measure/timing.py", "import torch", "import torch\nimport math")
    assert changed(before) == set()  # measure/ is the protocol's: its number, not its text (from protocol 2)
    for loop in ci.LOOPS:
        assert ci.fingerprint(loop, col.PROTOCOL_VERSION + 1) != before[loop]
        assert ci.fingerprint(loop, 1) != ci.fingerprint(loop, 1, listing=lambda f: [])  # protocol 1 hashes measure/


def test_a_change_to_the_procedure_says_whether_it_is_a_new_protocol():
    digest = ci.procedure_digest()
    assert digest in ci.PROCEDURE_LOCK[col.PROTOCOL_VERSION], (
        f"measure/ changed (digest {digest}). If records measured before would be measured differently now, raise "
        f"columns.PROTOCOL_VERSION and lock the new number to {digest!r}; if it measures alike (a refactor), add "
        f"{digest!r} to PROCEDURE_LOCK[{col.PROTOCOL_VERSION}] in records/code_identity.py."
    )


@pytest.fixture(scope="module")
def traced() -> dict[str, dict[str, list[str]]]:
    """Each loop's tiny run, traced in one fresh process (tests/loop_trace.py)."""
    done = subprocess.run([sys.executable, str(TESTS / "loop_trace.py"), *ci.LOOPS], capture_output=True, text=True,
                          timeout=900, check=True)  # fmt: skip
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("loop", ci.LOOPS)
def test_every_file_a_loops_tiny_run_executes_is_in_its_fingerprint(loop, traced):
    ran = traced[loop]
    hashed = set(ci.files_of(loop))
    steps = {f for f in ran if f.split("/")[0] in ("model", "train", "distributed", "config", "data")}
    assert len(steps) >= 8, f"the trace saw too little to judge: {sorted(ran)}"
    assert steps <= hashed, f"{loop} runs files its fingerprint does not read: {sorted(steps - hashed)}"
    if "load" in ran.get("model/kernels/__init__.py", []):
        assert ci.KERNEL in hashed  # the kernels it builds and loads


def test_python_source_is_read_without_comments_or_docstrings_and_strings_kept():
    code = 'def f():\n    """Doc ≥ µ\n    ends ≥ here."""  # note\n    return "# not a comment"  # comment\n'
    assert ci.stripped("a.py", code) == 'def f():\n    return "# not a comment"'
    assert ci.stripped("a.py", "x = 1\n\n\n# c\ny = 2   \n") == "x = 1\ny = 2"
    assert ci.stripped("a.py", "x = (\n") == "x = ("  # does not parse: kept as it is


def test_c_source_is_read_without_comments_and_strings_kept():
    code = 'int a = 1; // c\n/* block\n more */ const char* s = "// kept /* too */";\nchar q = \'"\';\n'
    assert ci.stripped("k.cpp", code) == 'int a = 1;\n  const char* s = "// kept /* too */";\nchar q = \'"\';'


def test_a_records_loop_names_its_fingerprint():
    assert ci.loop_of("optimized") == "optimized" and ci.loop_of("") == ci.ANY and ci.loop_of(float("nan")) == ci.ANY
    assert ci.loop_of("reference-2020") == ci.ANY
    with pytest.raises(ValueError, match="unknown loop"):
        ci.files_of("nope")
    assert set(ci.files_of(ci.ANY)) == {f for loop in ci.LOOPS for f in ci.files_of(loop)}


@pytest.mark.parametrize("loop", ci.LOOPS)
def test_each_loops_code_today_is_in_its_lock(loop):
    assert ci.lock_problem(loop) is None, ci.lock_problem(loop)


def test_a_free_function_may_be_declared_alike_and_nothing_else_may(package):
    """FREE code (a loader's switch reads, its build wait) keeps the step digest; a loader's other code, its
    constants, a kernel, a model or distributed file and the protocol change it (no declaration can hold)."""
    before = ci.loop_fingerprints()
    steps = {loop: ci.step_digest(loop) for loop in ci.LOOPS}
    loader = package / "model/kernels/__init__.py"
    edit(loader, "    given = settings.current().kernel_wait_s", "    given = settings.current().kernel_wait_s or None")
    edit(
        loader,
        "from dlrm_study import settings",
        "from dlrm_study import settings as switches\nfrom dlrm_study import settings",
    )
    assert changed(before) == {"optimized", "gpu"}
    assert {loop: ci.step_digest(loop) for loop in ci.LOOPS} == steps  # FREE code only: the step as it was
    assert "append" in ci.lock_problem("optimized") and "step changed" not in ci.lock_problem("optimized")
    assert ci.lock_problem("reference") is None
    for path, old, new, loops in [
        ("model/kernels/__init__.py", '"-ffp-contract=off"', '"-ffp-contract=fast"', {"optimized", "gpu"}),
        ("model/kernels/__init__.py", 'extra_ldflags=["-fopenmp"]', "extra_ldflags=[]", {"optimized", "gpu"}),
        ("model/kernels/__init__.py", "    return load() or torch_ops", "    return torch_ops", {"optimized", "gpu"}),
        (
            "model/kernels/__init__.py",
            "\n@functools.cache",
            "\ntorch_ops.NAME = 'x'\n\n@functools.cache",
            {"optimized", "gpu"},
        ),
        ("distributed/launch.py", "\ndef inject_fault", "\nEXTRA = 1\n\n\ndef inject_fault", {"optimized"}),
        ("model/kernels/fused_cpu.cpp", "#include", "static const int edited = 1;\n#include", {"optimized", "gpu"}),
        ("model/fused_mlp.py", "import torch", "import torch\nimport math", set(ci.LOOPS)),
        ("distributed/remote.py", "import torch", "import torch\nimport math", {"optimized"}),
    ]:
        steps = {loop: ci.step_digest(loop) for loop in ci.LOOPS}
        edit(package / path, old, new)
        assert {loop for loop in ci.LOOPS if ci.step_digest(loop) != steps[loop]} == loops, (path, new)
        assert all("step changed" in ci.lock_problem(loop) for loop in loops)
    steps = {loop: ci.step_digest(loop) for loop in ci.LOOPS}
    assert all(ci.step_digest(loop, col.PROTOCOL_VERSION + 1) != steps[loop] for loop in ci.LOOPS)


def test_each_fingerprint_the_lock_lists_is_its_commits_and_runs_the_locked_step():
    """A declaration names a commit whose tree gives its fingerprint; that tree's step digest is the one locked
    (so an entry cannot name a fingerprint of other code). Read through git: skipped where the commit is absent."""
    tree_of = runpy.run_path(str(TESTS.parent / "scripts" / "refingerprint.py"))["Tree"]
    for loop, (step, alike) in ci.LOOP_LOCK.items():
        for fingerprint, commit in alike:
            try:
                tree = tree_of(commit)
            except subprocess.CalledProcessError:
                pytest.skip(f"commit {commit} is not in this clone")
            assert ci.fingerprint(loop, read=tree.read, listing=tree.listing) == fingerprint, (loop, commit)
            assert ci.step_digest(loop, read=tree.read, listing=tree.listing) == step, (loop, commit)


def test_a_fingerprint_declared_alike_is_read_as_the_first_of_its_lock(monkeypatch):
    monkeypatch.setattr(ci, "LOOP_LOCK", {"optimized": ("step", (("old000000000", "c1"), ("new000000000", "c2")))})
    monkeypatch.setattr(ci, "fingerprint_here", lambda loop: "new000000000")
    assert ci.code_of("optimized", "new000000000") == ci.code_of("optimized", "old000000000") == "old000000000"
    assert ci.code_of("optimized", "other0000000") == "other0000000"
    assert ci.code_of("reference", "old000000000") == "old000000000"  # a lock is per loop
    assert ci.today("optimized") == "old000000000"
    assert ci.code_of_record("optimized", "new000000000") == "old000000000"
    assert ci.code_of_record("optimized", float("nan")) == "" and ci.code_of_record(None, None) == ""
