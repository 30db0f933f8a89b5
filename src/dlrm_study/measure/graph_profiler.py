"""How the profiler meets CUDA graphs: set up once, before the process's first capture, in a way
probed on the machine itself.

Two known failures pull opposite ways. A profiler that first attaches after a graph was captured
has corrupted or hung that graph's replays on some stacks (pytorch/pytorch#75504; torch's own
workaround, `torch.profiler._utils._init_for_cuda_graphs`, opens an empty session before any
capture). On at least one CUDA 13 stack that empty session left kernel collection dead for the
rest of the process (every later trace held no kernel). So the GPU script probes both ways in
throw-away processes (`probe`, `choose`), each capturing a small graph and profiling its
replays in two sessions, and sets the first way that saw every kernel for its own process
(`settings.GRAPH_PROFILER`) before it captures anything:

- `init`: the empty session before the first capture (torch's workaround; the default);
- `attach`: nothing before; each point's one profiling session attaches to a graph made before it;
- `off`: neither saw the kernels: no profiled window (busy unknown; the host's enqueue time still
  says whether the host or the device bounds a step).

    python -m dlrm_study.measure.graph_profiler init   # one probe: prints its JSON line
"""

import json
import os
import subprocess
import sys

import torch

from dlrm_study import settings
from dlrm_study.measure import context

STRATEGIES = ("init", "attach")
PROBE_REPLAYS = 3
PROBE_TIMEOUT_S = 90
# No profiled window at all, on any device: a GPU lending's measuring phases, whose records must be
# written before anything profiles their points (the profiled-windows phase does, later, in a process of its own).
NOT_PROFILED = "none"
NOT_PROFILED_NOTE = "not profiled in this phase (a lending profiles the targets later, in a phase of its own)"


def use(way: str) -> None:
    """This process's way, said by its caller (a lending phase's command line) rather than the environment."""
    if way not in (*STRATEGIES, "off", NOT_PROFILED):
        raise ValueError(f"unknown profiler strategy {way!r}")
    context.current().profiler_way = way


def strategy() -> str:
    """This process's way: `use`'s, else the environment's, else `init`."""
    return context.current().profiler_way or settings.current().graph_profiler


def prepare(device: torch.device) -> None:
    """Before the process's first capture on a GPU: the empty session where the strategy is `init` (once)."""
    state = context.current()
    if state.profiler_prepared or device.type != "cuda" or strategy() == NOT_PROFILED:
        return
    state.profiler_prepared = True
    if strategy() == "init":
        from torch.profiler import _utils

        _utils._init_for_cuda_graphs()


def probe(way: str) -> dict[str, object]:
    """Capture a small graph after setting the profiler up `way`, then count the kernels two profiling
    sessions see over its replays (each should see 2 per replay: the product and the add)."""
    os.environ[settings.GRAPH_PROFILER] = way
    device = torch.device("cuda")
    x = torch.randn(512, 512, device=device)
    prepare(device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        (x @ x).add_(1)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        (x @ x).add_(1)
    graph.replay()
    torch.cuda.synchronize()
    seen = []
    for _ in range(2):  # two sessions: repeated sessions in one process must keep seeing kernels
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities) as prof:
            for _ in range(PROBE_REPLAYS):
                graph.replay()
            torch.cuda.synchronize()
        seen.append(sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA))
    return {"strategy": way, "kernels": seen, "expected_at_least": 2 * PROBE_REPLAYS}


def choose(python: str = sys.executable) -> tuple[str, str]:
    """The first way whose probe saw every kernel in both sessions, and a line saying what each probe saw."""
    said = []
    for way in STRATEGIES:
        try:
            command = [python, "-m", __name__, way]
            done = subprocess.run(command, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
            result = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
        except (subprocess.TimeoutExpired, json.JSONDecodeError, IndexError):
            result = None
        if result is None:
            said.append(f"{way}: probe failed")
            continue
        said.append(f"{way}: {result['kernels']} kernels (>= {result['expected_at_least']} each)")
        if min(result["kernels"]) >= result["expected_at_least"]:
            return way, "; ".join(said)
    return "off", "; ".join(said)


if __name__ == "__main__":
    print(json.dumps(probe(sys.argv[1] if len(sys.argv) > 1 else "init")))
