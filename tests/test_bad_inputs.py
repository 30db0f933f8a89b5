"""Bad input through the real CLI: every case ends in one line on stderr and exit 2, nothing written.

Each case runs the CLI's `main` in a process and a folder of its own that holds the inputs below;
afterwards the folder must hold exactly what it held before (no record, no checkpoint, no
half-written file, the inputs untouched). Importing torch is most of a refused run's seconds, so one
process imports the CLI once and forks a child per case (`FORKED`, two at a time, once per session);
a few cases run as `python -m dlrm_study ...` too, and must end the same (`test_a_forked_case_ends_as_the_real_cli`).
"""

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tests.conftest import CRITEO_SAMPLE

from dlrm_study import config
from dlrm_study.records import store
from dlrm_study.records.record import make_record
from dlrm_study.train import build
from dlrm_study.train import checkpoint as ckpt

KAGGLE_SMALL = ["--config", "kaggle", "--set", "model.table_rows=26x100", "--set", "train.batch_size=8"]
TRAIN = ["train", "--no-progress"]
BENCH = ["bench", "--no-progress", "--repeats", "1", "--steps", "1", "--roofline", "off"]

SWEEP_BASE = "name: s\nconfig: tiny\nsteps: 1\nrepeats: 1\nout: records.csv\n"
KEPT = ["--out", "records.csv", "--checkpoint", "run.pt"]  # written at the end only: a run that fails keeps them


def make_inputs(folder: Path) -> None:
    """The files the cases read: good and bad configs, sweeps, Criteo files, outputs in the way."""
    sample = CRITEO_SAMPLE.read_bytes().splitlines(keepends=True)
    files = {
        "latin1.yaml": b"name: caf\xe9\n",
        "broken.yaml": b"model: [\n",
        "list.yaml": b"- tiny\n",
        "wrong_type.yaml": b"base: tiny\nmodel:\n  embedding_dim: eight\n",
        "norway.yaml": b"base: tiny\ntrain:\n  table_batching: no\n",
        "unknown.yaml": b"base: tiny\nmodle: {}\n",
        "bad_utf8.tsv": b"".join(sample[:20]) + b"1\t\xff\xfe\n" + b"".join(sample[20:60]),
        "bad_utf8.tsv.gz": gzip.compress(b"".join(sample[:20]) + b"1\t\xff\xfe\n" + b"".join(sample[20:60])),
        "cut.tsv.gz": gzip.compress(b"".join(sample))[:3000],
        "short_line.tsv": b"".join(sample[:20]) + b"0\t1\n" + b"".join(sample[20:60]),
        "huge_number.tsv": b"".join(sample[:20]) + b"\t".join([b"1", b"9" * 400, *sample[0].split(b"\t")[2:]]),
        "notes.txt": b"my notes, not records\n",
        "blocker": b"a file where a folder is expected\n",
        "garbage.pt": b"not a checkpoint\n",
        "sweep_latin1.yaml": SWEEP_BASE.encode() + b"# \xe9\n",
        "sweep_steps.yaml": b"name: s\nsteps: ten\n",
        "sweep_grid.yaml": b"name: s\ngrid: {model.dense_features: 8}\n",
        "sweep_set.yaml": b"name: s\nset: [1]\n",
        "sweep_config.yaml": b"name: s\nconfig: 5\n",
        "sweep_name.yaml": b"name: [a, b]\n",
        "sweep_variants.yaml": b"name: s\nvariants: [turbo]\n",
        "sweep_out.yaml": b"name: s\nout: folder\n",
        "sweep_key.yaml": b"name: s\n7: x\n",
        "sweep_kept.yaml": SWEEP_BASE.encode() + b"variants: [reference, turbo]\n",
    }
    for name, content in files.items():
        (folder / name).write_bytes(content)
    hollow = {"config": config.preset("tiny").to_dict(), "step": 0, "losses": [], "model": {}, "dense_optimizer": {}}
    torch.save(hollow, folder / "hollow.pt")  # a checkpoint's shape without its state
    (folder / "folder").mkdir()
    (folder / "folder.yaml").mkdir()
    # Outputs worth keeping, refused as targets: a valid records CSV and a valid checkpoint (at step 5).
    records = [make_record("s", {"samples_per_s": 100.0 + r}, repeat=r) for r in (0, 1)]
    store.append_many(folder / "records.csv", records)
    run = build(config.preset("tiny"))
    run.step = 5
    ckpt.save(run, folder / "run.pt")


# (id, argv, what the one line must say)
CASES = [
    # config values: impossible, unknown, non-finite, out of range, of the wrong type
    ("impossible-shape", [*TRAIN, "--set", "model.embedding_dim=16"], "model.bottom_mlp ends in 8"),
    ("unknown-key", [*TRAIN, "--set", "model.colour=red"], "unknown config key 'model.colour'"),
    ("set-without-value", [*TRAIN, "--set", "model.embedding_dim"], "expected section.field=value"),
    ("inf-batch", [*TRAIN, "--set", "train.batch_size=.inf"], "train.batch_size: inf is not a valid whole number"),
    ("nan-lr", [*TRAIN, "--set", "train.learning_rate=nan"], "train.learning_rate: 'nan' is not a valid finite"),
    ("nan-zipf", [*TRAIN, "--set", "data.zipf_alpha=nan"], "data.zipf_alpha: 'nan' is not a valid finite number"),
    ("inf-cache", [*TRAIN, "--set", "train.cache_fraction=inf"], "train.cache_fraction: 'inf' is not a valid finite"),
    ("negative-seed", [*TRAIN, "--seed", "-1"], "train.seed must be in [0, 2**32), got -1"),
    ("big-teacher-seed", [*BENCH, "--set", "data.teacher_seed=4294967296"], "data.teacher_seed must be in [0, 2**32)"),
    ("sexagesimal", [*TRAIN, "--set", "train.steps=1:30"], "train.steps: '1:30' is not a valid whole number"),
    ("fraction-batch", [*TRAIN, "--set", "train.batch_size=1.5"], "train.batch_size: 1.5 is not a valid whole number"),
    ("yes-is-not-a-bool", [*TRAIN, "--set", "train.table_batching=yes"], "'yes' is not a valid boolean"),
    ("bad-list", [*TRAIN, "--set", "model.table_rows=4x"], "model.table_rows: '4x' is not a valid list"),
    ("empty-name", [*TRAIN, "--set", "name="], "name: '' is not a valid name"),
    ("negative-lr", [*TRAIN, "--set", "train.learning_rate=-0.1"], "train.learning_rate must be positive"),
    ("zero-batch", [*TRAIN, "--set", "train.batch_size=0"], "train.batch_size must be positive, got 0"),
    ("negative-threads", [*TRAIN, "--threads", "-2"], "must not be negative"),
    ("cache-fraction-range", [*TRAIN, "--loop", "gpu", "--cache-fraction", "1.5"], "train.cache_fraction must be in"),
    ("beyond-int64", [*TRAIN, "--set", "model.dense_features=1e300"], "model.dense_features: 1e+300 is not a valid"),
    ("too-many-threads", [*TRAIN, "--threads", "100000"], "train.threads must be at most 1024, got 100000"),
    ("too-big", [*BENCH, "--set", "model.table_rows=8x100000000000"], "needs about"),
    # options
    ("steps-zero", [*TRAIN, "--steps", "0"], "--steps must be positive"),
    ("steps-not-int", [*TRAIN, "--steps", "many"], "invalid int value"),
    ("no-command", ["fly"], "invalid choice"),
    ("unknown-loop", [*BENCH, "--loop", "turbo"], "train.loop 'turbo' is not one of"),
    ("bf16-reference", [*BENCH, "--precision", "bf16"], "bf16 needs the optimized loop"),
    ("unknown-precision", [*BENCH, "--precision", "fp8"], "train.precision 'fp8' is not one of"),
    ("optimized-on-cuda", [*BENCH, "--loop", "optimized", "--device", "cuda"], "runs on the CPU"),
    ("placement-off-gpu", [*TRAIN, "--placement", "host"], "applies to the gpu loop only"),
    ("unknown-placement", [*TRAIN, "--loop", "gpu", "--placement", "nvme"], "train.placement 'nvme' is not one of"),
    ("log-every-zero", [*TRAIN, "--log-every", "0"], "--log-every must be positive"),
    ("timeout-nan", [*TRAIN, "--timeout-s", "nan"], "--timeout-s must be a positive number"),
    ("timeout-inf", [*BENCH, "--timeout-s", "inf"], "--timeout-s must be a positive number"),
    ("roofline-preset", ["roofline", "--config", "nope"], "neither a preset"),
    ("compare-variant", ["compare", "--variants", "reference,turbo"], "unknown variant 'turbo'"),
    ("compare-preset", ["compare", "--configs", "huge"], "unknown preset 'huge'"),
    ("compare-repeats", ["compare", "--repeats", "0"], "--repeats and --steps must be positive"),
    ("predict-device", ["predict", "--device", "b200"], "--device 'b200': no description"),
    ("readme-missing", ["readme", "--readme", "nope.md", "--results", "folder"], "--readme file not found: nope.md"),
    ("readme-results", ["readme", "--results", "nope"], "--results nope: not a folder"),
    ("baseline-python", ["baseline-2020", "--results", "folder", "--python", "no/such/python"], "no/such/python"),
    # config files
    ("config-missing", [*TRAIN, "--config", "missing.yaml"], "config file not found: missing.yaml"),
    ("config-folder", [*TRAIN, "--config", "folder.yaml"], "config file folder.yaml is a folder"),
    ("config-not-utf8", [*TRAIN, "--config", "latin1.yaml"], "latin1.yaml:1: not UTF-8 text (byte 0xe9)"),
    ("config-not-yaml", [*TRAIN, "--config", "broken.yaml"], "broken.yaml: not valid YAML"),
    ("config-not-mapping", [*TRAIN, "--config", "list.yaml"], "list.yaml: expected a mapping"),
    ("config-wrong-type", [*TRAIN, "--config", "wrong_type.yaml"], "wrong_type.yaml: model.embedding_dim: 'eight'"),
    ("config-norway", [*TRAIN, "--config", "norway.yaml"], "norway.yaml: train.table_batching: 'no' is not a valid"),
    ("config-unknown-key", [*TRAIN, "--config", "unknown.yaml"], "unknown.yaml: unknown key 'modle'"),
    # Criteo files: a path is taken literally, a bad line is named by file and number
    ("data-missing", [*TRAIN, *KAGGLE_SMALL, "--data", "missing.tsv"], "Criteo file not found: missing.tsv"),
    ("data-literal-yes", [*TRAIN, *KAGGLE_SMALL, "--data", "yes"], "Criteo file not found: yes"),
    ("data-literal-hash", [*TRAIN, *KAGGLE_SMALL, "--data", "clicks #2.tsv"], "Criteo file not found: clicks #2.tsv"),
    ("data-folder", [*TRAIN, *KAGGLE_SMALL, "--data", "folder"], "Criteo folder folder holds no day_N"),
    ("data-not-utf8", [*TRAIN, *KAGGLE_SMALL, "--data", "bad_utf8.tsv"], "bad_utf8.tsv:21: not UTF-8 text (byte 0xff"),
    ("data-gz-not-utf8", [*TRAIN, *KAGGLE_SMALL, "--data", "bad_utf8.tsv.gz"], "bad_utf8.tsv.gz:21: not UTF-8"),
    ("data-gz-cut-off", [*TRAIN, *KAGGLE_SMALL, "--data", "cut.tsv.gz"], "the gzip stream breaks off"),
    ("data-short-line", [*TRAIN, *KAGGLE_SMALL, "--data", "short_line.tsv"], "short_line.tsv:21: expected 40"),
    (
        "data-huge-number",
        [*TRAIN, *KAGGLE_SMALL, "--data", "huge_number.tsv"],
        "huge_number.tsv:21: integer feature I1",
    ),
    ("data-wrong-shape", [*TRAIN, "--data", "bad_utf8.tsv"], "Criteo data has 13 dense and 26 categorical features"),
    # outputs, checked before training starts
    ("out-folder", [*TRAIN, "--out", "folder"], "--out folder is a folder"),
    ("out-not-records", [*TRAIN, "--out", "notes.txt"], "--out notes.txt exists and is not a records CSV"),
    ("out-under-file", [*BENCH, "--out", "blocker/records.csv"], "--out blocker/records.csv: blocker is not a folder"),
    ("roofline-out-folder", ["roofline", "--quick", "--out", "folder"], "--out folder is a folder"),
    ("compare-out-folder", ["compare", "--configs", "tiny", "--out", "folder"], "--out folder is a folder"),
    ("checkpoint-folder", [*TRAIN, "--checkpoint", "folder"], "--checkpoint folder is a folder"),
    ("checkpoint-under-file", [*TRAIN, "--checkpoint", "blocker/run.pt"], "blocker is not a folder"),
    ("checkpoint-impossible-parent", [*TRAIN, "--checkpoint", "/proc/nope/ck.pt"], "no file can be made in /proc"),
    ("out-fifo", [*TRAIN, "--out", "fifo"], "--out fifo is not a regular file"),
    ("checkpoint-fifo", [*TRAIN, "--checkpoint", "fifo"], "--checkpoint fifo is not a regular file"),
    # a valid records CSV and a valid checkpoint as the targets of a refused run: byte for byte as they were
    ("records-kept-bad-config", [*TRAIN, *KEPT, "--set", "model.colour=red"], "unknown config key 'model.colour'"),
    ("records-kept-past-steps", [*TRAIN, "--resume", "run.pt", "--steps", "2", *KEPT], "run.pt is at step 5"),
    ("records-kept-bad-line", [*TRAIN, *KAGGLE_SMALL, "--data", "short_line.tsv", *KEPT], "short_line.tsv:21"),
    ("records-kept-bench", [*BENCH, "--out", "records.csv", "--precision", "fp8"], "'fp8' is not one of"),
    ("records-kept-sweep", ["sweep", "sweep_kept.yaml"], "unknown variant 'turbo'"),
    # checkpoints
    ("resume-missing", [*TRAIN, "--resume", "missing.pt"], "checkpoint not found: missing.pt"),
    ("resume-garbage", [*TRAIN, "--resume", "garbage.pt"], "garbage.pt is not a dlrm-study checkpoint"),
    ("resume-hollow", [*TRAIN, "--resume", "hollow.pt"], "hollow.pt: its state does not match its config"),
    ("resume-with-seed", [*TRAIN, "--resume", "garbage.pt", "--seed", "0"], "drop --seed"),
    # distributed setups, refused before any process group or rpc starts
    ("distributed-alone", [*TRAIN, "--distributed"], "--distributed runs under torchrun"),
    ("distributed-checkpoint-every", [*TRAIN, "--distributed", "--checkpoint-every", "5"], "is for one process"),
    ("two-setups", [*TRAIN, "--distributed", "--remote-tables"], "two setups: choose one"),
    ("remote-bf16", [*TRAIN, "--remote-tables", "--loop", "optimized", "--precision", "bf16"], "fp32 tables only"),
    # sweep files
    ("sweep-missing", ["sweep", "missing.yaml"], "sweep file not found: missing.yaml"),
    ("sweep-not-utf8", ["sweep", "sweep_latin1.yaml"], "sweep_latin1.yaml:6: not UTF-8 text"),
    ("sweep-steps-text", ["sweep", "sweep_steps.yaml"], "steps must be a whole number, got 'ten'"),
    ("sweep-grid-scalar", ["sweep", "sweep_grid.yaml"], "grid must be a mapping of each field to a list"),
    ("sweep-set-number", ["sweep", "sweep_set.yaml"], "set must be a list of section.field=value overrides"),
    ("sweep-config-number", ["sweep", "sweep_config.yaml"], "config must be a preset or YAML file"),
    ("sweep-name-list", ["sweep", "sweep_name.yaml"], "name must be a name, got ['a', 'b']"),
    ("sweep-variant", ["sweep", "sweep_variants.yaml"], "unknown variant 'turbo'"),
    ("sweep-out-folder", ["sweep", "sweep_out.yaml"], "out folder is a folder"),
    ("sweep-key-number", ["sweep", "sweep_key.yaml"], "unknown key '7'"),
]


def snapshot(folder: Path) -> dict[str, str]:
    """Every path under `folder` with a hash of its content (folders: empty)."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
        for path in sorted(folder.rglob("*"))
    }


ENV = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
CASE_LIMIT_S = 300  # a hang guard per case, not a deadline

# One process that imports the CLI once, then runs each case (a JSON list of [folder, stdout file, stderr file,
# argv] on stdin) in a child forked from it: its own folder, stdin empty, stdout and stderr to their files, and
# the exit code a real run would have, its atexit handlers run. Two at a time;
# a line of JSON per case on stdout: [index, exit code (negative: the signal that ended it)].
FORKED = """
import ast, atexit, gc, importlib, inspect, json, os, signal, sys, traceback
from dlrm_study.cli import main as cli

# What a command imports when it runs (cli.main imports it inside the command), imported here once too.
for node in ast.walk(ast.parse(inspect.getsource(cli))):
    if isinstance(node, ast.ImportFrom) and node.col_offset > 0 and node.module.startswith("dlrm_study"):
        module = importlib.import_module(node.module)
        for alias in node.names:
            if not hasattr(module, alias.name):
                importlib.import_module(f"{node.module}.{alias.name}")

cases, running, width = json.load(sys.stdin), {}, int(sys.argv[1])
sys.stdout.flush()
sys.stderr.flush()
gc.freeze()  # the imported objects, never scanned again: a child copies no page of them for the collector


def child(folder, out, err, argv):
    os.chdir(folder)
    write = os.O_WRONLY | os.O_CREAT
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, out, write), (2, err, write)):
        os.dup2(os.open(path, flags, 0o644), fd)
    signal.alarm(int(sys.argv[2]))  # a hang guard: SIGALRM ends the case
    try:
        code = cli.main(argv)
    except SystemExit as end:  # argparse's refusals
        code = end.code if isinstance(end.code, int) else 1
    except BaseException:  # as Python ends on an uncaught one; never back into the loop below
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()  # what exiting runs; the interpreter's teardown (seconds, every page copied) is skipped
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def reap():
    pid, status = os.wait()
    print(json.dumps([running.pop(pid), os.waitstatus_to_exitcode(status)]), flush=True)


for i, case in enumerate(cases):
    while len(running) >= width:
        reap()
    pid = os.fork()
    if pid == 0:
        child(*case)
    running[pid] = i
while running:
    reap()
"""


def template(root: Path) -> Path:
    """The inputs made once (a model built, two checkpoints saved); each case gets a copy."""
    made = root / "inputs"
    if not made.exists():
        made.mkdir()
        make_inputs(made)
    return made


def prepare(folder: Path, inputs: Path) -> None:
    """A case's folder: a copy of the inputs, and the fifo made anew (copying a fifo would read it)."""
    shutil.copytree(inputs, folder, ignore=shutil.ignore_patterns("fifo"))
    os.mkfifo(folder / "fifo")  # reading it waits for a writer forever; replacing it loses it


def changes(before: dict[str, str], after: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in after.items() if before.get(k) != v} | {k: "gone" for k in before if k not in after}


def run_forked(root: Path, cases: list[tuple[str, list[str]]]) -> dict[str, tuple[int, str, str, dict[str, str]]]:
    """Each case (name, argv) run in a forked child of one process that imported the CLI once."""
    inputs, logs = template(root), root / "logs"
    logs.mkdir()
    todo, before = [], {}
    for name, argv in cases:
        prepare(root / name, inputs)
        before[name] = snapshot(root / name)
        todo.append([str(root / name), str(logs / f"{name}.out"), str(logs / f"{name}.err"), argv])
    width = str(max(2, os.cpu_count() or 1))
    command = [sys.executable, "-c", FORKED, width, str(CASE_LIMIT_S)]
    server = subprocess.run(command, input=json.dumps(todo), capture_output=True, text=True, env=ENV,
                            timeout=CASE_LIMIT_S * len(cases))  # fmt: skip
    assert server.returncode == 0, server.stderr[-3000:]
    codes = dict(json.loads(line) for line in server.stdout.splitlines())
    return {
        name: (
            codes[i],
            (logs / f"{name}.out").read_text(),
            (logs / f"{name}.err").read_text(),
            changes(before[name], snapshot(root / name)),
        )
        for i, (name, _) in enumerate(cases)
    }


def run_case(folder: Path, argv: list[str], inputs: Path) -> tuple[int, str, str, dict[str, str]]:
    """A case as `python -m dlrm_study ARGV`, a process of its own."""
    prepare(folder, inputs)
    before = snapshot(folder)
    proc = subprocess.run(
        [sys.executable, "-m", "dlrm_study", *argv], cwd=folder, capture_output=True, text=True, env=ENV,
        timeout=CASE_LIMIT_S, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return proc.returncode, proc.stdout, proc.stderr, changes(before, snapshot(folder))


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, tuple[int, str, str, dict[str, str]]]:
    return run_forked(tmp_path_factory.mktemp("bad_inputs"), [(name, argv) for name, argv, _ in CASES])


def test_the_table_is_large_and_names_each_case_once():
    assert len(CASES) >= 40 and len({name for name, _, _ in CASES}) == len(CASES)


@pytest.mark.parametrize(("name", "argv", "message"), CASES, ids=[name for name, _, _ in CASES])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(outcomes, name, argv, message):
    code, out, err, changed = outcomes[name]
    assert "Traceback" not in err and err.count("\n") == 1 and err.startswith("dlrm-study: error: "), err
    assert message in err, err
    assert code == 2
    assert changed == {}  # no record, no checkpoint, no half-written file; the inputs untouched
    assert "record appended" not in out


# Cases the fork would be likeliest to get wrong: argparse's own exit, a config refused, an output kept whole.
REAL_CLI = ("steps-not-int", "config-not-yaml", "records-kept-past-steps", "out-fifo")


@pytest.mark.parametrize("name", REAL_CLI)
def test_a_forked_case_ends_as_the_real_cli(outcomes, tmp_path, name):
    """The forked child is the CLI as `python -m dlrm_study` runs it: same exit code, output and files."""
    argv = next(argv for case, argv, _ in CASES if case == name)
    assert run_case(tmp_path / name, argv, template(tmp_path)) == outcomes[name]
