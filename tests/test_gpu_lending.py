"""One GPU lending: isolated phases, records mirrored whole into the output folder, the headline's estimate,
the Triton fall-back; and (slow) the whole plan dry on the CPU."""

import os
import subprocess
import sys

import pytest
from tests.conftest import ROOT

from dlrm_study import config, platform
from dlrm_study.analysis.clusters import MIN_RUNS
from dlrm_study.lending import gpu_lending
from dlrm_study.measure import context, graph_profiler, isolated
from dlrm_study.measure import gpu as gpu_measure
from dlrm_study.measure.prepared import prepare
from dlrm_study.model.kernels import torch_ops
from dlrm_study.records import store

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
        "from dlrm_study.lending import gpu_phases, gpu_lending\n"
        "from dlrm_study.plans.gpu import GpuRun\n"
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


@pytest.mark.parametrize("lending", sorted(gpu_lending.LENDINGS))
def test_each_lending_judges_its_claims_in_three_runs_each_a_process_within_its_limit(tmp_path, monkeypatch, lending):
    """By the H200 estimate from a cold start (the host's bf16 CPU loop measured, as on the GPU machine's AMX host):
    every claim of the lending in MIN_RUNS runs, each run slot a phase of its own (a process), the verdict phases
    ending, with a phase's stop margin, inside the lending's limit."""
    from dlrm_study.lending.gpu_session import STOP_MARGIN_S

    monkeypatch.setattr(platform, "native_bf16", lambda: True)
    assert gpu_lending.VERDICT_RUNS == MIN_RUNS
    plan = gpu_lending.phases(tmp_path, dry_run=False, lending=lending)
    claims = gpu_lending.claims_of(plan)
    assert claims == {claim: [1, 2, 3] for claim in gpu_lending.LENDINGS[lending]}
    assert plan[: sum(p.headline for p in plan)] == [p for p in plan if p.headline]  # the verdicts first
    assert 0 < gpu_lending.headline_s(plan) + STOP_MARGIN_S <= gpu_lending.LENDING_LIMIT_S
    lines = gpu_lending.plan_lines(plan, 540.0, lending)
    assert lines[0].startswith(f"lending {lending} (") and "each run a process" in lines[0]
    assert all(any(line.startswith(f"  {p.name} (") and "finishing near" in line for line in lines) for p in plan)


def test_the_power_table_states_each_gpu_claims_power_at_its_lendings_design():
    """docs/claims.md's GPU rows (`claims.designs.DESIGNS`) are the plan's: the runs of a lending, the repeats a run."""
    from dlrm_study.claims import designs

    of = {claim: lending for lending, claims in gpu_lending.LENDINGS.items() for claim in claims}
    gpu_rows = [d for d in designs.DESIGNS if d.claim in of]
    assert {d.claim for d in gpu_rows} == set(of)
    for d in gpu_rows:
        assert (d.runs, d.pairs) == (gpu_lending.VERDICT_RUNS, gpu_lending.REPEATS_OF[of[d.claim]]), d.claim


def test_the_lendings_split_h1_to_h4_between_them():
    claims = [claim for lending in gpu_lending.LENDINGS.values() for claim in lending]
    assert sorted(claims) == ["H1", "H2", "H3", "H4"]  # each claim in one lending, every one in some


def test_a_verdict_phase_is_charged_its_own_run_slot(tmp_path):
    """Three runs of the same points are three runs' work: an estimate that took run 2's measurements for run 1's
    (keyed without the slot) charged runs 2 and 3 nothing but a process's start."""
    plan = {p.name: p for p in gpu_lending.phases(tmp_path, dry_run=False, lending="A")}
    costs = [plan[f"verdict-run-{slot}"].estimate_s for slot in (1, 2, 3)]
    assert costs[0] == costs[1] == costs[2] > 5 * gpu_lending.PHASE_START_S


def test_a_lending_measures_only_the_points_its_rules_read(tmp_path):
    """H4: hbm, host and cached in 3 whole repeats a run (uvm apart, in a run of its own, beside hbm; LFU's cache
    with the rest); H1: gpu-hbm at each model-shape knob's two ends; H2 and H3: the grid less its centre point."""
    plan = {p.name: p for p in gpu_lending.phases(tmp_path, dry_run=False, lending="A")}
    h1, h4 = plan["verdict-run-2"].runs
    assert h4.specs[0].repeats == 3 and h4.specs[0].runs == MIN_RUNS and plan["verdict-run-2"].slot == 2
    assert {v for v in h4.specs[0].variants if h4.only(v, None)} == {"gpu-hbm", "gpu-host", "gpu-cached"}
    uvm = plan["uvm"].runs[0]
    assert {v for v in uvm.specs[0].variants if uvm.only(v, None)} == {"gpu-hbm", "gpu-uvm"} and not uvm.claims
    assert plan["uvm"].slot == MIN_RUNS + 1  # its own run: a uvm fault takes no run of H4's with it
    rest = next(run for run in plan["rest"].runs if run.study == "gpu-placements")
    assert all(rest.only(variant, None) == (variant == "gpu-cached-lfu") for variant in h4.specs[0].variants)
    from dlrm_study.measure import sweep

    h1_points, _ = sweep.merged_plan(h1.specs, h1.only)
    assert sum(len(cfgs) for _, cfgs in h1_points) == 11  # 6 knobs' ends, the base shared by two of them
    grid = {p.name: p for p in gpu_lending.phases(tmp_path, dry_run=False, lending="B")}["verdict-run-1"].runs[0]
    grid_points, _ = sweep.merged_plan(grid.specs, grid.only)
    assert len(grid_points) == 8 and all(len(cfgs) == 3 for _, cfgs in grid_points)  # GPU and 2 host loops
    assert grid.specs[0].repeats == 1 and grid.claims == ("H2", "H3")


def test_a_verdict_run_of_several_runs_starts_only_the_whole_runs_that_fit(tmp_path):
    """Never a run cut short: resumed, its repeats would be a run of their own without a warm-up."""
    from dlrm_study.lending import gpu_phases
    from dlrm_study.measure import runner, sweep

    run = {p.name: p for p in gpu_lending.phases(tmp_path, dry_run=False)}["verdict-run-1"].runs[1]
    spec = run.specs[0]
    plan, _ = sweep.merged_plan(run.specs, run.only)
    tasks = runner.schedule(plan, spec.repeats, lambda cfg: "m", runs=spec.runs)
    one = gpu_lending.slot_s([(t.repeat, t.variant, t.cfg) for t in tasks if t.slot == 1], profiled=False)
    assert gpu_phases.whole_runs(run, tasks, 0.5 * one)[0] is None
    assert gpu_phases.whole_runs(run, tasks, 1.5 * one)[0][0].runs == 1
    assert gpu_phases.whole_runs(run, tasks, 2.5 * one)[0][0].runs == 2
    resumed = [t for t in tasks if t.slot == 2]  # run 1 recorded: run 2 is what is left
    assert gpu_phases.whole_runs(run, resumed, 1.5 * one)[0][0].runs == 2


def test_the_lending_to_run_is_the_first_whose_claims_have_no_verdict_at_todays_code(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from dlrm_study.analysis.judgement import Status
    from dlrm_study.lending import gpu_session

    gpu = "intel-xeon-f6m207s2/avx512f+avx512_bf16+amx_bf16/16cpu/nvidia-h200"
    statuses = {"H1": Status.REPRODUCED, "H4": Status.INCONCLUSIVE, "H2": Status.ONE_RUN, "H3": Status.NOT_YET}
    table = {c: {gpu: SimpleNamespace(status=s)} for c, s in statuses.items()}
    evidence = SimpleNamespace(machines=lambda: [gpu, "amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu"])
    monkeypatch.setattr(gpu_session.reading, "judged", lambda out, profile: (evidence, table))
    monkeypatch.setattr(gpu_session.ledger, "earlier_code", lambda ev, host: "")
    part, why = gpu_session.choose_lending(tmp_path)
    assert part == "B" and why.startswith("H2, H3 not yet judged at today's GPU code")
    monkeypatch.setattr(gpu_session.ledger, "earlier_code", lambda ev, host: "earlier code (commit 5354afd)")
    assert gpu_session.choose_lending(tmp_path)[0] == "A"  # judged at earlier code: not today's verdict
    table["H4"][gpu] = SimpleNamespace(status=Status.ONE_RUN)
    monkeypatch.setattr(gpu_session.ledger, "earlier_code", lambda ev, host: "")
    assert gpu_session.choose_lending(tmp_path) == ("A", "H4 not yet judged at today's GPU code in " + str(tmp_path))


def test_a_triton_failure_falls_back_to_the_torch_twin(monkeypatch):
    class BrokenTriton:
        NAME = "triton"

        @staticmethod
        def forward_fp32(*args, **kwargs):
            raise RuntimeError("simulated: a Triton kernel that does not compile")

        update_fp32 = forward_fp32

    monkeypatch.setattr(context, "_PROCESS", context.RunContext(profiler_way=graph_profiler.NOT_PROFILED))
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

    monkeypatch.setattr(context, "_PROCESS", context.RunContext(profiler_way=graph_profiler.NOT_PROFILED))
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
    command = ["bash", str(SCRIPT), str(out), "--dry-run", "--budget-s", str(HANG_GUARD_S), "--part", "A"]
    command += ["--work", str(tmp_path / "w")]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S + 60)
    assert done.returncode == 0, done.stderr[-2000:]
    plan = gpu_lending.phases(tmp_path / "plan", dry_run=True, lending="A")
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
    h4 = grid[(grid["study"] == "gpu-placements") & grid["variant"].isin(["gpu-host", "gpu-cached"])]
    assert h4.groupby("run_id")["repeat"].nunique().tolist() == [1] * MIN_RUNS  # a dry run's: one whole repeat a run
    assert h4["process_id"].nunique() == MIN_RUNS  # each run a process of its own
    text_lines = text.splitlines()
    for claim in gpu_lending.LENDINGS["A"]:  # counted by the claim's own reader: its runs are this lending's
        assert any(line.startswith(f"{claim}: 3 runs (") and "enough for a verdict" in line for line in text_lines)
    assert set(store.load(out / "gpu_embedding.csv")["placement"]) == {"hbm", "uvm", "cached", "host"}
    assert len(store.load(out / "sweeps.csv")) > 0  # the host's CPU loops, last
    assert text.count("gpu-targets dry-") == len(grid[grid["study"] == "gpu-targets"])  # one line a record


@pytest.mark.slow
def test_lending_b_alone_gives_h2_and_h3_their_runs(tmp_path):
    """Lending B's verdict phases, each a process as the lending starts them (dry, on the CPU): the grid's records
    they write give H2 and H3, counted as their rule pairs them, the runs a verdict needs, with no record of A."""
    from dlrm_study.lending import gpu_pairs

    work = tmp_path / "w"
    work.mkdir()
    env = {**os.environ, "DLRM_STUDY_KERNELS": "torch"}
    env.pop("TRITON_INTERPRET", None)
    for slot in range(1, MIN_RUNS + 1):
        command = [
            sys.executable,
            "-m",
            "dlrm_study.lending.gpu_session",
            "--phase",
            f"verdict-run-{slot}",
            "--part",
            "B",
        ]
        command += ["--work", str(work), "--dry-run", "--deadline-s", str(HANG_GUARD_S)]
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
        assert done.returncode == 0, done.stderr[-2000:]
    records = store.load(work / "gpu_sweeps.csv")
    assert records["error"].isna().all() and records["process_id"].nunique() == MIN_RUNS
    run = {p.name: p for p in gpu_lending.phases(work, dry_run=True, lending="B")}["verdict-run-1"].runs[0]
    for claim in ("H2", "H3"):
        pairs, runs = gpu_pairs.claim_counts(claim, work, run)
        assert runs == MIN_RUNS and pairs >= MIN_RUNS, (claim, pairs, runs)
