"""Faults survived, through the real CLI: a killed build never hangs the next run, a write fault or a corrupt record
is one line and nothing lost, and a run killed (SIGKILL) or interrupted (SIGINT) resumes losing and repeating nothing.

Every wait is bounded by GUARD, a guard against hangs only (generous on a busy machine), never a claim about speed.
Faults injected mid-run go through `FAULTY`: the real CLI with a fault made right after its first record or checkpoint
(a folder frozen by the OS, a disk that reports it is full or a small one filled, a folder removed). A run to stop
goes through `PAUSED`: the real CLI waiting after its first record or checkpoint, so no run ends before its signal.
"""

import csv
import io
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.conftest import ROOT

from dlrm_study import config
from dlrm_study.measure import sweep
from dlrm_study.model import kernels
from dlrm_study.plans import sweep as sweep_plan
from dlrm_study.records import store
from dlrm_study.records.record import make_record
from dlrm_study.train import build
from dlrm_study.train import checkpoint as ckpt

GUARD = 600  # seconds: a hang guard, not a deadline
ENV = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
ENV |= {"PYTHONPATH": str(ROOT / "src")}

SWEEP = """name: faults
config: tiny
set: [train.batch_size=16]
grid:
  data.lookups_per_table: [1, 2]
variants: [reference, optimized-fp32]
repeats: {repeats}
steps: 2
warmup: 1
out: {out}
"""
CELLS = 2 * 2  # points x variants, in each repeat
FILLER = "filler"  # the file that fills a small disk (FAULTY's `filled`)
OPTIMIZED = ["train", "--loop", "optimized", "--steps", "2", "--no-progress"]  # loads the fused CPU kernels


def cli(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -m dlrm_study ARGV` in `cwd`, to its end (GUARD bounds a hang)."""
    command = [sys.executable, "-m", "dlrm_study", *argv]
    return subprocess.run(command, cwd=cwd, env=env or ENV, capture_output=True, text=True, timeout=GUARD)


def start(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """A process that takes SIGINT as a user's Ctrl-C (whatever the test runner's own SIGINT disposition)."""
    return subprocess.Popen(
        command, cwd=cwd, env=env or ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip


def wait_for(condition: Callable[[], bool], proc: subprocess.Popen, what: str) -> None:
    """Poll until `condition` holds; fail if `proc` ends first or GUARD passes (a hang)."""
    guard = time.monotonic() + GUARD
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"the run ended (exit {proc.returncode}) before {what}: {proc.stderr.read()[-2000:]}")
        if time.monotonic() > guard:
            proc.kill()
            pytest.fail(f"no {what} after {GUARD} s: hung")
        time.sleep(0.05)


def stop(proc: subprocess.Popen, sig: signal.Signals) -> tuple[int, str]:
    """Send `sig`, wait for the end (GUARD bounds a hang); the exit code and stderr."""
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=GUARD)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"still running {GUARD} s after {sig.name}: hung")
    return proc.returncode, err


def rows(path: Path) -> int:
    return len(store.read_rows(path)[1])


def keys(path: Path) -> list[str]:
    return [store.key_of(row) for row in store.read_rows(path)[1]]


def one_line_error(done: subprocess.CompletedProcess, *says: str) -> str:
    """The run ended with exit 2 and one `dlrm-study: error:` line that says each of `says`; that line."""
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("dlrm-study: error: ") and all(s in last for s in says), done.stderr[-3000:]
    assert sum(line.startswith("dlrm-study: error: ") for line in done.stderr.splitlines()) == 1
    return last


def no_leftovers(folder: Path) -> None:
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")], sorted(p.name for p in folder.iterdir())


def parses_whole(path: Path) -> None:
    """Every record of the CSV is readable: no line cut short, numbers where numbers belong."""
    assert not store.load(path).attrs.get(store.LEFT_OUT)


# --- 1. no run waits on a dead run ---------------------------------------------------------------------------------


@pytest.fixture
def built_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An environment whose TORCH_EXTENSIONS_DIR holds a copy of this checkout's built kernels (no compile here)."""
    if kernels.load() is None:
        pytest.skip("no C++ compiler: the kernels cannot be built here")
    source = kernels.build_folder()
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "extensions"))
    shutil.copytree(source, kernels.build_folder(), dirs_exist_ok=True, ignore=shutil.ignore_patterns("*lock*"))
    return {**ENV, "TORCH_EXTENSIONS_DIR": str(tmp_path / "extensions")}


def test_a_lock_left_by_a_killed_build_is_removed_and_the_run_goes_on(tmp_path, built_copy):
    lock = kernels.build_folder() / "lock"
    lock.touch()  # torch's FileBaton, as a build killed mid-way leaves it
    done = cli([*OPTIMIZED, "--out", "t.csv"], tmp_path, built_copy)
    assert done.returncode == 0, done.stderr[-3000:]
    said = [line for line in done.stderr.splitlines() if str(lock) in line]
    assert len(said) == 1 and "removed" in said[0], done.stderr
    assert not lock.exists()
    assert list(store.load(tmp_path / "t.csv")["kernel_path"]) == ["cpp"]


HOLD = """
import time
from dlrm_study.model import kernels
with kernels.build_lock(kernels.build_folder(), wait_s=0):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_live_build_is_waited_on_for_a_limited_time_then_the_run_ends_in_one_line(tmp_path):
    env = {**ENV, "TORCH_EXTENSIONS_DIR": str(tmp_path / "extensions"), "DLRM_STUDY_KERNEL_WAIT_S": "2"}
    holder = start([sys.executable, "-c", HOLD], tmp_path, env)
    try:
        assert holder.stdout.readline().strip() == "held", holder.stderr.read()[-2000:]
        done = cli([*OPTIMIZED, "--out", "t.csv"], tmp_path, env)
    finally:
        holder.kill()
        holder.communicate()
    one_line_error(done, f"pid {holder.pid}", "DLRM_STUDY_KERNEL_WAIT_S")
    assert any("waiting" in line for line in done.stderr.splitlines()[:-1]), done.stderr
    assert not (tmp_path / "t.csv").exists()


# --- 2. write faults: one line, nothing lost ------------------------------------------------------------------------

# The real CLI (argv[3:]), with a fault made right after the first record or checkpoint it writes (argv[1]) in the
# folder argv[2]; the file's bytes at that moment are kept beside the folder, in `<folder>.before`. A disk that
# reports it is full: `full` patches fsync to say so, `filled` fills the small filesystem the folder is on (a file
# `filler` beside the folder; `small_disk`).
FAULTY = """
import errno, os, shutil, subprocess, sys
from pathlib import Path
from dlrm_study.cli.main import main
from dlrm_study.records import store
from dlrm_study.train import checkpoint

fault, folder = sys.argv[1], Path(sys.argv[2])
FILLER = "filler"
real_fsync = os.fsync

def full_fsync(fd):
    if os.readlink(f"/proc/self/fd/{fd}").startswith(str(folder.resolve())):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return real_fsync(fd)

def fill(path):
    with open(path, "wb", buffering=0) as filler:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while filler.write(bytes(size)):
                    pass
            except OSError as err:
                assert err.errno == errno.ENOSPC, err

def inject(path):
    shutil.copyfile(path, str(folder) + ".before")
    if fault == "frozen":  # root writes anywhere: only an immutable folder stops it
        made = os.getuid() == 0 and subprocess.run(["chattr", "+i", str(folder)]).returncode == 0
        made or os.chmod(folder, 0o555)
    elif fault == "full":
        os.fsync = full_fsync
    elif fault == "filled":  # the disk itself full: a file beside the folder takes every byte left
        fill(folder.parent / FILLER)
    elif fault == "vanished":
        shutil.rmtree(folder)

def once(real, at):
    def wrapped(*args, **kwargs):
        result = real(*args, **kwargs)
        if not os.path.exists(str(folder) + ".before"):
            inject(args[at])
        return result
    return wrapped

store.append_many = once(store.append_many, 0)  # (path, records)
checkpoint.save = once(checkpoint.save, 1)  # (run, path)
sys.exit(main(sys.argv[3:]))
"""


def faulty(fault: str, folder: Path, argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", FAULTY, fault, str(folder), *argv]
    return subprocess.run(command, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=GUARD)


def freezing_works(probe: Path) -> bool:
    """Whether FAULTY can freeze a folder here: chmod stops anyone but root; root needs `chattr +i`, which
    overlayfs and some tmpfs refuse (tried on `probe`, a folder beside the test's)."""
    if os.getuid() != 0:
        return True
    probe.mkdir()
    frozen = shutil.which("chattr") is not None and subprocess.run(["chattr", "+i", str(probe)]).returncode == 0
    if frozen:
        subprocess.run(["chattr", "-i", str(probe)])
    return frozen


def thaw(folder: Path) -> None:
    if os.getuid() == 0 and shutil.which("chattr"):
        subprocess.run(["chattr", "-i", str(folder)], capture_output=True)
    os.chmod(folder, 0o755)


def write_sweep(tmp_path: Path, repeats: int = 3, under: Path | None = None) -> Path:
    """The sweep's file in `tmp_path`, its records in the folder `out` under `under` (default `tmp_path`)."""
    (under or tmp_path).joinpath("out").mkdir(exist_ok=True)
    path = tmp_path / "s.yaml"
    path.write_text(SWEEP.format(repeats=repeats, out=(under or tmp_path) / "out" / "sweeps.csv"))
    return path


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A filesystem of the test's own, small enough to fill (a tmpfs), mounted at tmp_path/disk; skipped where
    the test may not mount one (the full disk is then only the patched fsync's)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.getuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a small filesystem needs root: the full disk is simulated only (a patched fsync)")
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(disk)], capture_output=True, text=True
    )
    if made.returncode:
        pytest.skip(f"no tmpfs can be mounted here ({made.stderr.strip()}): the full disk is simulated only")
    try:
        yield disk
    finally:
        if subprocess.run(["umount", str(disk)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(disk)], capture_output=True)


FULL = "No space left on device"


@pytest.mark.parametrize(
    ("fault", "cause"),
    [("frozen", "not permitted"), ("full", FULL), ("filled", FULL)],
    ids=["frozen", "full", "filled"],
)
def test_a_write_fault_mid_sweep_is_one_line_and_the_records_stay_whole(tmp_path, fault, cause, request):
    if fault == "frozen" and not freezing_works(tmp_path / "probe"):
        pytest.skip("root, and chattr +i is refused here (overlayfs or tmpfs): nothing can freeze a folder")
    under = request.getfixturevalue("small_disk") if fault == "filled" else tmp_path
    spec = write_sweep(tmp_path, under=under)
    out = under / "out" / "sweeps.csv"
    try:
        done = faulty(fault, out.parent, ["sweep", str(spec), "--no-progress"], tmp_path)
        written = out.read_bytes()
    finally:
        thaw(out.parent)
        (under / FILLER).unlink(missing_ok=True)
    cause = "Permission denied" if fault == "frozen" and os.getuid() != 0 else cause
    one_line_error(done, str(out), cause)
    assert written == (under / "out.before").read_bytes()  # the first record, byte for byte
    no_leftovers(out.parent)
    assert cli(["sweep", str(spec), "--no-progress"], tmp_path).returncode == 0  # the rest, measured once
    assert len(keys(out)) == 3 * CELLS and len(set(keys(out))) == 3 * CELLS


def test_a_folder_that_vanishes_mid_sweep_is_said_and_not_made_again(tmp_path):
    spec = write_sweep(tmp_path)
    out = tmp_path / "out" / "sweeps.csv"
    done = faulty("vanished", out.parent, ["sweep", str(spec), "--no-progress"], tmp_path)
    one_line_error(done, str(out), "vanished")
    assert not out.parent.exists()


@pytest.mark.parametrize("fault", ["full", "filled"])
def test_a_full_disk_at_a_checkpoint_keeps_the_last_one_whole(tmp_path, fault, request):
    where = request.getfixturevalue("small_disk") if fault == "filled" else tmp_path
    (where / "ck").mkdir()
    argv = ["train", "--steps", "40", "--checkpoint", "ck/run.pt", "--checkpoint-every", "5", "--no-progress"]
    done = faulty(fault, where / "ck", [*argv, "--out", "t.csv"], where)
    one_line_error(done, "ck/run.pt", FULL)
    assert (where / "ck" / "run.pt").read_bytes() == (where / "ck.before").read_bytes()
    assert ckpt.load(where / "ck" / "run.pt").step == 5
    no_leftovers(where / "ck")
    assert not (where / "t.csv").exists()


def valid_records(path: Path, n: int = 2) -> bytes:
    cfg = config.preset("tiny")
    store.append_many(path, [make_record("s", {"samples_per_s": 100.0 + r}, cfg, repeat=r) for r in range(n)])
    return path.read_bytes()


def test_an_immutable_records_file_is_one_line_and_byte_identical(tmp_path):
    records = tmp_path / "records.csv"
    before = valid_records(records)
    if os.getuid() == 0:  # root may write a read-only file: only an immutable one stops it
        if not shutil.which("chattr") or subprocess.run(["chattr", "+i", str(records)]).returncode:
            pytest.skip("root, and chattr +i is refused here (overlayfs or tmpfs): nothing can freeze a file")
    else:
        records.chmod(0o444)
    try:
        done = cli(["train", "--steps", "2", "--no-progress", "--out", "records.csv"], tmp_path)
    finally:
        if os.getuid() == 0:
            subprocess.run(["chattr", "-i", str(records)])
    one_line_error(done, "records.csv")
    assert records.read_bytes() == before
    no_leftovers(tmp_path)


# --- 3. corrupt records read back: named, counted, left out --------------------------------------------------------


def corrupt(path: Path) -> list[int]:
    """The issue's case: the file's last three measured records hold `fast`, `nan` and `-1` as samples/s, and a
    copy of the last record ends the file cut short, as a write killed mid-line would leave it; their lines."""
    header, rows = store.read_rows(path)
    measured = [i for i, row in enumerate(rows) if not row.get("error")][-3:]
    for i, value in zip(measured, ("fast", "nan", "-1"), strict=True):
        rows[i]["samples_per_s"] = value
    text = io.StringIO()
    csv.writer(text).writerows([header, *([row[h] for h in header] for row in rows)])
    path.write_text(text.getvalue() + text.getvalue().splitlines()[-1][:-100], newline="")
    return [i + 2 for i in measured] + [len(rows) + 2]


def test_corrupt_records_are_named_counted_and_left_out(tmp_path, capsys):
    path = tmp_path / "records.csv"
    valid_records(path, n=6)
    lines = corrupt(path)
    frame = store.load(path)
    assert list(frame["samples_per_s"]) == [100.0, 101.0, 102.0] and frame["samples_per_s"].dtype == float
    machine = frame["machine"].iloc[0]
    assert frame.attrs[store.LEFT_OUT] == {(machine, store.UNREADABLE): 4}
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and str(path) in said[0] and all(f"line {n}" in said[0] for n in lines), said
    store.load(path)
    assert capsys.readouterr().err == ""  # said once per file and content


def test_a_cell_whose_record_is_unreadable_is_measured_again(tmp_path):
    spec = sweep_plan.load(write_sweep(tmp_path, repeats=1))
    sweep.run(spec, progress=False, limit=1)
    out = Path(spec.out)
    text = out.read_text().splitlines(keepends=True)
    out.write_text(text[0] + text[1][: len(text[1]) // 2])  # its one record cut short
    assert sweep.run(spec, progress=False).ran == CELLS  # the cut record's cell too
    frame = store.load(out)
    assert len(frame) == CELLS and frame.attrs[store.LEFT_OUT]
    assert None in store.read_rows(out)[1][0].values()  # kept cut short as it was found, not filled in


def test_readme_over_corrupt_records_names_them_and_ends_cleanly(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(ROOT / "results", results, ignore=shutil.ignore_patterns("notebooks", "figures"))
    shutil.copy(ROOT / "README.md", tmp_path / "R.md")
    lines = corrupt(results / "sweeps.csv")
    done = cli(["readme", "--results", str(results), "--readme", "R.md"], tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    said = [line for line in done.stderr.splitlines() if "sweeps.csv" in line]
    assert len(said) == 1 and all(f"line {n}" in said[0] for n in lines), done.stderr


# --- 4. kill, then resume ------------------------------------------------------------------------------------------


# The real CLI (argv[1:]) that waits, right after the first record or checkpoint it writes, for the signal that
# stops it: the test's signal always finds the run mid-way (a short run could otherwise end between two polls).
PAUSED = f"""
import sys, time
from dlrm_study.cli.main import main
from dlrm_study.records import store
from dlrm_study.train import checkpoint

def then_wait(real):
    def wrapped(*args, **kwargs):
        result = real(*args, **kwargs)
        time.sleep({GUARD})
        return result
    return wrapped

store.append_many = then_wait(store.append_many)  # (store.append too)
checkpoint.save = then_wait(checkpoint.save)
sys.exit(main(sys.argv[1:]))
"""


def stopped_at_first(argv: list[str], cwd: Path, ready: Callable[[], bool], what: str, sig) -> tuple[int, str]:
    """The run stopped by `sig` once `ready` (its first record or checkpoint) holds; its exit code and stderr."""
    proc = start([sys.executable, "-c", PAUSED, *argv], cwd)
    wait_for(ready, proc, what)
    return stop(proc, sig)


def check_stopped(code: int, err: str, sig: signal.Signals, folder: Path) -> None:
    """SIGKILL: killed. SIGINT: one line, exit 130, nothing half-written left behind."""
    if sig == signal.SIGINT:
        assert code == 130 and err.strip().splitlines()[-1] == "dlrm-study: interrupted", err[-3000:]
        assert "Traceback" not in err, err[-3000:]
    else:
        assert code == -signal.SIGKILL
    if sig == signal.SIGINT:
        no_leftovers(folder)


SIGNALS = pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["kill", "interrupt"])


@SIGNALS
def test_a_stopped_sweep_resumes_measuring_each_cell_once(tmp_path, sig):
    spec = write_sweep(tmp_path)
    out = tmp_path / "out" / "sweeps.csv"
    argv = ["sweep", str(spec), "--no-progress"]
    code, err = stopped_at_first(argv, tmp_path, lambda: out.exists() and rows(out) >= 1, "a first record", sig)
    check_stopped(code, err, sig, out.parent)
    parses_whole(out)
    assert len(set(keys(out))) == len(keys(out)) <= 3 * CELLS
    done = cli(argv, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(keys(out)) == 3 * CELLS and len(set(keys(out))) == 3 * CELLS
    parses_whole(out)


@SIGNALS
def test_a_stopped_compare_leaves_whole_records_and_measures_anew(tmp_path, sig):
    """A compare pairs its variants within one run: run again, it measures every cell anew, in a run of its own."""
    out = tmp_path / "bench.csv"
    argv = ["compare", "--configs", "tiny", "--variants", "reference,optimized-fp32", "--repeats", "3", "--steps", "2"]
    argv += ["--warmup", "1", "--roofline", "quick", "--no-progress", "--out", str(out)]
    code, err = stopped_at_first(argv, tmp_path, lambda: out.exists() and rows(out) >= 1, "a first record", sig)
    check_stopped(code, err, sig, tmp_path)
    parses_whole(out)
    stopped = rows(out)
    done = cli(argv, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    frame = store.load(out)
    assert len(frame) == stopped + 6 and frame["run_id"].nunique() == 2
    for _, run in frame.groupby("run_id"):  # each run measured each of its cells once
        assert not run.duplicated(["config_hash", "variant", "repeat"]).any()
    assert frame.groupby("run_id").size().max() == 6
    parses_whole(out)


@SIGNALS
def test_a_stopped_checkpointed_training_resumes_to_one_record(tmp_path, sig):
    ck, out = tmp_path / "ck.pt", tmp_path / "t.csv"
    steps = 40  # (the run waits for its signal after its first checkpoint: it need not be long)
    argv = ["train", "--steps", str(steps), "--checkpoint", "ck.pt", "--checkpoint-every", "5", "--no-progress"]
    argv += ["--out", "t.csv"]
    code, err = stopped_at_first(argv, tmp_path, ck.exists, "a first checkpoint", sig)
    check_stopped(code, err, sig, tmp_path)
    assert not out.exists()  # stopped before its end: no record
    at = ckpt.load(ck).step
    assert at % 5 == 0 and 5 <= at < steps
    done = cli(["train", "--resume", "ck.pt", *argv[1:]], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resumed ck.pt at step {at}" in done.stderr
    frame = store.load(out)
    assert len(frame) == 1 and frame["steps"].iloc[0] == steps
    assert ckpt.load(ck).step == steps
    no_leftovers(tmp_path)


def test_a_checkpoint_write_interrupted_leaves_the_old_one(tmp_path, tiny, monkeypatch):
    run = build(tiny)
    path = tmp_path / "run.pt"
    ckpt.save(run, path)
    before = path.read_bytes()
    run.step = 7

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ckpt.torch, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ckpt.save(run, path)
    assert path.read_bytes() == before
    no_leftovers(tmp_path)


def test_a_checkpoint_write_killed_mid_way_leaves_nothing_after_the_next_save(tmp_path, tiny):
    """kill -9 mid-write leaves the writer's temporary file; the next save of that checkpoint removes it,
    and never a live writer's."""
    run = build(tiny)
    path = tmp_path / "run.pt"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead, live = tmp_path / f".run.pt.{gone.pid}.tmp", tmp_path / f".run.pt.{os.getppid()}.tmp"
    dead.write_bytes(b"half a checkpoint")
    live.write_bytes(b"being written")
    ckpt.save(run, path)
    assert not dead.exists() and live.exists()
    live.unlink()
    no_leftovers(tmp_path)
