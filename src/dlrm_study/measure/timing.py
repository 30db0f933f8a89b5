"""Timing primitives every benchmark shares: elapsed milliseconds (CUDA events on a GPU, the wall clock on
the CPU), a record's timing fields, peak memory, and a quiet stderr for C++ log lines."""

import contextlib
import os
import resource
import sys
import time
from collections.abc import Callable, Iterator

import torch

from dlrm_study.records import columns as col


def step_times(step_ms: list[float], batch_size: int) -> dict[str, float]:
    """A record's timing fields from its timed steps (`records.columns.Timing`)."""
    return col.Timing.of_steps(step_ms, batch_size).fields()


def elapsed_ms(fn: Callable[[], object], device: torch.device) -> float:
    """Milliseconds `fn()` takes: CUDA events on a GPU (never the launch alone), the wall clock on the CPU."""
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)
    start_s = time.perf_counter()
    fn()
    return (time.perf_counter() - start_s) * 1e3


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    """File descriptor 2 to /dev/null for the block (log lines written by C++ code, not Python's)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak_memory(device: torch.device) -> None:
    """Start the peak anew, so a record made in a long-lived process reports its own run."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:  # Linux: writing 5 resets the process's peak resident set (VmHWM)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass  # elsewhere the peak covers the whole process


def peak_memory(device: torch.device) -> dict[str, object]:
    """Peak GPU memory allocated, or the process's peak resident set on the CPU."""
    if device.type == "cuda":
        return {"peak_mem_bytes": torch.cuda.max_memory_allocated(device), "peak_mem_kind": "cuda_allocated"}
    return {"peak_mem_bytes": peak_rss(), "peak_mem_kind": "process_rss"}


def peak_rss() -> int:
    """Peak resident set since the last reset (VmHWM), else since the process started."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def best_s(fn: Callable[[], object], repeats: int) -> float:
    """Fewest seconds of `fn` over `repeats` calls after one warm-up call: on a shared machine noise only
    adds time, so the fewest is the closest to what the hardware does (the limits' microbenchmarks)."""
    fn()
    fewest = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        fewest = min(fewest, time.perf_counter() - start)
    return fewest
