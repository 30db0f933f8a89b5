"""Which code measured a record: per training loop, a fingerprint of the source its measured step executes.

A loop's fingerprint hashes, with comments, docstrings and blank lines taken out:
- every file under COMMON (the config schema and presets, the data and batches: what every loop is given);
- the files of LOOP_FILES[loop]: what that loop's model build and training step execute in model/, train/ and
  distributed/, and the C++ kernel source where the loop loads it. tests/test_code_identity.py pins the lists
  from a traced tiny run of each loop (every file the run executes there must be listed);
- the measuring protocol's number (`columns.PROTOCOL_VERSION`, or the record's own). From protocol 2 the
  procedure around the step (measure/: scheduling, warm-up, timing, profiling) is not hashed: a change to how
  things are measured raises that number by hand, and tests/test_code_identity.py makes each change to
  measure/ choose, through PROCEDURE_LOCK, between raising it and declaring it measures alike. Records of
  protocol 1 hash measure/'s source instead, since no number stood for their procedure.

A change that leaves a loop's step as it ran may be declared to run it alike: LOOP_LOCK lists, per loop, the
fingerprints so declared, and records of any of them are today's code (`code_of`, `today`), as PROCEDURE_LOCK does
for measure/. A declaration is a person's, and the tests bound it: it holds only while the loop's step digest (the
protocol and every file the fingerprint reads, less a few named functions of the kernel loader and the rank
launcher, FREE) is the one locked, so a change to a kernel, a model or training file, the config, the protocol or
the build's flags and arguments is always new code. What FREE's functions do is not checked (`load`'s switch to
the PyTorch twins among them: records say which kernels ran, `kernel_path`).

So a docstring or a comment changes no fingerprint, a CPU kernel changes only the loops that run it (the GPU
loop's host placement runs the fused CPU kernels, so it is among them), and a new protocol changes every one.
Library versions are not hashed: records carry them and the resume key compares them (`provenance.versions`).
Computed from files, not git, so a copy of the tree without its checkout (the GPU machine's) agrees.
"""

import ast
import functools
import hashlib
import io
import tokenize
from collections.abc import Callable
from pathlib import Path

from dlrm_study.records.columns import PROTOCOL_VERSION

PACKAGE = Path(__file__).resolve().parents[1]
SOURCE_SUFFIXES = (".py", ".cpp", ".h", ".cu")
COMMON = ("config", "data")  # folders every loop reads whole
KERNEL = "model/kernels/fused_cpu.cpp"  # built and loaded by model/kernels/__init__.py (`load`)
MODEL = ("model/__init__.py", "model/dlrm.py", "model/fused_mlp.py", "model/interaction.py",
         "model/tables/__init__.py", "model/tables/base.py")  # fmt: skip
TRAIN = (
    "train/__init__.py",
    "train/run.py",
    "train/gpu.py",
    "train/cpu.py",
    "train/trainer.py",
    "train/evaluate.py",
    "train/checkpoint.py",
)  # fmt: skip  (the trained studies' evaluation too)
DISTRIBUTED = (
    "distributed/__init__.py",
    "distributed/hybrid.py",
    "distributed/launch.py",
    "distributed/processes.py",
    "distributed/remote.py",
    "distributed/run.py",
    "distributed/torchrec_route.py",
)  # fmt: skip  (ranks are processes: declared, not traced)
KERNELS = ("model/kernels/__init__.py", "model/kernels/torch_ops.py", KERNEL)
LOOP_FILES: dict[str, tuple[str, ...]] = {
    "reference": (*MODEL, *TRAIN, "model/tables/reference.py"),
    "optimized": (*MODEL, *TRAIN, *KERNELS, *DISTRIBUTED, "model/tables/fused_cpu.py", "model/tables/hugepages.py",
                  "train/split_sgd.py"),
    "torchrec": (*MODEL, *TRAIN, "model/tables/torchrec_arch.py"),
    "gpu": (*MODEL, *TRAIN, *KERNELS, "model/kernels/triton_ops.py", "model/tables/cached.py",
            "model/tables/device_tables.py", "model/tables/fused_cpu.py", "model/tables/host.py",
            "model/tables/hugepages.py", "model/tables/placement.py", "model/tables/registry.py"),
}  # fmt: skip
LOOPS = tuple(LOOP_FILES)
# What a change declared alike may touch: in the fused kernels' loader and the ranks' launcher, their imports and
# these functions (which switches they read and how, the build's wait and lock, the fault tests' hook). Everything
# else, there too (their constants, the build's arguments, `cpu_ops`, the process group), is the step's.
FREE = {
    "model/kernels/__init__.py": ("load", "wait_s", "build_lock", "try_lock", "holder_of", "clear_dead_build",
                                  "compilers_in"),
    "distributed/launch.py": ("inject_fault", "planned_fault"),
}  # fmt: skip
# loop -> (its step digest, the (fingerprint, a commit whose tree gives it) declared to run its step alike, oldest
# first, today's last). A change to a loop's files either starts a new entry, (today's step digest, ((today's
# fingerprint, its commit),)): records measured before are then earlier code; or, where the step digest is still the
# entry's (only FREE code changed), appends today's fingerprint with its commit and the reason below: records measured
# before stay today's code. tests/test_code_identity.py makes each change choose (`lock_problem`), and recomputes each
# listed fingerprint and its step digest from its commit's tree. The changes declared alike, oldest first:
# - optimized 5844f3095569, gpu 8c88c66422b1: the loader's and the launcher's switches (DLRM_STUDY_KERNELS,
#   DLRM_STUDY_KERNEL_WAIT_S, DLRM_STUDY_FAULT) read through `dlrm_study.settings`; the fault once per process,
#   so a distributed step asks a cached value (67 ns) where it read the environment (0.7 us).
LOOP_LOCK: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "reference": ("a3d3afd44e4d", (("a3d3afd44e4d", "98d4b762"),)),
    "optimized": ("efd94a1538a9", (("1edc391635d5", "98d4b762"), ("5844f3095569", "c267d15d"))),
    "torchrec": ("61e889b2c72e", (("61e889b2c72e", "98d4b762"),)),
    "gpu": ("63e5f97d06ae", (("054bba56463c", "98d4b762"), ("8c88c66422b1", "c267d15d"))),
}
ANY = ""  # a record of no one loop (a cache's counted hit rates): every loop's files
# The procedure (measure/) at each protocol: its digest, with comments and docstrings out. A change to measure/
# either raises `PROTOCOL_VERSION` (records measured before are of another protocol) or, for a change that
# measures the same way (a refactor), writes the new digest here under the same number.
PROCEDURE = "measure"
LOCKED_FROM = 2  # records of an earlier protocol hash the procedure's source instead (none numbered it then)
# protocol -> the procedure digests declared to measure alike, oldest first, each added by a refactor's commit:
# 5afb86919c8b a task's code from its loop; 1f6b16d44f18 `run_together` asks `Sweep.decides`; 53233377ec15 and
# d37d777ef35b the physical bound's probes (measure/physical.py, probes.cpp: records of their own, no loop's step
# timed otherwise); 9bf8a8869ad6 the GPU profile keeps its top kernels and the model's work beside them (fields added);
# 475601ee6749 the top kernels' field name from records/columns; 72938caf04f5 the bound's probes at every thread
# count up to the record's (bound records only); 075b7734ce1d a sweep's plan moved to plans/sweep.py and the
# self-checks to records/selfcheck.py (measure/ keeps how a sweep is measured); 49071b34a3f3 a run holding records of
# another code beside today's is measured again whole (which tasks a resume measures, not how: `runner.pending`);
# 001dfa02b918 the same, decided from the tasks' own keys (a 2020-stack record names its own torch); 54f6e7ac07ee the
# switches (load allowed, limits cache, GPU profiler way, progress lines) read through `dlrm_study.settings`;
# b1225aec2bdd the line probes walk each step's rows sorted and as drawn, the faster kept (bound records only);
# 59a214557004 a measuring process's state (run slot, tally, limits, GPU windows and fallbacks, profiler way) in one
# `measure.context.RunContext`; f1c9a0455bcc the line probes' progress line says their two orders; fc0f3a4e2516
# the line probes draw each step's batch once and derive both orders from it (the same rows, drawn once); d70ba2bc4285
# the limits cache's default folder from `settings.cache_path` (the same folder, shared with the verdict cache);
# 84bdc9ebef79 a resume compares codes as LOOP_LOCK names them (`code_identity.code_of`: which tasks, not how).
PROCEDURE_LOCK = {
    2: ("80f0ab6a591f", "5afb86919c8b", "1f6b16d44f18", "53233377ec15", "d37d777ef35b", "9bf8a8869ad6", "475601ee6749",
        "72938caf04f5", "075b7734ce1d", "49071b34a3f3", "001dfa02b918", "54f6e7ac07ee", "b1225aec2bdd",
        "59a214557004", "f1c9a0455bcc", "fc0f3a4e2516", "d70ba2bc4285", "84bdc9ebef79")
}  # fmt: skip

Read = Callable[[str], str | None]  # a package-relative path -> its text (None: no such file)
List = Callable[[str], list[str]]  # a package folder -> the package-relative source files under it


def read_here(path: str) -> str | None:
    try:
        return (PACKAGE / path).read_text()
    except (FileNotFoundError, IsADirectoryError):
        return None


def list_here(folder: str) -> list[str]:
    found = (PACKAGE / folder).rglob("*")
    return sorted(
        p.relative_to(PACKAGE).as_posix() for p in found
        if p.is_file() and p.suffix in SOURCE_SUFFIXES and "__pycache__" not in p.parts
    )  # fmt: skip


def files_of(loop: str, listing: List = list_here) -> list[str]:
    """The package-relative files a loop's fingerprint hashes (ANY: every loop's)."""
    if loop != ANY and loop not in LOOP_FILES:
        raise ValueError(f"unknown loop {loop!r}: one of {', '.join(LOOPS)}")
    own = {f for name in (LOOPS if loop == ANY else (loop,)) for f in LOOP_FILES[name]}
    return sorted(own | {f for folder in COMMON for f in listing(folder)})


def fingerprint(loop: str, protocol: int = PROTOCOL_VERSION, read: Read = read_here, listing: List = list_here) -> str:
    """12 hex digits: sha256 over the protocol number and, per file of `files_of(loop)` in order, its path
    and its text less comments, docstrings and blank lines (a missing file counts as missing)."""
    digest = hashlib.sha256(f"protocol {protocol}\n".encode())
    if protocol < LOCKED_FROM:  # no number stood for the procedure then: its source does
        digest.update(f"procedure {procedure_digest(read, listing)}\n".encode())
    for path in files_of(loop, listing):
        text = read(path)
        body = "<missing>" if text is None else stripped(path, text)
        digest.update(f"{path}\0{body}\0".encode())
    return digest.hexdigest()[:12]


@functools.cache
def fingerprint_here(loop: str) -> str:
    """`fingerprint` of this package's files at today's protocol (once per process)."""
    return fingerprint(loop)


def loop_fingerprints() -> dict[str, str]:
    """loop -> its fingerprint here, every loop."""
    return {loop: fingerprint_here(loop) for loop in LOOPS}


def step_digest(loop: str, protocol: int = PROTOCOL_VERSION, read: Read = read_here, listing: List = list_here) -> str:
    """12 hex digits over what a loop's step runs: the protocol's number and its fingerprint's files less comments
    and docstrings, less, in FREE's files, their imports and FREE's functions (what LOOP_LOCK keeps fixed)."""
    digest = hashlib.sha256(f"protocol {protocol}\n".encode())
    for path in files_of(loop, listing):
        text = read(path)
        body = "<missing>" if text is None else bound(path, text) if path in FREE else stripped(path, text)
        digest.update(f"{path}\0{body}\0".encode())
    return digest.hexdigest()[:12]


def bound(path: str, text: str) -> str:
    """A FREE file's statements, each as the fingerprint reads it, less its imports and FREE's functions (the
    whole text where it does not parse)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return stripped(path, text)
    lines = text.splitlines()
    kept = []
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom) or getattr(node, "name", None) in FREE[path]:
            continue
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        kept.append(stripped(path, "\n".join(lines[first - 1 : node.end_lineno])))
    return "\n".join(kept)


def code_of(loop: str, fingerprint: str) -> str:
    """The code a record's fingerprint stands for: the first fingerprint of its loop's LOOP_LOCK entry where the
    entry holds it (declared to run the step alike), else the fingerprint itself (ANY, a record of no one loop,
    has no entry: a change to any loop is new code for it)."""
    alike = [fp for fp, _commit in LOOP_LOCK.get(loop, ("", ()))[1]]
    return alike[0] if fingerprint in alike else fingerprint


def today(loop: str) -> str:
    """Today's code of a loop, as `code_of` names it (a record of it is measured by today's code)."""
    return code_of(loop, fingerprint_here(loop))


def code_of_record(loop: object, fingerprint: object) -> str:
    """`code_of` a record's `train.loop` and `code_fingerprint` as stored ("" for a record without one)."""
    text = "" if fingerprint is None or fingerprint != fingerprint else str(fingerprint)
    return code_of(loop_of(loop), text)


def lock_problem(loop: str) -> str | None:
    """Why LOOP_LOCK does not hold this loop's code today (None where it does): what to write there."""
    fingerprint, step = fingerprint_here(loop), step_digest(loop)
    locked_step, alike = LOOP_LOCK[loop]
    if alike and alike[-1][0] == fingerprint and locked_step == step:
        return None
    fresh = (f"LOOP_LOCK[{loop!r}] = ({step!r}, (({fingerprint!r}, <the commit>),)): records measured before "
             "become earlier code")  # fmt: skip
    if locked_step != step:
        return f"{loop}'s step changed (step digest {step}, fingerprint {fingerprint}): write {fresh}"
    return (f"{loop}'s code changed (fingerprint {fingerprint}) but not its step (digest {step}: only FREE code). "
            f"If its step runs alike, append ({fingerprint!r}, <the commit>) to LOOP_LOCK[{loop!r}] with the "
            f"reason; if not, write {fresh}")  # fmt: skip


def procedure_digest(read: Read = read_here, listing: List = list_here) -> str:
    """12 hex digits over measure/'s files less comments and docstrings (what PROCEDURE_LOCK pins)."""
    digest = hashlib.sha256()
    for path in listing(PROCEDURE):
        digest.update(f"{path}\0{stripped(path, read(path) or '')}\0".encode())
    return digest.hexdigest()[:12]


def loop_of(value: object) -> str:
    """A record's loop key from its `train.loop` (ANY where it names none of LOOPS)."""
    text = "" if value is None or value != value else str(value)
    return text if text in LOOP_FILES else ANY


# --- what a fingerprint reads of a file -------------------------------------------------------------


def stripped(path: str, text: str) -> str:
    """A source file's text as the fingerprint reads it: comments, docstrings, blank lines and trailing spaces
    out (Python and C++; other text as it is, less blank lines)."""
    if path.endswith(".py"):
        text = without_python_comments(text)
    elif path.endswith((".cpp", ".h", ".cu")):
        text = without_c_comments(text)
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())


def without_python_comments(text: str) -> str:
    """Comments and docstrings blanked out (positions from tokenize and ast, which agree across Python
    versions; code that does not parse is kept as it is)."""
    try:
        tree = ast.parse(text)
        comments = [(*t.start, *t.end) for t in tokenize.generate_tokens(io.StringIO(text).readline)
                    if t.type == tokenize.COMMENT]  # fmt: skip
    except (SyntaxError, tokenize.TokenError, IndentationError):
        return text
    lines = text.splitlines()
    spans = comments + [docstring_span(node, lines) for node in ast.walk(tree) if docstring_of(node)]
    return blanked(lines, spans)


def docstring_of(node: ast.AST) -> bool:
    body = getattr(node, "body", None)
    if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) or not body:
        return False
    first = body[0]
    return isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)


def docstring_span(node: ast.AST, lines: list[str]) -> tuple[int, int, int, int]:
    """(start row, start column, end row, end column) of a docstring, rows from 1, columns in characters
    (ast counts UTF-8 bytes)."""
    first = node.body[0]  # type: ignore[attr-defined]

    def column(row: int, offset: int) -> int:
        return len(lines[row - 1].encode()[:offset].decode(errors="ignore"))

    return (
        first.lineno,
        column(first.lineno, first.col_offset),
        first.end_lineno,
        column(first.end_lineno, first.end_col_offset),
    )


def blanked(lines: list[str], spans: list[tuple[int, int, int, int]]) -> str:
    """The lines with each (row, column, end row, end column) span replaced by spaces."""
    rows = [list(line) for line in lines]
    for start_row, start_col, end_row, end_col in spans:
        for row in range(start_row, end_row + 1):
            chars = rows[row - 1]
            lo = start_col if row == start_row else 0
            hi = end_col if row == end_row else len(chars)
            chars[lo:hi] = " " * (hi - lo)
    return "\n".join("".join(chars) for chars in rows)


def without_c_comments(text: str) -> str:
    """// and /* */ comments out of C or C++ source, string and character literals kept as they are."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        two = text[i : i + 2]
        if two == "//":
            while i < n and text[i] != "\n":
                i += 1
        elif two == "/*":
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            out.append(" ")
        elif text[i] in "\"'":
            quote, start = text[i], i
            i += 1
            while i < n and text[i] != quote and text[i] != "\n":
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append(text[start:i])
        else:
            out.append(text[i])
            i += 1
    return "".join(out)
