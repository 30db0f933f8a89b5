"""A run is a process: every run of every timed study measured in a fresh interpreter of its own.

Runs of one process share its interpreter, allocator, page cache and kernel builds, so they are not
independent: the verdicts' intervals treat runs as clusters (`analysis.clusters`), and that is honest
only when each run starts from nothing. `measure` launches one process per (study, run slot), the
slots in turn across the studies (slot 1 of every study, then slot 2, ...), so a study's runs are
also spread in time. Each child measures its slot alone (`context.one_run`) under its own run id and
variant order, and says what it measured in one line. A study resumes as before: a slot already
recorded at this code measures nothing.

The CPU loops' claim runs follow the sequential design (docs/claims.md, "Design and power"): after the runs of each
look (`plans.profiles.LOOKS`) the caller's `look` judges the claims they feed, and once every one has its word
no further claim runs are measured (`make reproduce` passes `claims.looks.look`; run alone, this module measures
every slot up to the cap).

    python -m dlrm_study.studies.runs --profile quick              # every study, every run (make reproduce)
    python -m dlrm_study.studies.runs --study cpu-loops --slot 3   # one run of one study, in this process
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dlrm_study import settings
from dlrm_study.errors import UsageError
from dlrm_study.measure import context, sweep
from dlrm_study.plans import cpu, profiles
from dlrm_study.records import provenance
from dlrm_study.records.machine import machine_key
from dlrm_study.studies import baseline, convergence, guard, placement, scaling, sensitivity
from dlrm_study.studies.bf16_rounding import run_rounding

MODULE = "dlrm_study.studies.runs"  # what a child runs (`python -m`), the name even where this runs as __main__


@dataclass(frozen=True)
class Study:
    """A study `make reproduce` measures: its runs (slots) and how one slot is measured in this process."""

    name: str
    runs: Callable[[str], int]  # the profile's number of run slots (for claim runs: the last look)
    measure: Callable[[str, Path], object]  # measures the slot `context.one_run` names (what it did, printable)
    sequential: bool = False  # its later slots are claim runs, judged at the looks (`Look`)


def trained(profile: str, out: Path) -> str:
    """The trained studies (convergence, the rounding probe): seeds, not timed repeats, so one slot; each resumes
    by its own keys."""
    convergence.run_convergence(profile, out)
    run_rounding(profile, out)
    return "trained what was not recorded"


def accuracy(profile: str, out: Path) -> str:
    """S3's accuracy seeds: one slot, resumed by their own keys."""
    convergence.run_accuracy(profile, out)
    return "trained what was not recorded"


def cached(profile: str, out: Path) -> str:
    placement.measure_cache(profile, out)  # hit rates are counted, not timed: one slot
    return "counted what was not recorded"


def old_stack(profile: str, out: Path) -> object:
    """The 2020 baseline where `make baseline-2020` built its environment (else nothing: it is not built here)."""
    if not baseline.PYTHON_2020.exists():
        return f"not measured: no {profiles.shown(baseline.PYTHON_2020)} (make baseline-2020)"
    return baseline.run(profile, out, progress=False)


def one(_: str) -> int:
    return 1


def descriptive(profile: str) -> int:
    return profiles.RUNS[profile]


STUDIES = (
    Study("cpu-loops", lambda p: max(profiles.RUNS[p], profiles.CLAIM_RUNS[p]),
          lambda p, out: sweep.run(cpu.cpu_loops(p, out), progress=False), sequential=True),
    Study("ablation", descriptive, lambda p, out: sweep.run(cpu.ablation(p, out), progress=False)),
    Study("baseline-2020", descriptive, old_stack),
    Study("sensitivity", descriptive, lambda p, out: "; ".join(sensitivity.measure(p, out))),
    Study("remote", descriptive, placement.measure_remote),
    Study("scaling", descriptive, lambda p, out: scaling.measure(p, out, progress=False)),
    Study("cache", one, cached),
    Study("accuracy", one, accuracy),
    Study("trained", one, trained),
)  # fmt: skip
CLAIM_STUDIES = ("cpu-loops", "accuracy")  # what S2's and S3's rules read: a fresh measurement's studies
BY_NAME = {s.name: s for s in STUDIES}


def chosen(names: Sequence[str] | None) -> list[Study]:
    """The studies named (all where none are), refusing an unknown name in one line."""
    if not names:
        return list(STUDIES)
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise UsageError(f"unknown study {unknown[0]!r} (choose from {', '.join(BY_NAME)})")
    return [BY_NAME[n] for n in names]


def order(studies: Sequence[Study], profile: str) -> list[tuple[int, Study]]:
    """(slot, study) in launch order: slot 1 of every study, then slot 2 of those that have one, ..."""
    most = max((s.runs(profile) for s in studies), default=0)
    return [(slot, s) for slot in range(1, most + 1) for s in studies if slot <= s.runs(profile)]


# After a look's runs: (whether the claims they feed all have their word, what each says), from the records in `out`.
Look = Callable[[Path, str, str], tuple[bool, str]]


def measure(
    profile: str, out: Path, names: Sequence[str] | None = None, python: str = sys.executable, look: Look | None = None
) -> int:
    """Every run of the studies, one process each; a line per process. A run that dies is said and the rest go
    on (it resumes next time); a refusal (exit 2: bad input) stops them all. A sequential study's runs stop at the
    first look (`plans.profiles.LOOKS`) where `look` says its claims have their words. The processes that failed."""
    plan = order(chosen(names), profile)
    studies = list(dict.fromkeys(study for _, study in plan))
    # The log names where and at what it ran: docs/reproduce.md's run times are read from kept logs.
    # One invocation: its processes' records name it, so a verdict can leave it out whole (`claims.claim`).
    invocation = settings.current().invocation or f"reproduce-{provenance.new_run_id()}"
    print(f"machine: {machine_key()}\ncommit: {provenance.git_commit()}\ndate: {datetime.date.today()}\n"
          f"invocation: {invocation}", flush=True)  # fmt: skip
    print(f"{len(plan)} processes: " + ", ".join(f"{s.name} {count(s.runs(profile), 'run')}" for s in studies),
          flush=True)  # fmt: skip
    failed, contended, spent, settled = 0, 0, dict.fromkeys((s.name for s in studies), 0.0), set()
    for i, (slot, study) in enumerate(plan, 1):
        if study.name in settled:
            continue
        command = [python, "-m", MODULE, "--profile", profile, "--out", str(out), "--study", study.name,
                   "--slot", str(slot)]  # fmt: skip
        start, before = time.monotonic(), guard.condition()
        # each measurement's line on the console (stderr); every record names this invocation
        lines = {**os.environ, settings.PROGRESS_LINES: "1", settings.INVOCATION: invocation}
        code, stdout, pid = launch(command, lines)
        spent[study.name] += time.monotonic() - start
        took = f"{time.monotonic() - start:.0f} s"
        said = heard(stdout)
        head = f"runs {i}/{len(plan)}: {study.name} run {slot}/{study.runs(profile)}"
        if code == 2:
            raise UsageError(f"{head}: refused ({said or 'exit 2'})")
        if code:
            failed += 1
            print(f"{head}: the process failed (exit {code}, {took}); it resumes next time", flush=True)
            continue
        row = guard.record(out, machine_key(), invocation, study.name, slot, pid, before, guard.condition(False))
        contended += bool(row["contended"])
        caught = f"; load guard: contended ({row['contended']})" if row["contended"] else ""
        print(f"{head}: {said}{caught} ({took})", flush=True)
        if look and study.sequential and slot in profiles.LOOKS and slot < study.runs(profile):
            done_here, words = look(out, profile, machine_key())
            print(f"look at {count(slot, 'run')} of {study.name}: {words}"
                  + ("; every claim has its word: no more claim runs" if done_here else
                     f"; on to {profiles.next_look(slot)} runs"), flush=True)  # fmt: skip
            if done_here:
                settled.add(study.name)
    print("time per study: " + ", ".join(f"{name} {minutes(s)}" for name, s in spent.items()), flush=True)
    caught_line = f"load guard: {contended} of the runs measured under contention (results/{guard.ROWS})"
    print(caught_line + "; their records counted, not judged", flush=True)
    return failed


def launch(command: list[str], env: dict[str, str]) -> tuple[int, str, int]:
    """One run's process: (its exit code, what it printed, its process id: its records' `process_id`)."""
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    stdout, _ = child.communicate()
    return child.returncode, stdout, child.pid


def count(n: int, what: str) -> str:
    return f"{n} {what}{'s' * (n != 1)}"


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


TALLY = "tally: "  # a child's last line: what it measured and reused (`context.RunContext`), added to this process's


def heard(stdout: str) -> str:
    """A child's line of what it measured; its tally added to this process's (a notebook's footer counts it)."""
    lines = stdout.strip().splitlines()
    if lines and lines[-1].startswith(TALLY):
        context.current().tally(**json.loads(lines.pop().removeprefix(TALLY)))
    return lines[-1] if lines else ""


def measure_slot(study: Study, profile: str, out: Path, slot: int) -> object:
    """One run of one study, in this process."""
    if not 1 <= slot <= study.runs(profile):
        raise UsageError(f"{study.name} has runs 1..{study.runs(profile)} in the {profile} profile, not {slot}")
    with context.one_run(slot):
        return study.measure(profile, out)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dlrm_study.studies.runs", description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default=None, help="smoke | quick | full (default: $DLRM_STUDY_PROFILE, quick)")
    parser.add_argument("--out", default=None, help="results folder (default: the repository's results/)")
    parser.add_argument("--study", action="append", help=f"one of {', '.join(BY_NAME)} (repeatable; default all)")
    parser.add_argument("--slot", type=int, default=None, help="measure this run of one study, in this process")
    args = parser.parse_args(argv)
    try:
        profile = profiles.profile(args.profile)
        out = profiles.results_dir(profile, args.out)
        if args.slot is None:
            sys.exit(1 if measure(profile, out, args.study) else 0)
        if not args.study or len(args.study) != 1:
            raise UsageError("--slot measures one run of one study: name it with --study")
        print(measure_slot(chosen(args.study)[0], profile, out, args.slot))
        state = context.current()
        print(TALLY + json.dumps({"measured": state.measured, "reused": state.reused}))
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
