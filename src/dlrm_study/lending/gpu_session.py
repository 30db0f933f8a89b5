"""One GPU session, prepared: the GPU tests, then the benchmark grid, records under --out.

    python -m dlrm_study.lending.gpu_session --out DIR [--budget-s 290] [--dry-run]
    python -m dlrm_study.lending.gpu_session --lending --out DIR [--budget-s 540] [--resume-from DIR] [--dry-run]

`--lending` (`scripts/gpu_lending.sh`): one lending's plan instead (`lending.gpu_lending`): the headline
first, each phase in a process of its own under a watchdog (`measure.isolated`, `lending.gpu_phases`), the
records made in a work folder and mirrored whole into DIR, DIR/summary.txt rewritten after every phase.
The rest of this docstring is the older session's, in calls of 290 s:

In order: the tests marked `gpu`; the profiler's probes (how it meets CUDA graphs on this
machine, `measure.graph_profiler`); the GPU's copy bandwidths; the embedding-only benchmark of
each placement (the kernels' bandwidth targets); then the grid of `plans.gpu`, most valuable
first: the three throughput targets with their fp32 twins (listed, with the plan's estimated
cost call by call, before anything is measured), then the points the H1-H4 rules read, in the
repeats a verdict needs: the placements (H4), the sensitivity sweeps and the dense x sparse grid
with the host's CPU loops (H1-H3); then the presets at 2,048, 16,384 and 65,536, kaggle's
dispatch floor, skew and table size, the host's CPU loops. Points run one at a time; a point
that fails (any exception: a kernel that does not compile, out of resources, out of memory) is
recorded with its error and the rest go on; past the time budget the rest are left for the
next call (every sweep resumes where it stopped). A verdict run measures whole repeats only,
as many as the estimate fits in what is left of the budget (`whole`): a repeat split between
two calls would lose its pairs. `--dry-run` runs it all on the CPU at tiny sizes, which is
what CI checks. Records: DIR/gpu_sweeps.csv, DIR/gpu_embedding.csv; the verdicts against the
targets, a missing target said missing with its reason, and per claim H1-H4 the pairs its
verdict points have against the 5 a verdict needs: DIR/summary.txt.
"""

import argparse
import dataclasses
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch

from dlrm_study import settings
from dlrm_study.analysis import clusters, findings, gpu_targets, predictions, wording
from dlrm_study.analysis.judgement import Status
from dlrm_study.config.variants import GPU_CACHED, GPU_CACHED_LFU, GPU_EAGER, GPU_HBM, GPU_HBM_FP32, GPU_HOST, GPU_UVM
from dlrm_study.errors import UsageError
from dlrm_study.lending import gpu_budget, gpu_lending, gpu_phases
from dlrm_study.lending.gpu_pairs import claim_lines, pending
from dlrm_study.lending.gpu_phases import choose_profiler, embedding_records, first_line, run_tests
from dlrm_study.measure import gpu, isolated, runner, sweep
from dlrm_study.plans import gpu as gpu_grid
from dlrm_study.plans import sweep as sweep_plan
from dlrm_study.plans.gpu import DISPATCH_FLOOR, TARGETS_RUN, GpuRun
from dlrm_study.plans.gpu_targets import DRY_BATCHES
from dlrm_study.plans.sensitivity import GPU_RECORDS
from dlrm_study.records import Machine, provenance, store
from dlrm_study.records import columns as col
from dlrm_study.report import ledger, reading

# The throughput targets are plans.gpu_targets.TARGETS (an H200; judged on the median of all repeats).
PRESET_STUDIES = [TARGETS_RUN, "gpu-presets", "gpu-presets-large"]
TARGET_BUSY = 0.9  # GPU busy at batches >= 16,384
TARGET_FORWARD_FRACTION = 0.5  # embedding lookup bytes / copy bandwidth (dlrm-benchmark, hbm)
TARGET_COPY_FRACTION = 0.3  # lookup + backward + update bytes / copy bandwidth


Gate = Callable[[GpuRun], tuple[list[sweep_plan.Sweep] | None, str]]


def run_sweeps(run: GpuRun, deadline: float, gate: Gate | None = None) -> str:
    """One run's measurements until done or past the deadline; a line saying how far it got.
    `gate`: a verdict run's sweeps cut to the whole repeats that fit, with a note (`whole`).

    A point's failure is its record (`runner.run`); `DeviceLost` (the CUDA context gone) propagates:
    every later point would fail too. Anything else that stops a run stops that run only.
    """
    try:
        specs, note = gate(run) if gate is not None and run.claims else (run.specs, "")
        if specs is None:
            return f"{run.study}: {note}"
        counts = sweep.run_together(specs, run.study, progress=False, deadline=deadline, only=run.only)
    except runner.DeviceLost:
        raise
    except Exception as err:  # one GPU session is scarce: a run that breaks must not stop the others
        return f"{run.study}: STOPPED by {type(err).__name__}: {first_line(err)}"
    return f"{run.study}: {counts}{note}"


def whole(run: GpuRun, start: float, budget_s: float, tests: bool) -> tuple[list[sweep_plan.Sweep] | None, str]:
    """A verdict run's sweeps cut to the whole repeats the H200 estimate fits in what is left of the budget
    (`gpu_budget.whole_repeats`), and a note; None where not one fits (a later call measures them whole).

    A repeat split between two calls is two runs, whose records never pair, and no later call measures
    its stored half again: its pairs would be lost for good."""
    todo = pending(run)
    if not todo:
        return run.specs, ""
    items = [(t.repeat, t.variant, t.cfg) for t in todo]
    call = gpu_budget.Call(time.monotonic() - start)
    n = gpu_budget.whole_repeats(items, gpu_budget.kept(items), call, budget_s, tests)
    left = sorted({t.repeat for t in todo})
    full = run.specs[0].repeats
    if not n:
        return None, (
            f"not started: by the estimate its next whole repeat would not end inside the budget "
            f"(a later call measures {repeats_text(left)} of {full}, whole)"
        )
    upto = left[n - 1] + 1
    rest = "; the rest whole in a later call" if upto < full else ""
    return [dataclasses.replace(spec, repeats=upto) for spec in run.specs], (
        f" ({repeats_text(left[:n])} of {full}, whole{rest})"
    )


def repeats_text(repeats: list[int]) -> str:
    return f"repeat {repeats[0]}" if len(repeats) == 1 else f"repeats {repeats[0]}-{repeats[-1]}"


def plan_lines(runs: list[GpuRun], dry_run: bool, budget_s: float, tests: bool) -> list[str]:
    """Before anything is measured: every target point the session will measure (or that the plan lacks
    it), and what each run should cost on an H200 against the budget."""
    targets = next(run for run in runs if run.study == TARGETS_RUN)
    plan, _ = sweep.merged_plan(targets.specs, targets.only)
    lines = [f"{TARGETS_RUN}, first ({targets.specs[0].repeats} repeats):", *gpu_targets.planned(plan, dry_run)]
    return lines + gpu_budget.lines(gpu_budget.estimate(runs, tests, budget_s), budget_s, tests)


def summary(
    out: Path, dry_run: bool = False, predicted: Path | None = None, runs: list[GpuRun] | None = None
) -> list[str]:
    """The GPU targets against the records in `out` (a dry run's are tiny: judged, not meaningful), each
    missing one said missing with why, and the pre-registered predictions in `predicted` (a results
    folder) scored on them. `runs`: the session's plan (a target it lacks is said so)."""
    lines = []
    path = out / GPU_RECORDS
    frame = store.load(path) if path.exists() else None
    targets = next((run for run in runs or [] if run.study == TARGETS_RUN), None)
    plan = sweep.merged_plan(targets.specs, targets.only)[0] if targets else None
    lines += gpu_targets.verdicts(frame, dry_run, plan)
    if runs:
        lines += claim_lines(out, runs)
    if frame is not None and col.ERROR in frame:
        lines += throughput_lines(frame[frame[col.ERROR].isna()], dry_run)
    path = out / "gpu_embedding.csv"
    if path.exists():
        lines += embedding_lines(store.load(path), dry_run)
    if predicted is not None and (predicted / predictions.PREDICTIONS).exists():
        scored = predictions.score(predicted, records=out)
        if not scored.empty:  # the counts and lines the README and notebook 00 print, from the same functions
            counts = predictions.counts(scored).to_string().splitlines()
            lines += [
                "predictions scored (per claim):",
                *(f"  {row}" for row in counts),
                *findings.prediction_summary(scored),
            ]
    if dry_run:
        lines.insert(0, "dry run (CPU, tiny sizes): the verdicts below exercise the code, they judge nothing")
    return lines


def verdict(ok: bool) -> str:
    return "met" if ok else "missed"


def throughput_lines(ok, dry_run: bool) -> list[str]:
    """bf16 against fp32, graph against eager, busy share and bound per preset and batch; placements."""
    lines = []
    large_batch = DRY_BATCHES[16384] if dry_run else 16384
    presets = ok[ok[col.STUDY].isin(PRESET_STUDIES)]
    if col.CAPTURE in presets:
        for (cfg, batch), group in presets.groupby([col.CONFIG_NAME, col.BATCH_SIZE]):
            by = group.groupby(col.VARIANT)[col.SAMPLES_PER_S].median()
            hbm = group[group[col.VARIANT] == GPU_HBM]
            busy, kernels = hbm["gpu_busy_fraction"].median(), hbm["kernels_per_step"].median()
            bound = "/".join(sorted(set(group["bound"].dropna())))
            parts = [f"{cfg} batch {batch:,}:"]
            large = batch >= large_batch
            if GPU_HBM in by and GPU_HBM_FP32 in by:
                ratio = by[GPU_HBM] / by[GPU_HBM_FP32]
                parts.append(f"bf16/fp32 {ratio:.2f}" + (f" (target >= 1: {verdict(ratio >= 1)})" if large else ""))
            if GPU_HBM in by and GPU_EAGER in by:
                parts.append(f"graph/eager {by[GPU_HBM] / by[GPU_EAGER]:.2f}")
            judged = large and busy == busy
            parts.append(f"GPU busy {busy:.2f}" + (f" (target 0.90: {verdict(busy >= TARGET_BUSY)})" if judged else ""))
            if "host_enqueue_ms" in hbm:
                parts.append(f"host enqueues a step in {hbm['host_enqueue_ms'].median():.3f} ms")
            parts.append(f"bound {bound}, {kernels:.0f} kernels/step")
            clipped = hbm["profile_clipped_share"].median() if "profile_clipped_share" in hbm else 0.0
            if clipped > 0.05:  # device time stamped outside its window: the clocks disagree
                parts.append(f"(busy doubtful: {clipped:.0%} of the kernel time fell outside the profiled window)")
            lines.append(" ".join(parts))
    if "profile_note" in ok:
        blind = ok[(ok[col.DEVICE] == "cuda") & ok["profile_note"].notna()]  # (an empty note reads back as NaN)
        if not blind.empty:
            lines.append(f"profiler: {len(blind)} GPU record(s) without kernels ({blind['profile_note'].iloc[0]})")
    floor = ok[ok[col.STUDY] == DISPATCH_FLOOR]
    if not floor.empty:
        rates = floor.groupby(col.VARIANT)[col.SAMPLES_PER_S].median()
        text = ", ".join(f"{v} {r:,.0f}" for v, r in rates.items())
        lines.append(f"kaggle batch 128 (dispatch-overhead floor, no claim): {text} samples/s")
    place = ok[ok[col.STUDY] == "gpu-placements"]
    for v in (GPU_CACHED, GPU_CACHED_LFU, GPU_UVM, GPU_HOST):  # H4's quantity; its verdict is the ledger's alone
        ratio = clusters.paired_ratio(place, v, GPU_HBM)
        if ratio.n:
            said = f"{wording.describe(ratio.center, ratio.low, ratio.high, 'x')} ({ratio.n} pairs)"
            lines.append(f"{v.removeprefix('gpu-')} / hbm (Zipf 1.05, 10% of rows cached), paired: {said}")
    return lines


def embedding_lines(emb, dry_run: bool) -> list[str]:
    """The hbm kernels' bytes over the copy bandwidth: lookup alone, and lookup + backward + update."""
    hbm = emb[(emb[col.PLACEMENT] == "hbm") & (emb[col.CONFIG_NAME] == ("tiny" if dry_run else "dlrm-benchmark"))]
    if hbm.empty or "embedding_copy_fraction" not in hbm:
        return []
    lines = []
    if "embedding_forward_copy_fraction" in hbm:
        forward = hbm["embedding_forward_copy_fraction"].median()
        lines.append(f"dlrm-benchmark hbm lookup bytes / copy bandwidth: {forward:.2f} "
                     f"(target 0.50: {verdict(forward >= TARGET_FORWARD_FRACTION)})")  # fmt: skip
    whole = hbm["embedding_copy_fraction"].median()
    lines.append(f"dlrm-benchmark hbm lookup + update bytes / copy bandwidth: {whole:.2f} "
                 f"(target 0.30: {verdict(whole >= TARGET_COPY_FRACTION)})")  # fmt: skip
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dlrm_study.lending.gpu_session", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=Path, default=Path("results/gpu-run"), help="folder for the records")
    # 290 s: with start-up and the tests, one device call stays under 6 minutes (the script's timeout is 340 s).
    parser.add_argument("--budget-s", type=float, default=290.0, help="stop starting new points after this")
    parser.add_argument("--dry-run", action="store_true", help="on the CPU at tiny sizes (CI)")
    parser.add_argument("--skip-tests", action="store_true")
    parser.add_argument(
        "--predictions", type=Path, default=Path("results"), help="folder of gpu_predictions.csv to score"
    )
    parser.add_argument("--lending", action="store_true", help="one lending's plan: isolated phases, verdicts first")
    parser.add_argument(
        "--part", choices=sorted(gpu_lending.LENDINGS), help="(lending) which lending (default: `choose_lending`)"
    )
    parser.add_argument(
        "--judged-from", type=Path, default=Path("results"), help="(lending) the records `choose_lending` reads"
    )
    parser.add_argument("--resume-from", type=Path, action="append", default=[], help="an earlier call's out folder")
    parser.add_argument("--work", type=Path, help="(lending) folder for the records as made (default: a temporary one)")
    parser.add_argument("--phase", help=argparse.SUPPRESS)  # a lending's child: run this one phase
    parser.add_argument("--deadline-s", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.phase:
        return phase_main(args)
    if args.lending:
        return lending_main(args)
    start = time.monotonic()
    try:
        if not args.dry_run and not torch.cuda.is_available():
            raise UsageError("no CUDA GPU here: run on a GPU machine, or pass --dry-run")
        args.out.mkdir(parents=True, exist_ok=True)
        name = torch.cuda.get_device_name() if torch.cuda.is_available() and not args.dry_run else "cpu (dry run)"
        print(f"gpu_check on {name}: torch {torch.__version__}, commit {provenance.git_commit()}, out {args.out}")
        runs = gpu_grid.runs(args.out, args.dry_run)
        plan = plan_lines(runs, args.dry_run, args.budget_s, not args.skip_tests)
        print("\n".join(plan), flush=True)
        lines = [] if args.skip_tests else [run_tests(args.dry_run)]
        lines.append(choose_profiler(args.dry_run))
        print(lines[-1], flush=True)
        try:
            embedding_records(args.out, args.dry_run)
        except Exception as err:  # the grid still runs (see run_sweeps)
            lines.append(f"embedding benchmark: STOPPED by {type(err).__name__}: {first_line(err)}")
            print(lines[-1], flush=True)
        deadline = start + args.budget_s
        # A verdict run in whole repeats, gated on the H200 estimate (a dry run, on the CPU, measures them all).
        gate = None if args.dry_run else partial(whole, start=start, budget_s=args.budget_s, tests=not args.skip_tests)
        for run in runs:
            try:
                line = run_sweeps(run, deadline, gate)
            except runner.DeviceLost as err:
                line = f"{run.study}: STOPPED, and the runs after it not started: {first_line(err)}"
                lines.append(line)
                print(line, flush=True)
                break
            print(line, flush=True)
            lines.append(line)
    except UsageError as err:
        print(f"gpu_check: {err}", file=sys.stderr)
        return 2
    verdicts = summary(args.out, args.dry_run, args.predictions, runs)
    text = "\n".join([*plan, "", *lines, "", *verdicts, f"total {time.monotonic() - start:.0f} s"]) + "\n"
    (args.out / "summary.txt").write_text(text)
    print(text)
    return 0


def phase_main(args: argparse.Namespace) -> int:
    """A lending's child process: one phase of the plan, records in --work, no point started past --deadline-s."""
    deadline = time.monotonic() + args.deadline_s
    plan = {phase.name: phase for phase in gpu_lending.phases(args.work, args.dry_run, args.part or "A")}
    if args.phase not in plan:
        print(f"gpu_check: unknown phase {args.phase!r} (choose from {', '.join(plan)})", file=sys.stderr)
        return 2
    return gpu_phases.run_phase(plan[args.phase], args.work, args.dry_run, deadline)


def lending_main(args: argparse.Namespace) -> int:
    """One lending: the plan's phases in order, each in its own process under a watchdog, records mirrored
    into --out as they are made, the summary rewritten after every phase."""
    start = time.monotonic()
    isolated.end_on_sigterm()
    if not args.dry_run and not torch.cuda.is_available():
        print("gpu_check: no CUDA GPU here: run on a GPU machine, or pass --dry-run", file=sys.stderr)
        return 2
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    work = args.work or Path(tempfile.mkdtemp(prefix="dlrm-lending-"))
    log = out / LENDING_LOG
    seeded = isolated.seed(work, [*args.resume_from, out])
    # One invocation: every phase's records name it, so the court can leave out a lending whose kernels failed
    # their numerics check (`analysis.readers.checked_kernels`) and a verdict can leave out one lending whole.
    os.environ.setdefault(settings.INVOCATION, f"lending-{provenance.new_run_id()}")
    build = start_kernel_build(work)  # t = 0: only the host's CPU loops need the C++ kernels
    part, why = (args.part, "named by --part") if args.part else choose_lending(args.judged_from)
    plan = gpu_lending.phases(work, args.dry_run, part)
    name = "cpu (dry run)" if args.dry_run else torch.cuda.get_device_name()
    head = [
        f"gpu lending on {name}: torch {torch.__version__}, commit {provenance.git_commit()}, out {out}, work {work}",
        f"resumed from {len(seeded)} records file(s): {', '.join(seeded)}" if seeded else "no earlier records",
        f"lending {part}: {why}",
        *gpu_lending.plan_lines(plan, args.budget_s, part),
    ]
    if args.dry_run:  # what the call on an H200 would do, by the same estimate (the dry run's own are tiny sizes)
        head += [
            "on an H200:",
            *gpu_lending.plan_lines(gpu_lending.phases(work / "h200-plan", False, part), 540.0, part),
        ]
    isolated.say(log, *head)
    done: list[str] = []
    steps = [
        isolated.Step(phase.name, partial(phase_argv, phase.name, work, args.dry_run, part), phase.limit_s)
        for phase in plan
    ]
    if args.dry_run:  # a dry run's phases take what a busy CPU takes: only the budget bounds them
        steps = [dataclasses.replace(step, limit_s=lambda left: left) for step in steps]

    planned = list({id(run): run for phase in plan for run in phase.runs}.values())  # each run once

    def after(line: str) -> None:
        done.append(line)
        write_summary(out, work, args.dry_run, [*head, "", *done], planned)

    write_summary(out, work, args.dry_run, head, planned)
    isolated.run_phases(steps, work, out, log, start + args.budget_s, after)
    isolated.stop(build) if build is not None else None
    print(f"gpu lending: done in {time.monotonic() - start:.0f} s; summary in {out / 'summary.txt'}")
    return 0


LENDING_LOG = "lending.log"
STOP_MARGIN_S = 20.0  # a phase starts no point this close to its watchdog: a measurement and its record fit


def phase_argv(name: str, work: Path, dry_run: bool, part: str, limit_s: float) -> list[str]:
    deadline = limit_s if dry_run else max(1.0, limit_s - STOP_MARGIN_S)
    argv = [
        sys.executable,
        "-m",
        "dlrm_study.lending.gpu_session",
        "--phase",
        name,
        "--work",
        str(work),
        "--part",
        part,
    ]
    return [*argv, "--deadline-s", f"{deadline:.0f}", *(["--dry-run"] if dry_run else [])]


JUDGED = (Status.REPRODUCED, Status.NOT_REPRODUCED, Status.INCONCLUSIVE, Status.FRAGILE)  # runs enough to judge


def choose_lending(results: Path, profile: str = "quick") -> tuple[str, str]:
    """The lending to run (`gpu_lending.LENDINGS`, in order): the first with a claim that no GPU machine has judged
    at today's code in `results` (a verdict word, inconclusive or fragile: the runs a word needs were there); why,
    in words. Records that cannot be read choose the first lending, and say so."""
    first = next(iter(gpu_lending.LENDINGS))
    try:
        evidence, table = reading.judged(results, profile)
    except Exception as err:  # the lending must go on: the first one, said
        return first, f"the records in {results} could not be judged ({type(err).__name__}: {first_line(err)})"
    hosts = [m for m in evidence.machines() if Machine.parse(m).has_gpu and not ledger.earlier_code(evidence, m)]
    for part, claims in gpu_lending.LENDINGS.items():
        open_ = [c for c in claims if not any(table[c][h].status in JUDGED for h in hosts if h in table[c])]
        if open_:
            return part, f"{', '.join(open_)} not yet judged at today's GPU code in {results}"
    return first, f"every H claim is judged at today's GPU code in {results}: its runs measured again"


def start_kernel_build(work: Path) -> "subprocess.Popen | None":
    """The C++ kernels compiled in the background from t = 0 (a later load waits on its lock); None where the
    PyTorch twins are asked for (DLRM_STUDY_KERNELS=torch)."""
    if settings.current().kernels == "torch":
        return None
    code = "from dlrm_study.model import kernels; kernels.load()"
    with open(work / "kernel-build.log", "w") as sink:
        return subprocess.Popen(
            [sys.executable, "-c", code], stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )


def write_summary(out: Path, work: Path, dry_run: bool, lines: list[str], runs: list[GpuRun]) -> None:
    """out/summary.txt, atomically: the plan, the phases so far, one line per headline record, the targets and the
    runs each claim of the lending's plan (`runs`) has."""
    try:
        judged = ["", *headline_lines(work), "", *summary(work, dry_run, None, runs)]
    except Exception as err:  # the summary is the lending's record: what is known is written anyway
        judged = ["", f"records not summarized: {type(err).__name__}: {first_line(err)}"]
    isolated.write_atomic(out / "summary.txt", "\n".join([*lines, *judged]) + "\n")


def headline_lines(work: Path) -> list[str]:
    """One line per record of the studies the summary lists (the headline's, and the same-host pair's): what ran, and
    its rate or error."""
    path = work / GPU_RECORDS
    if not path.exists():
        return ["headline and same-host records: none yet"]
    frame = store.load(path)
    frame = frame[frame[col.STUDY].isin(gpu_lending.LISTED_STUDIES)]
    lines = [f"headline and same-host records ({len(frame)}):"]
    for rec in frame.to_dict("records"):
        what = f"{rec[col.STUDY]} {rec[col.CONFIG_NAME]} batch {rec.get(col.BATCH_SIZE)} {rec[col.VARIANT]}"
        what += f" repeat {rec[col.REPEAT]}"
        error = rec.get(col.ERROR)
        if isinstance(error, str) and error:
            lines.append(f"  {what}: ERROR {error[:160]}")
            continue
        fallback = rec.get(gpu.KERNEL_FALLBACK)
        note = f", {fallback}" if isinstance(fallback, str) and fallback else ""
        lines.append(f"  {what}: {rec[col.SAMPLES_PER_S]:,.0f} samples/s (kernels {rec.get(col.KERNEL_PATH)}{note})")
    return lines


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
