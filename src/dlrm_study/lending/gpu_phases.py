"""One phase of a GPU lending, in this process (`lending.gpu_lending` plans them; `measure.isolated` runs
each in a process of its own): its runs, the GPU tests, the profiled windows, or the embedding benchmark.

A measuring phase profiles nothing (`graph_profiler.NOT_PROFILED`): its records are written before anything
profiles their points; the `profiles` phase profiles the target points afterwards, in its own file. A phase
whose CUDA context dies (`runner.DeviceLost`) returns `isolated.CONTEXT_LOST`; the lending goes on with the
next phase in a new process.
"""

import contextlib
import dataclasses
import subprocess
import sys
import time
from pathlib import Path

import torch

from dlrm_study import config
from dlrm_study.config import Placement
from dlrm_study.lending import gpu_budget, gpu_lending, numerics
from dlrm_study.lending.gpu_lending import GPU_TESTS_TIMEOUT_S, Phase
from dlrm_study.measure import context, gpu, graph_profiler, isolated, runner, sweep
from dlrm_study.plans import sweep as sweep_plan
from dlrm_study.plans.gpu import REPEATS, GpuRun
from dlrm_study.records import columns as col

TEST_FILES = ["tests/test_gpu_step.py", "tests/test_placements.py"]  # the files holding the tests marked gpu


def run_phase(phase: Phase, work: Path, dry_run: bool, deadline: float) -> int:
    """Run `phase` with records in `work`, starting no measurement past `deadline` (time.monotonic); its exit code."""
    if phase.kind != "profiles":  # (the profiles phase sets its way from the probes, `choose_profiler`)
        graph_profiler.use(graph_profiler.NOT_PROFILED)
    try:
        if phase.kind == "numerics":
            print(numerics.run(work, phase.shapes, torch.device("cpu" if dry_run else "cuda")), flush=True)
        elif phase.kind == "tests":
            timeout_s = min(GPU_TESTS_TIMEOUT_S, max(1.0, deadline - time.monotonic()))
            print(run_tests(dry_run, timeout_s=timeout_s, select=gpu_lending.SMOKE_TESTS))
        elif phase.kind == "embedding":
            embedding_records(work, dry_run)
        else:
            if phase.kind == "profiles":
                print(choose_profiler(dry_run), flush=True)
            # A verdict phase measures one run slot: a run is a process (its own run id, order and warm-up).
            with context.one_run(phase.slot) if phase.slot else contextlib.nullcontext():
                for run in phase.runs:
                    print(measure_run(run, phase, dry_run, deadline), flush=True)
    except runner.DeviceLost as err:
        print(f"phase {phase.name}: the CUDA context is lost: {first_line(err)}", flush=True)
        return isolated.CONTEXT_LOST
    return 0


def measure_run(run: GpuRun, phase: Phase, dry_run: bool, deadline: float) -> str:
    """A run of the phase until done or past the deadline (verdict runs: whole repeats; the targets: a
    failed point measured once more); a line saying how far it got."""
    specs, note = (run.specs, "")
    if phase.whole and not dry_run:
        specs, note = whole(run, deadline)
        if specs is None:
            return f"{run.study}: {note}"
    counts = sweep.run_together(specs, run.study, progress=False, deadline=deadline, only=run.only)
    line = f"{run.study}: {counts}{note}"
    if phase.retry and counts.failed:
        again = sweep.run_together(
            specs, run.study, retry_errors=True, progress=False, deadline=deadline, only=run.only
        )
        line += f"; its failures measured once more: {again}"
    return line


def whole(run: GpuRun, deadline: float) -> tuple[list[sweep_plan.Sweep] | None, str]:
    """The run's sweeps cut to the whole repeats the H200 estimate fits before `deadline` (a repeat split
    between two processes is two runs, whose halves never pair), and a note; None where none fits."""
    plan, _ = sweep.merged_plan(run.specs, run.only)
    first = run.specs[0]
    tasks = runner.pending(runner.schedule(plan, first.repeats, runner.machine_of, runs=first.runs), Path(first.out))
    if not tasks:
        return run.specs, ""
    left_s = deadline - time.monotonic()
    if first.runs > 1:
        return whole_runs(run, tasks, left_s)
    items = [(t.repeat, t.variant, t.cfg) for t in tasks]
    n = gpu_budget.whole_repeats(items, gpu_budget.kept(items), gpu_budget.Call(0.0), left_s, tests=False)
    repeats = sorted({t.repeat for t in tasks})
    if not n:
        return None, f"not started: its next whole repeat would not end in the {left_s:.0f} s left"
    upto = repeats[n - 1] + 1
    return [dataclasses.replace(spec, repeats=upto) for spec in run.specs], f" (up to repeat {upto - 1}, whole)"


def whole_runs(run: GpuRun, tasks: list[runner.Task], left_s: float) -> tuple[list[sweep_plan.Sweep] | None, str]:
    """A sweep of several runs cut to the whole runs (slots) the H200 estimate fits in `left_s`: a run's repeats
    are never split (the repeats of a run cut short and resumed would be a run of their own, without its warm-up,
    and a fragment counted as a run), and a slot's points are built anew (`gpu_lending.slot_s` charges them)."""
    spent, upto = 0.0, 0
    for slot in sorted({t.slot for t in tasks}):
        items = [(t.repeat, t.variant, t.cfg) for t in tasks if t.slot == slot]
        spent += gpu_budget.WHOLE_MARGIN * gpu_lending.slot_s(items, profiled=False)
        if spent > left_s:
            break
        upto = slot
    if not upto:
        return None, f"not started: its next whole run would not end in the {left_s:.0f} s left"
    return [dataclasses.replace(spec, runs=upto) for spec in run.specs], f" (runs up to {upto}, whole)"


def run_tests(dry_run: bool, timeout_s: float | None = None, select: list[str] | None = None) -> str:
    """The tests marked `gpu` (on the CPU they skip; `select`: pytest's `-k` of a smoke): pytest's last line,
    failures and a timeout said loudly."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "tests").is_dir():
        return "tests: not found beside the package, not run"
    # Only the files holding them: collecting the others would import packages a GPU machine lacks.
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-m",
        "gpu",
        "-p",
        "no:cacheprovider",
        *(select or []),
        *TEST_FILES,
    ]
    try:
        done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return f"GPU TESTS TIMED OUT after {timeout_s:.0f} s"
    lines = (done.stdout + done.stderr).strip().splitlines()
    print("\n".join(lines[-15:]))
    last = lines[-1] if lines else "no output"
    if done.returncode not in (0, 5):  # 5: nothing selected
        return f"GPU TESTS FAILED (pytest exit {done.returncode}): {last}"
    return f"tests: {last}"


def embedding_records(out: Path, dry_run: bool) -> None:
    """Copy bandwidths, then each placement's embedding-only benchmark on dlrm-benchmark, in repeats."""
    device = torch.device("cpu" if dry_run else "cuda")
    limits = gpu.copy_bandwidth(device, mib=16 if dry_run else 2048)
    print(f"copy bandwidth: {limits['copy_gbps']:.0f} GB/s on the device, {limits['h2d_gbps']:.1f} GB/s host->device")
    settings = ["train.loop=gpu", "data.id_distribution=zipf", "data.zipf_alpha=1.05", "train.cache_fraction=0.5"]
    configs = {
        placement: config.load(
            "tiny" if dry_run else "dlrm-benchmark",
            [f"train.device={device.type}", f"train.placement={placement}", *settings],
        )
        for placement in (Placement.HBM, Placement.UVM, Placement.CACHED, Placement.HOST)
    }
    steps, warmup = (2, 1) if dry_run else (20, 5)

    def measure(task: runner.Task) -> dict[str, object]:
        fields = {**gpu.embedding_bench(task.cfg, steps, warmup, limits), col.BUILDS: "every repeat"}
        if device.type == "cuda":
            torch.cuda.empty_cache()
        return fields

    def say(record: dict[str, object]) -> None:
        if record.get(col.ERROR):
            print(f"embedding {record.get(col.PLACEMENT, '?'):>6}, repeat {record[col.REPEAT]}: {record[col.ERROR]}")
            return
        print(
            f"embedding {record[col.PLACEMENT]:>6}, repeat {record[col.REPEAT]}: "
            f"{record['embedding_ms_median']:8.2f} ms, {record['embedding_gbps']:7.1f} GB/s "
            f"(lookup alone {record['embedding_forward_gbps']:7.1f} GB/s)"
        )

    points = [("dlrm-benchmark", {f"embedding-{name}": cfg for name, cfg in configs.items()})]
    tasks = runner.schedule(points, 2 if dry_run else REPEATS, runner.machine_of)
    # A placement that fails is recorded with its error; the others go on.
    runner.run(tasks, measure, out / "gpu_embedding.csv", "gpu-embedding", progress=False, on_record=say)


def choose_profiler(dry_run: bool) -> str:
    """Set this process's way of profiling CUDA graphs from the probes (before any capture); a line saying it."""
    if dry_run:
        return "profiler: dry run (CPU): no graph to profile, each point's window timed by the wall clock"
    way, seen = graph_profiler.choose()
    graph_profiler.use(way)
    return f"profiler for CUDA graphs: {way} ({seen})"


def first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:300] if text else ""
