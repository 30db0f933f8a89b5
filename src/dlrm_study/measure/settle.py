"""Warm-up until the step time settles, so every timed repeat counts.

A variant's first steps in a process pay first-use costs: kernels built or dispatched for the first
time, tables' pages touched, the allocator's pools filled. A fixed count of warm-up steps leaves part of
them in the first timed repeat (repeat 0 read 17% faster bf16/fp32 than later repeats over 11 run x
preset cells), and dropping repeat 0 cost a third of every run. So each measurement steps untimed
until the median of its last `WINDOW` steps is no faster than the `WINDOW` before it, by more than
`TOLERANCE`: the time has stopped falling. At least `least` steps (the protocol's warm-up), at most
`MOST` (a step whose time never settles, a noisy machine's, is timed all the same: the record says how
many warm-up steps it took).
"""

import statistics
from collections.abc import Callable

WINDOW = 3  # steps per median: one slow step does not end or prolong the warm-up
TOLERANCE = 0.05  # the last window this much faster than the one before: still warming
MOST = 30  # warm-up steps at most, whatever the times do


def settled(step_ms: list[float], window: int = WINDOW, tolerance: float = TOLERANCE) -> bool:
    """Whether the last `window` steps are no faster than the `window` before them, by more than `tolerance`."""
    if len(step_ms) < 2 * window:
        return False
    before = statistics.median(step_ms[-2 * window : -window])
    last = statistics.median(step_ms[-window:])
    return last >= before * (1 - tolerance)


def warm_up(step: Callable[[], float], least: int, most: int = MOST) -> int:
    """Untimed steps (`step` returns its milliseconds) until they settle: how many were made."""
    most = max(most, least)
    made: list[float] = []
    while len(made) < most:
        made.append(step())
        if len(made) >= least and settled(made):
            break
    return len(made)
