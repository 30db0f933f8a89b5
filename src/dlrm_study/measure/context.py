"""What a measuring process holds between its measurements, in one object (`RunContext`).

A run is a process (`studies.runs`): a fresh interpreter, allocator and page cache, with its own run id and
variant order. What the process learns while it measures lives exactly as long: the run slot it was started
for, how many measurements it made and reused, the machine limits it measured, the GPU points it profiled and
the kernels that fell back, and how its GPU profiler meets CUDA graphs. They were seven module globals in four
modules; here they are one context, so a test starts a process's state afresh by replacing one object, and a
reader finds everything a process carries from one measurement to the next in one place.

The run id is not here: records name it (`records.provenance`), a floor below, and the runner draws one per
slot (`runner.run_order`).
"""

import contextlib
import dataclasses
from collections.abc import Iterator

from dlrm_study.errors import UsageError


@dataclasses.dataclass
class RunContext:
    """One measuring process's state (see the module's docstring)."""

    slot: int | None = None  # the run this process measures (`one_run`); None: every slot, one after the other
    measured: int = 0  # measurements made by this process (a rendered notebook reports them) ...
    reused: int = 0  # ... and records of earlier runs reused instead
    limits: dict[tuple[int, bool], dict[str, float]] = dataclasses.field(default_factory=dict)  # (threads, quick)
    profiled: dict[str, dict[str, object]] = dataclasses.field(default_factory=dict)  # a GPU point's window, by key
    fallbacks: dict[int, str] = dataclasses.field(default_factory=dict)  # a prepared GPU run's kernel fallback
    profiler_way: str | None = None  # said by the caller (`graph_profiler.use`), else the settings'
    profiler_prepared: bool = False  # the GPU profiler's session before the first capture was made

    def tally(self, measured: int = 0, reused: int = 0) -> None:
        """Count measurements made and reused."""
        self.measured += measured
        self.reused += reused


_PROCESS = RunContext()  # a test that needs a new process's state sets a fresh one here (monkeypatch)


def current() -> RunContext:
    """This process's context."""
    return _PROCESS


@contextlib.contextmanager
def one_run(slot: int) -> Iterator[None]:
    """Within the block, studies schedule and measure only their run `slot` (`runner.schedule`)."""
    if slot < 1:
        raise UsageError(f"a run slot is 1, 2, ...: got {slot}")
    state = current()
    before, state.slot = state.slot, slot
    try:
        yield
    finally:
        state.slot = before
