"""Process groups from torchrun's environment, and failing fast when a rank dies or hangs.

torchrun already stops the other workers when one exits; what it cannot see is a rank that
hangs. Every rank therefore publishes its progress (a count of beats, two per step) in torchrun's key-value
store, which the launcher hosts and so outlives any worker, and a watchdog thread exits the
process when it has made no progress for `timeout` seconds, naming the ranks that are behind.
Collectives get the same timeout, so a rank blocked on a dead peer raises instead of waiting.
"""

import functools
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import NoReturn

import torch.distributed as dist

from dlrm_study import settings
from dlrm_study.errors import UsageError

# Refused here, before a process group starts, and again by hybrid.check_config.
GPU_RANKS = "distributed runs are built for CPU ranks over gloo (train.device=cpu); GPU ranks (NCCL) are not"

EXIT_PEER_FAILED = 3  # a rank gave up because another died or hung
EXIT_USAGE = 2  # bad input, as the CLI ends on a UsageError


@dataclass
class World:
    rank: int
    size: int
    timeout: timedelta = timedelta(minutes=30)
    watchdog: "Watchdog | None" = None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def beat(self) -> None:
        """Say this rank moved on: at the start and at the end of every step (the watchdog compares
        ranks by their count of beats, so a rank stuck between steps is one beat behind)."""
        if self.watchdog:
            self.watchdog.publish(self.watchdog.beats + 1)


def under_torchrun() -> bool:
    return all(name in os.environ for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def launched_rank() -> int:
    """This process's rank as torchrun set it (0 outside torchrun), known before any group starts."""
    return int(os.environ.get("RANK", "0"))


def init(device: str = "cpu", timeout_s: float = 60.0) -> World:
    """Join the process group torchrun set up (gloo: the ranks are CPU processes)."""
    if not under_torchrun():
        raise UsageError(
            "--distributed runs under torchrun, e.g. torchrun --nproc_per_node 2 -m dlrm_study train --distributed"
        )
    if timeout_s <= 0:
        raise UsageError(f"--timeout-s must be positive, got {timeout_s}")
    if device != "cpu":
        raise UsageError(GPU_RANKS)
    timeout = timedelta(seconds=timeout_s)
    dist.init_process_group("gloo", timeout=timeout)
    world = World(dist.get_rank(), dist.get_world_size(), timeout)
    world.watchdog = Watchdog(dist.distributed_c10d._get_default_store(), world.rank, world.size, timeout_s)
    world.watchdog.start()
    # torchrun stops the survivors with SIGTERM when a worker dies: say who, then go.
    signal.signal(signal.SIGTERM, lambda *_: fail(world, "stopped by torchrun after another rank exited"))
    return world


def fail(world: World, what: str) -> None:
    """One line naming the rank(s) at fault, then exit without touching the broken group."""
    verdict = world.watchdog.verdict() if world.watchdog else ""
    print(f"dlrm-study: rank {world.rank}: {what}; {verdict}".rstrip("; "), file=sys.stderr, flush=True)
    os._exit(EXIT_PEER_FAILED)  # not sys.exit: tearing down a broken gloo group can block


def refuse(world: World, err: UsageError) -> None:
    """Bad input every rank met alike (a config, a data file): one line from rank 0, exit 2 everywhere."""
    # The first rank out makes torchrun stop the others: that is no failure to report.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if world.is_main:
        print(f"dlrm-study: error: {err}", file=sys.stderr, flush=True)
    os._exit(EXIT_USAGE)  # not sys.exit: the group may be mid-collective on another rank


def shutdown(world: World) -> NoReturn:
    """End this rank once every rank has finished: meet in the launcher's store, then exit at once.

    Not `destroy_process_group()` and a normal exit: gloo's process group joins its worker threads
    in its destructor, holding the GIL, while a worker may still be dropping the last Work and its
    tensors, which needs the GIL. The rank then deadlocks (about 1 run in 20 of the 2-rank resume
    test here, and in CI). Every collective has finished when a rank reaches this point, and the
    meeting goes through the store, not the group, so skipping the teardown loses nothing: records
    and checkpoints are closed files by now.
    """
    store = dist.distributed_c10d._get_default_store()
    store.set(f"dlrm_done/{world.rank}", "1")
    store.wait([f"dlrm_done/{rank}" for rank in range(world.size)], world.timeout)
    if world.watchdog:
        world.watchdog.stop()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


class Watchdog(threading.Thread):
    """Exits the process when this rank makes no progress for `timeout` seconds."""

    def __init__(self, store, rank: int, size: int, timeout: float) -> None:
        super().__init__(daemon=True, name="dlrm-watchdog")
        self.store, self.rank, self.size, self.timeout = store, rank, size, timeout
        self.beats, self.since, self.stopped = 0, time.monotonic(), threading.Event()
        self.publish(0)

    def publish(self, beats: int) -> None:
        self.beats, self.since = beats, time.monotonic()
        self.store.set(f"dlrm_progress/{self.rank}", str(beats))

    def stop(self) -> None:
        self.stopped.set()

    def verdict(self) -> str:
        """Which ranks are behind this one (hung or dead), read from the store."""
        try:
            beats = {r: int(self.store.get(f"dlrm_progress/{r}")) for r in range(self.size) if r != self.rank}
        except Exception:  # the store went with the launcher
            return "the launcher's store is gone"
        behind = sorted(r for r, b in beats.items() if b < self.beats)
        if behind:
            return f"rank {', '.join(map(str, behind))} fell behind (dead or hung)"
        if beats and min(beats.values()) > self.beats:
            return f"this rank (rank {self.rank}) is behind the others: it is the one that hung"
        return "every rank is at the same point: the failed rank could not be told apart"

    def run(self) -> None:
        while not self.stopped.wait(min(1.0, self.timeout / 4)):
            stalled = time.monotonic() - self.since
            if stalled >= self.timeout:
                print(
                    f"dlrm-study: rank {self.rank}: no progress for {stalled:.0f} s (--timeout-s {self.timeout:g}); "
                    f"{self.verdict()}",
                    file=sys.stderr,
                    flush=True,
                )
                os._exit(EXIT_PEER_FAILED)


@functools.cache
def planned_fault() -> settings.Fault | None:
    """The fault DLRM_STUDY_FAULT plans for this process's run (None for none), read once: a rank or a server is
    a process started with its switches, and `inject_fault` runs in every step, which pays no parse for it."""
    return settings.current().fault


def inject_fault(rank: int, step: int) -> None:
    """DLRM_STUDY_FAULT=RANK:STEP:kill|hang makes that rank die or hang at that step (fault tests)."""
    fault = planned_fault()
    if fault is None or (fault.rank, fault.step) != (rank, step):
        return
    print(f"dlrm-study: rank {rank}: injected fault '{fault.kind}' at step {step}", file=sys.stderr, flush=True)
    if fault.kind == "kill":
        os._exit(9)
    while True:
        time.sleep(3600)
