"""The switches a process takes from its environment, each declared once: its variable, type, default and meaning.

`current()` parses them all into a frozen `Settings`; code asks it, never `os.environ`, for a `DLRM_STUDY_*`
value. Most switches are handed from a parent to the processes it starts (a run's ranks, a render's kernel
processes, a lending's phases), which is why they are environment variables and not arguments.

`current()` parses on every call rather than once: a process changes its environment only to hand a switch to
its children, and tests set switches per test, so a cached copy could only ever be stale. Parsing a dozen
variables costs microseconds. A value that does not parse is bad input: one line naming the variable
(`UsageError`), whichever switch the caller asked for.

One switch is read once per process: the fault tests' hook (`distributed.launch.planned_fault`), which every
step of a distributed run asks, and which a rank is given when it starts.
"""

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path

from dlrm_study.errors import UsageError

PROFILE = "DLRM_STUDY_PROFILE"  # smoke | quick | full: the studies' size where no --profile is given
KERNELS = "DLRM_STUDY_KERNELS"  # auto | torch: torch runs the fused kernels' PyTorch twins (no C++ build)
KERNEL_WAIT_S = "DLRM_STUDY_KERNEL_WAIT_S"  # seconds to wait for another process's live kernel build
COMMIT = "DLRM_STUDY_COMMIT"  # the commit records name, where the tree is a copy without .git
INVOCATION = "DLRM_STUDY_INVOCATION"  # one command that launches several processes: their records pair
TRACEBACK = "DLRM_STUDY_TRACEBACK"  # set: an unexpected failure shows its traceback, not one line
FAULT = "DLRM_STUDY_FAULT"  # RANK:STEP:kill|hang: that rank dies or hangs at that step (fault tests)
LOAD_MAX = "DLRM_STUDY_LOAD_MAX"  # runnable processes beside the measuring one allowed (inf: any)
LIMITS_CACHE = "DLRM_STUDY_LIMITS_CACHE"  # the machine limits' cache file, or off
VERDICT_CACHE = "DLRM_STUDY_VERDICT_CACHE"  # the folder judged records are kept in between processes, or off
GRAPH_PROFILER = "DLRM_STUDY_GRAPH_PROFILER"  # init | attach | off | none: how the GPU profiler meets CUDA graphs
PROGRESS_LINES = "DLRM_STUDY_PROGRESS_LINES"  # set: each measurement prints a line on stderr, not a bar
VARIABLES = (PROFILE, KERNELS, KERNEL_WAIT_S, COMMIT, INVOCATION, TRACEBACK, FAULT, LOAD_MAX, LIMITS_CACHE,
             VERDICT_CACHE, GRAPH_PROFILER, PROGRESS_LINES)  # fmt: skip

KERNEL_CHOICES = ("auto", "torch")
GRAPH_PROFILER_CHOICES = ("init", "attach", "off", "none")
FAULT_KINDS = ("kill", "hang")


@dataclasses.dataclass(frozen=True)
class Fault:
    """An injected fault: `rank` dies (kill) or hangs (hang) when it reaches `step`."""

    rank: int
    step: int
    kind: str


@dataclasses.dataclass(frozen=True)
class Settings:
    """Every switch's value; None or "" where the variable is unset (the reader's own default applies)."""

    profile: str = ""
    kernels: str = "auto"
    kernel_wait_s: float | None = None
    commit: str = ""
    invocation: str = ""
    traceback: bool = False
    fault: Fault | None = None
    load_max: float | None = None
    limits_cache: str = ""
    verdict_cache: str = ""
    graph_profiler: str = "init"
    progress_lines: bool = False


def current(environ: Mapping[str, str] | None = None) -> Settings:
    """The switches of `environ` (this process's environment unless given)."""
    env = os.environ if environ is None else environ
    given = {name: text for name in VARIABLES if (text := env.get(name, ""))}
    return Settings(
        profile=given.get(PROFILE, ""),
        kernels=choice(given, KERNELS, KERNEL_CHOICES),
        kernel_wait_s=seconds(given, KERNEL_WAIT_S),
        commit=given.get(COMMIT, ""),
        invocation=given.get(INVOCATION, ""),
        traceback=TRACEBACK in given,
        fault=fault(given),
        load_max=count(given, LOAD_MAX),
        limits_cache=given.get(LIMITS_CACHE, ""),
        verdict_cache=given.get(VERDICT_CACHE, ""),
        graph_profiler=choice(given, GRAPH_PROFILER, GRAPH_PROFILER_CHOICES),
        progress_lines=PROGRESS_LINES in given,
    )


def cache_path(where: str, name: str) -> Path | None:
    """Where a cache switch's value (`limits_cache`, `verdict_cache`) puts its cache: None for `off`, the path
    given, else `name` in dlrm-study/ under the user's cache folder ($XDG_CACHE_HOME, else ~/.cache)."""
    if where == "off":
        return None
    if where:
        return Path(where)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dlrm-study" / name


def choice(given: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    """One of `choices` (the first where unset)."""
    text = given.get(name, choices[0])
    if text not in choices:
        raise UsageError(f"{name} must be one of {', '.join(choices)}, got {text!r}")
    return text


def seconds(given: Mapping[str, str], name: str) -> float | None:
    """A finite number of seconds >= 0, or None where unset."""
    value = number(given, name)
    if value is not None and not 0 <= value < float("inf"):
        raise UsageError(f"{name} must be a number of seconds, got {given[name]!r}")
    return value


def count(given: Mapping[str, str], name: str) -> float | None:
    """A number >= 0 (inf allowed), or None where unset."""
    value = number(given, name)
    if value is not None and not value >= 0:
        raise UsageError(f"{name} must be a number of processes >= 0 (or inf), got {given[name]!r}")
    return value


def number(given: Mapping[str, str], name: str) -> float | None:
    if name not in given:
        return None
    try:
        return float(given[name])
    except ValueError:
        return float("nan")  # refused by the caller's range, in its own words


def fault(given: Mapping[str, str]) -> Fault | None:
    """FAULT's RANK:STEP:KIND, or None where unset."""
    if FAULT not in given:
        return None
    parts = given[FAULT].split(":")
    if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit() or parts[2] not in FAULT_KINDS:
        raise UsageError(f"{FAULT} must be RANK:STEP:kill or RANK:STEP:hang, got {given[FAULT]!r}")
    return Fault(int(parts[0]), int(parts[1]), parts[2])
