"""Phases run each in its own process under a watchdog, their records mirrored into an output folder.

One GPU lending is one call of a few minutes whose output folder is all that comes back. So:

- a phase is a child process (`run_phase`): whatever kills it (an exception, a dead CUDA context, a
  hang the watchdog ends at its limit) ends that phase only, and the next phase starts afresh;
- the records are written in a work folder (`records.store` keeps its `.lock` files beside them),
  and `mirror` copies every records CSV into the output folder atomically (a temporary file, then
  `os.replace`), every `MIRROR_EVERY_S` seconds while a phase runs and after it ends: the output
  folder holds complete files only, and no lock files;
- the log is appended to as the phases print, so a call cut short still brings it back.
"""

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MIRROR_EVERY_S = 5.0  # while a phase runs: at most this many seconds of its records not yet in the output folder
POLL_S = 0.2
CONTEXT_LOST = 3  # a phase's exit code where its CUDA context died (`runner.DeviceLost`)
PARTIAL = ".partial"  # a mirrored file being written; os.replace'd into place
MIN_PHASE_S = 5.0  # a phase is not started with less of the budget left


@dataclass(frozen=True)
class Step:
    """A phase to run: its name, its command line given its watchdog limit, and its limit given the budget left."""

    name: str
    argv: Callable[[float], list[str]]
    limit_s: Callable[[float], float]


def run_phases(
    steps: list[Step], work: Path, out: Path, log: Path, end: float, after: Callable[[str], None]
) -> list["Outcome"]:
    """Each step in order, in a process of its own, until `end` (time.monotonic); `after(line)` once each has
    ended (or was not started), so the caller rewrites its summary. Whatever a phase does, the next one runs."""
    outcomes = []
    for step in steps:
        left = end - time.monotonic()
        if left < MIN_PHASE_S:
            line = f"phase {step.name}: not started ({left:.0f} s left of the budget; a later call resumes it)"
        else:
            limit = step.limit_s(left)
            outcome = run_phase(step.name, step.argv(limit), limit, log, work, out)
            outcomes.append(outcome)
            line = outcome.line()
        say(log, line)
        after(line)
    return outcomes


def say(log: Path, *lines: str) -> None:
    """Print the lines and append them to the log."""
    text = "\n".join(lines)
    print(text, flush=True)
    with open(log, "a") as sink:
        sink.write(text + "\n")


@dataclass(frozen=True)
class Outcome:
    """How a phase ended: `how` is ok, failed (exit code), context lost, or killed by the watchdog."""

    name: str
    how: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.how == "ok"

    def line(self) -> str:
        return f"phase {self.name}: {self.how} after {self.seconds:.0f} s"


def run_phase(name: str, argv: list[str], limit_s: float, log: Path, work: Path, out: Path) -> Outcome:
    """Run `argv` as phase `name`, its output appended to `log`, killed (its whole process group) after
    `limit_s`; `work`'s records mirrored into `out` while it runs and once it has ended."""
    start = time.monotonic()
    with open(log, "a") as sink:
        sink.write(f"--- phase {name} (watchdog {limit_s:.0f} s)\n")
        sink.flush()
        child = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
        mirrored = start
        try:
            while child.poll() is None:
                now = time.monotonic()
                if now - start > limit_s:
                    stop(child)
                    mirror(work, out)
                    return Outcome(name, f"killed by the watchdog at {limit_s:.0f} s", now - start)
                if now - mirrored >= MIRROR_EVERY_S:
                    mirror(work, out)
                    mirrored = now
                time.sleep(POLL_S)
        finally:  # this process told to end (SystemExit on SIGTERM, `end_on_sigterm`): its phase ends with it
            if child.poll() is None:
                stop(child)
                mirror(work, out)
    mirror(work, out)
    seconds = time.monotonic() - start
    if child.returncode == 0:
        return Outcome(name, "ok", seconds)
    if child.returncode == CONTEXT_LOST:
        return Outcome(name, "CUDA context lost: the phase ended, the next starts a fresh process", seconds)
    return Outcome(name, f"FAILED (exit {child.returncode})", seconds)


def end_on_sigterm() -> None:
    """SIGTERM (the call's `timeout`) raises SystemExit here, so a running phase is stopped and mirrored first."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def stop(child: subprocess.Popen) -> None:
    """End the phase's process group: SIGTERM, then SIGKILL a few seconds later."""
    for sig, wait_s in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.wait(wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def mirror(work: Path, out: Path) -> list[str]:
    """Copy every records CSV of `work` (top level) into `out` atomically, where changed; the names copied."""
    copied = []
    for path in sorted(work.glob("*.csv")):
        target = out / path.name
        if target.exists() and target.stat().st_size == path.stat().st_size and same(path, target):
            continue
        write_atomic(target, path.read_bytes())
        copied.append(path.name)
    return copied


def same(a: Path, b: Path) -> bool:
    return a.read_bytes() == b.read_bytes()


def write_atomic(path: Path, data: bytes | str) -> None:
    """`path` holds `data` whole, or its old content: never a part (a temporary file, then os.replace)."""
    tmp = path.with_name(path.name + PARTIAL)
    with open(tmp, "wb") as sink:
        sink.write(data.encode() if isinstance(data, str) else data)
        sink.flush()
        os.fsync(sink.fileno())
    os.replace(tmp, path)


def seed(work: Path, sources: list[Path]) -> list[str]:
    """Copy the records CSVs of earlier calls' output folders into `work`, to resume from (the last one
    found of each name wins); stale temporary files are removed. The names copied."""
    work.mkdir(parents=True, exist_ok=True)
    copied = []
    for source in sources:
        for stale in source.glob(f"*{PARTIAL}") if source.is_dir() else []:
            stale.unlink(missing_ok=True)
        for path in sorted(source.glob("*.csv")) if source.is_dir() else []:
            shutil.copyfile(path, work / path.name)
            copied.append(str(path))
    return copied
