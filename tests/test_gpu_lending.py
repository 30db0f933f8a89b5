"""One GPU lending: isolated phases, records mirrored whole into the output folder, the headline's estimate,
the Triton fall-back; and (slow) the whole plan dry on the CPU."""

import os
import subprocess
import sys

import pytest
from tests.conftest import ROOT

from dlrm_study import config, platform
from dlrm_study.analysis.clusters import MIN_RUNS
from dlrm_study.analysis.stats import MIN_PAIRS
from dlrm_study.measure import gpu as gpu_measure
from dlrm_study.measure import graph_profiler, isolated
from dlrm_study.measure.prepared import prepare
from dlrm_study.model.kernels import torch_ops
from dlrm_study.records import store
from dlrm_study.studies import gpu_lending

SCRIPT = ROOT / "scripts" / "gpu_lending.sh"
HANG_GUARD_S = 3600  # the dry run's limits, lifted: a busy machine is slow, not hung


def python_step(name: str, code: str, limit_s: float = 600.0) -> isolated.Step:
    return isolated.Step(name, lambda limit: [sys.executable, "-c", code], lambda left: min(left, limit_s))


def test_a_phase_that_raises_hangs_or_loses_its_context_leaves_the_others_whole(tmp_path):
    work, out = tmp_path / "work", tmp_path / "out"
    work.mkdir()
    out.mkdir()
    rows = "a,b\n1,2\n3,4\n"
    lost = (  # a measuring phase whose CUDA context dies mid-run (runner.DeviceLost, simulated)
        "import sys, pathlib\n"
        "from dlrm_study.measure import runner, sweep\n"
        "from dlrm_study.studies import gpu_phases, gpu_lending\n"
        "from dlrm_study.studies.gpu import GpuRun\n"
        "def dead(*args, **kwargs): raise runner.DeviceLost('simulated')\n"
        "sweep.run_together = dead\n"
        "phase = gpu_lending.Phase('lost', runs=[GpuRun('x', [])])\n"
        f"sys.exit(gpu_phases.run_phase(phase, pathlib.Path({str(work)!r}), True, 0.0))\n"
    )
    steps = [
        python_step("first", f"open({str(work / 'first.csv')!r}, 'w').write({rows!r})"),
        python_step("raises", "raise RuntimeError('boom')"),
        python_step("hangs", "import time; time.sleep(600)", limit_s=2.0),
        python_step("lost", lost),
        python_step("last", f"open({str(work / 'last.csv')!r}, 'w').write({rows!r})"),
    ]
    said: list[str] = []
    outcomes = isolated.run_phases(steps, work, out, out / "log.txt", float("inf"), said.append)
    hows = [o.how for o in outcomes]
    assert hows[0] == "ok" and hows[-1] == "ok", hows
    assert hows[1].startswith("FAILED") and hows[2].startswith("killed by the watchdog"), hows
    assert hows[3].startswith("CUDA context lost"), hows
    assert len(said) == len(steps)  # the caller rewrote its summary after every phase
    assert (out / "first.csv").read_text() == rows and (out / "last.csv").read_text() == rows
    assert not list(out.glob("*.lock")) and not list(out.glob(f"*{isolated.PARTIAL}"))


def test_mirror_copies_records_whole_and_seed_resumes_from_an_earlier_output(tmp_path):
    work, out, earlier = tmp_path / "work", tmp_path / "out", tmp_path / "earlier"
    for folder in (work, out, earlier):
        folder.mkdir()
    (earlier / "gpu_sweeps.csv").write_text("x\n1\n")
    (earlier / "summary.txt").write_text("not records")
    (earlier / f"gpu_sweeps.csv{isolated.PARTIAL}").write_text("half")  # a copy cut short: never read
    assert isolated.seed(work, [earlier]) == [str(earlier / "gpu_sweeps.csv")]
    assert (work / "gpu_sweeps.csv").read_text() == "x\n1\n" and not (work / "summary.txt").exists()
    store.append(work / "more.csv", {"a": 1})  # the store's lock file stays in the work folder
    assert sorted(isolated.mirror(work, out)) == ["gpu_sweeps.csv", "more.csv"]
    assert isolated.mirror(work, out) == []  # unchanged: not copied again
    assert sorted(p.name for p in out.iterdir()) == ["gpu_sweeps.csv", "more.csv"]


def test_the_headline_phases_fit_300_s_of_a_cold_start(tmp_path, monkeypatch):
    """By the H200 estimate (the host's bf16 CPU loop measured, as on the GPU machine's AMX host)."""
    monkeypatch.setattr(platform, "native_bf16", lambda: True)
    plan = gpu_lending.phases(tmp_path, dry_run=False)
    assert [p.name for p in plan if p.headline] == ["targets-bf16", "targets-fp32", "placements"]
    assert plan[: sum(p.headline for p in plan)] == [p for p in plan if p.headline]  # the headline first
    assert 0 < gpu_lending.headline_s(plan) <= gpu_lending.HEADLINE_LIMIT_S
    same_host = next(p for p in plan if p.name == "same-host").runs[0]  # no rule reads it: after the headline
    assert set(same_host.specs[0].variants) == {"gpu-hbm", "host-optimized-bf16", "host-reference"}
    lines = gpu_lending.plan_lines(plan, 540.0)
    assert all(any(line.startswith(f"  {p.name} (") and "finishing near" in line for line in lines) for p in plan)


def test_one_lending_measures_h4_in_the_runs_and_pairs_a_verdict_needs(tmp_path):
    """A run's repeat 0 is its warm-up and a verdict word needs MIN_RUNS runs: the first lending measured
    H4 in one run of 5 repeats (4 pairs, one run: no verdict). The estimate counts both runs."""
    plan = {p.name: p for p in gpu_lending.phases(tmp_path, dry_run=False)}
    spec = plan["placements"].runs[0].specs[0]
    assert spec.runs >= MIN_RUNS and spec.runs * (spec.repeats - 1) >= MIN_PAIRS
    one_run = gpu_lending.with_repeats(plan["placements"].runs[0], spec.repeats, runs=1)
    assert gpu_lending.runs_s([one_run], set(), profiled=False) < plan["placements"].estimate_s
    # The rest measures LFU's cache alone: a repeat of H4's points there would be a run of one repeat.
    rest = next(run for run in plan["rest"].runs if run.study == "gpu-placements")
    assert all(rest.only(variant, None) == (variant == "gpu-cached-lfu") for variant in spec.variants)


def test_a_verdict_run_of_several_runs_starts_only_the_whole_runs_that_fit(tmp_path):
    """Never a run cut short: resumed, its repeats would be a run of their own without a warm-up."""
    from dlrm_study.measure import runner, sweep
    from dlrm_study.studies import gpu_phases

    run = {p.name: p for p in gpu_lending.phases(tmp_path, dry_run=False)}["placements"].runs[0]
    spec = run.specs[0]
    plan, _ = sweep.merged_plan(run.specs, run.only)
    tasks = runner.schedule(plan, spec.repeats, lambda cfg: "m", runs=spec.runs)
    one = gpu_lending.slot_s([(t.repeat, t.variant, t.cfg) for t in tasks if t.slot == 1], profiled=False)
    assert gpu_phases.whole_runs(run, tasks, 0.5 * one)[0] is None
    assert gpu_phases.whole_runs(run, tasks, 1.5 * one)[0][0].runs == 1
    assert gpu_phases.whole_runs(run, tasks, 2.5 * one)[0][0].runs == 2
    resumed = [t for t in tasks if t.slot == 2]  # run 1 recorded: run 2 is what is left
    assert gpu_phases.whole_runs(run, resumed, 1.5 * one)[0][0].runs == 2


def test_a_triton_failure_falls_back_to_the_torch_twin(monkeypatch):
    class BrokenTriton:
        NAME = "triton"

        @staticmethod
        def forward_fp32(*args, **kwargs):
            raise RuntimeError("simulated: a Triton kernel that does not compile")

        update_fp32 = forward_fp32

    monkeypatch.setattr(graph_profiler, "_chosen", graph_profiler.NOT_PROFILED)
    prepared = prepare(config.load("tiny", ["train.loop=gpu", "train.device=cpu", "train.placement=hbm"]))
    prepared.run.model.sparse_arch.ops = BrokenTriton
    record = gpu_measure.measure_training(prepared, steps=2, warmup=1)
    assert record["kernel_path"] == torch_ops.NAME
    assert record[gpu_measure.KERNEL_FALLBACK].startswith("triton failed (RuntimeError: simulated")
    again = gpu_measure.measure_training(prepared, steps=2, warmup=1)  # a later repeat says it too
    assert again["kernel_path"] == torch_ops.NAME and again[gpu_measure.KERNEL_FALLBACK]


def test_a_failure_of_the_torch_kernels_is_not_hidden(monkeypatch):
    class BrokenTorch:
        NAME = torch_ops.NAME

        @staticmethod
        def forward_fp32(*args, **kwargs):
            raise RuntimeError("simulated")

    monkeypatch.setattr(graph_profiler, "_chosen", graph_profiler.NOT_PROFILED)
    prepared = prepare(config.load("tiny", ["train.loop=gpu", "train.device=cpu", "train.placement=hbm"]))
    prepared.run.model.sparse_arch.ops = BrokenTorch
    with pytest.raises(RuntimeError, match="simulated"):
        gpu_measure.measure_training(prepared, steps=2, warmup=1)


def test_the_lending_needs_an_out_folder():
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 2 and "usage: bash scripts/gpu_lending.sh OUT_DIR" in done.stderr


@pytest.mark.slow
def test_dry_run_of_the_lending_writes_every_phase_and_the_summary(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "PYTHON": sys.executable, "GPU_LENDING_TIMEOUT_S": str(HANG_GUARD_S)}
    env["DLRM_STUDY_KERNELS"] = "torch"  # the C++ build is the GPU host's; here it would take the test's minutes
    env.pop("TRITON_INTERPRET", None)
    command = ["bash", str(SCRIPT), str(out), "--dry-run", "--budget-s", str(HANG_GUARD_S)]
    command += ["--work", str(tmp_path / "w")]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S + 60)
    assert done.returncode == 0, done.stderr[-2000:]
    plan = gpu_lending.phases(tmp_path / "plan", dry_run=True)
    text = (out / "summary.txt").read_text()
    for phase in plan:
        assert f"phase {phase.name}: ok" in text, phase.name
    files = sorted(p.name for p in out.iterdir())
    assert len(files) <= 8 and not [f for f in files if f.endswith((".lock", isolated.PARTIAL))], files
    grid = store.load(out / "gpu_sweeps.csv")
    assert grid["error"].isna().all()
    studies = set(grid["study"])
    assert {"gpu-targets", "gpu-placements", "gpu-same-host", "gpu-sensitivity-smoke", "gpu-presets"} <= studies
    headline = grid[grid["study"].isin(gpu_lending.HEADLINE_STUDIES)]
    # Written before anything profiled their points: the profiled windows are the profiles phase's, apart.
    on_gpu_loop = headline[headline["loop"] == "gpu"]  # (the host's CPU loops have no profiled window here)
    assert len(on_gpu_loop) and (on_gpu_loop["profile_note"] == graph_profiler.NOT_PROFILED_NOTE).all()
    profiles = store.load(out / gpu_lending.PROFILES_FILE)
    assert len(profiles) == 3 and (profiles["kernels_per_step"] > 0).all()
    same_host = grid[grid["study"] == "gpu-same-host"]
    assert same_host["run_id"].nunique() == 1 and {"gpu-hbm", "host-reference"} <= set(same_host["variant"])
    h4 = grid[(grid["study"] == "gpu-placements") & (grid["variant"] != "gpu-cached-lfu")]
    assert h4.groupby("run_id")["repeat"].nunique().tolist() == [3] * gpu_lending.H4_RUNS  # whole runs
    assert set(store.load(out / "gpu_embedding.csv")["placement"]) == {"hbm", "uvm", "cached", "host"}
    assert len(store.load(out / "sweeps.csv")) > 0  # the host's CPU loops, last
    assert text.count("gpu-targets dry-") == len(grid[grid["study"] == "gpu-targets"])  # one line a record
