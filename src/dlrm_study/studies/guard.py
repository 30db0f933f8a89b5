"""The load guard: the host's condition before and after each run, and whether the run was measured under contention.

A run on a shared 2-core machine measures the code and whatever else the machine is doing. The guard reads, around
each run's process (`studies.runs`):
- the CPU time the machine spent outside the run (`/proc/stat`'s busy time less the run's own, from its rusage) and
  the time the hypervisor stole, as shares of the run's wall time on every CPU;
- a fixed calibration probe, timed before and after (the same arithmetic and memory traffic every time), against the
  tenth fastest in a hundred this machine has given (its quiet time, `quiet_time`).

A run is contended when others took more than OTHERS_MAX of the CPUs, the hypervisor stole more than STEAL_MAX, or
the probe ran PROBE_MAX times slower than its quiet time. Each run is one row of results/guard/runs.csv (`ROWS`),
contended or not; the verdicts leave a contended run's records out, counted under its reason
(`analysis.contention`), and the sequential claim runs go on to the next look, so the run is replaced by the next.
"""

import dataclasses
import datetime
import os
import resource
import time
from pathlib import Path

import numpy as np
import pandas as pd

from dlrm_study.records import columns as col
from dlrm_study.records import store

OTHERS_MAX = 0.10  # of the CPUs' time, used by other processes while the run measured
STEAL_MAX = 0.05  # of the CPUs' time, taken by the hypervisor
PROBE_MAX = 1.30  # the probe's time over its quiet time
QUIET_QUANTILE = 0.10  # a machine's quiet probe: this quantile of the probes it has given (`quiet_time`)
QUIET_FROM = 10  # probes it must have given for a quantile; fewer: the fastest
ROWS = store.GUARD_ROWS  # one row per run process, under the results folder
PROBE_SIZE = 1024  # the probe's matrices (float64): about 0.1 s of arithmetic and 25 MB of traffic a round
PROBE_ROUNDS = 10  # the fastest of them is the probe's time: about a second in all


@dataclasses.dataclass(frozen=True)
class Condition:
    """The host at one moment: wall clock, the CPUs' busy and stolen ticks, children's CPU seconds, the probe."""

    wall: float
    busy_ticks: int
    steal_ticks: int
    total_ticks: int
    children_cpu_s: float
    probe_s: float


def cpu_ticks(stat: str = "/proc/stat") -> tuple[int, int, int]:
    """(busy, steal, total) ticks of every CPU since boot: busy is user, nice, system, irq and softirq."""
    with open(stat) as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return user + nice + system + irq + softirq, steal, sum(fields[:8])


def probe(rounds: int = PROBE_ROUNDS) -> float:
    """The fastest of `rounds` timings of a fixed piece of work: a matrix product and a copy of its result."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((PROBE_SIZE, PROBE_SIZE)), rng.standard_normal((PROBE_SIZE, PROBE_SIZE))
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        c = a @ b
        np.copyto(a, c / np.abs(c).max())
        best = min(best, time.perf_counter() - start)
    return best


def condition(before: bool = True) -> Condition:
    """The host now; the probe timed outside the run's interval (first before it, last after it), so its own CPU
    time is not counted as another process's."""
    timed = probe() if before else 0.0
    busy, steal, total = cpu_ticks()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    now = Condition(time.monotonic(), busy, steal, total, children.ru_utime + children.ru_stime, timed)
    return now if before else dataclasses.replace(now, probe_s=probe())


def shares(before: Condition, after: Condition, cpus: int | None = None) -> tuple[float, float]:
    """(others, steal): the CPUs' time between the two moments used by other processes than the run's (busy less
    the children's CPU time), and stolen by the hypervisor, as shares of the wall time on every CPU."""
    tick = os.sysconf("SC_CLK_TCK")
    capacity = max(after.wall - before.wall, 1e-9) * (cpus or os.cpu_count() or 1)
    busy = (after.busy_ticks - before.busy_ticks) / tick
    own = after.children_cpu_s - before.children_cpu_s
    steal = (after.steal_ticks - before.steal_ticks) / tick
    return max(0.0, busy - own) / capacity, steal / capacity


def verdict(others: float, steal: float, probe_s: float, quiet_s: float) -> str:
    """Why a run was contended, or "" where it was not."""
    reasons = []
    if others > OTHERS_MAX:
        reasons.append(f"other processes used {others:.0%} of the CPUs")
    if steal > STEAL_MAX:
        reasons.append(f"the hypervisor stole {steal:.0%}")
    if quiet_s > 0 and probe_s > PROBE_MAX * quiet_s:
        reasons.append(f"the probe ran {probe_s / quiet_s:.2f}x its quiet time")
    return "; ".join(reasons)


def quiet_time(out: Path, machine: str, now: float) -> float:
    """This machine's quiet probe: the QUIET_QUANTILE of the probes it has given (its recorded runs' and this one's),
    the fastest where it has given fewer than QUIET_FROM. Not the fastest ever: one probe in a moment when the
    host's other tenants were idle (0.0164 s on the AMX Xeon, against a tenth of its 88 probes at 0.0229 s and their
    median at 0.0263 s) would call every later run contended."""
    path = out / ROWS
    if not path.exists():
        return now
    rows = store.load(path)
    mine = rows[rows[col.MACHINE] == machine] if col.MACHINE in rows else rows.iloc[0:0]
    known = pd.concat([mine["probe_before_s"], mine["probe_after_s"]]).astype(float) if len(mine) else pd.Series()
    probes = [now, *known.dropna()]
    return float(min(probes) if len(probes) < QUIET_FROM else np.quantile(probes, QUIET_QUANTILE))


def record(out: Path, machine: str, invocation: str, study: str, slot: int, pid: int, before: Condition,
           after: Condition) -> dict:  # fmt: skip
    """The run's row, appended to results/guard.csv: its condition before and after, and whether it was contended."""
    others, steal = shares(before, after)
    slower = max(before.probe_s, after.probe_s)
    quiet = quiet_time(out, machine, min(before.probe_s, after.probe_s))
    row = {
        col.MACHINE: machine,
        col.INVOCATION: invocation,
        col.STUDY: study,
        col.RUN_SLOT: slot,
        col.PROCESS_ID: pid,
        col.TIMESTAMP: datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "wall_s": round(after.wall - before.wall, 1),
        "others_share": round(others, 4),
        "steal_share": round(steal, 4),
        "probe_before_s": round(before.probe_s, 5),
        "probe_after_s": round(after.probe_s, 5),
        "probe_quiet_s": round(quiet, 5),
        "contended": verdict(others, steal, slower, quiet),
    }
    store.append(out / ROWS, row)
    return row
