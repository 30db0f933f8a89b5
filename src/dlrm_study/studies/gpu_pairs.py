"""Per claim H1-H4: the runs and pairs its rule (`analysis.verdicts`) counts at its verdict points in a GPU
session's records, against the `clusters.MIN_RUNS` runs a verdict word needs, and where fewer, why (a GPU
session's summary). Counts only: the verdicts themselves are the claim ledger's (`report.ledger`).
"""

from pathlib import Path

from dlrm_study.analysis import claims, clusters, stats
from dlrm_study.analysis.evidence import H1_KNOBS, Evidence
from dlrm_study.analysis.placement import placement_records
from dlrm_study.analysis.readers import sweep_records
from dlrm_study.analysis.sensitivity import sensitivity_records
from dlrm_study.analysis.wording import count
from dlrm_study.config.variants import GPU_CACHED, GPU_HBM, GPU_HOST
from dlrm_study.measure import runner, sweep
from dlrm_study.plans.gpu import PLACEMENTS_RUN, GpuRun
from dlrm_study.plans.sensitivity import GPU_RECORDS
from dlrm_study.records import columns as col
from dlrm_study.records.machine import machine_key


def pending(run: GpuRun) -> list[runner.Task]:
    """The run's measurements its records file lacks, in the runner's order (all its runs and repeats)."""
    plan, _ = sweep.merged_plan(run.specs, run.only)
    first = run.specs[0]
    tasks = runner.schedule(plan, first.repeats, runner.machine_of, runs=first.runs)
    return runner.pending(tasks, Path(first.out))


CLAIM_POINTS = {  # what each rule pairs (analysis.verdicts), and over what the fewest are counted
    "H1": "each model-shape knob's two ends (gpu-hbm; the fewest over the knobs)",
    "H2": "the grid's dense-features ends (GPU over host CPU; the fewest over the table counts)",
    "H3": "the grid's table-count ends (GPU over host CPU; the fewest over the dense-feature counts)",
    "H4": "host and cached with hbm (the fewer of the two)",
}


def claim_lines(out: Path, runs: list[GpuRun]) -> list[str]:
    """Per claim H1-H4: the runs (and pairs) its rule counts at its verdict points in `out`'s records of this
    machine, against the `clusters.MIN_RUNS` runs a verdict word needs; where fewer, why. Counts only: the
    verdicts themselves are the claim ledger's (`report.ledger`)."""
    by_claim = {claim: run for run in runs for claim in run.claims}
    left: dict[str, int] = {}  # a run's measurements not yet recorded, by study
    lines = []
    for claim, what in CLAIM_POINTS.items():
        run = by_claim.get(claim)
        if run is None:
            lines.append(f"{claim}: its verdict points are not in this plan")
            continue
        try:
            pairs, found = claim_counts(claim, out, run)
            if found < clusters.MIN_RUNS and run.study not in left:
                left[run.study] = len(pending(run))
        except Exception as err:  # the summary is the session's record: a count that fails must not stop it
            text = str(err).strip().splitlines()
            lines.append(f"{claim}: its runs not counted: {type(err).__name__}: {text[0][:300] if text else ''}")
            continue
        counted = f"{count(found, 'run')} ({count(pairs, 'pair')}) at {what}"
        if found >= clusters.MIN_RUNS:
            lines.append(f"{claim}: {counted}: enough for a verdict ({clusters.MIN_RUNS} runs needed)")
            continue
        planned = run.specs[0].runs
        if planned < clusters.MIN_RUNS:
            why = f"this plan measures {count(planned, 'run')}"
        elif left[run.study]:
            why = f"{left[run.study]} measurements of {run.study} left for a later call"
        else:
            why = f"{run.study} is measured: a failure, or a run cut short, left runs out"
        lines.append(f"{claim}: {counted}, of the {clusters.MIN_RUNS} runs a verdict needs: {why}")
    return lines


def claim_counts(claim: str, out: Path, run: GpuRun) -> tuple[int, int]:
    """(pairs, runs) of the comparison with fewest among those the claim's rule reads, as the rule pairs them
    (within one repeat of one run, on this machine); (0, 0) before any record."""
    if not (out / GPU_RECORDS).exists():
        return 0, 0
    if claim == "H4":
        frame = placement_records(out, PLACEMENTS_RUN)
        if frame.empty or col.MACHINE not in frame:
            return 0, 0
        frame = frame[frame[col.MACHINE] == machine_key()]
        found = [clusters.paired_ratio(frame, v, GPU_HBM) for v in (GPU_HOST, GPU_CACHED)]
        return min(r.n for r in found), min(r.runs for r in found)
    named = {spec.name: spec for spec in run.specs}
    if claim == "H1":
        found = []
        for knob in H1_KNOBS:
            spec = next(s for name, s in named.items() if name.startswith(f"gpu-sensitivity-{knob.replace('_', '-')}-"))
            frame = sensitivity_records(knob, spec)
            ends = (frame["x"].max(), frame["x"].min()) if not frame.empty else (None, None)
            found.append(clusters.paired_ratio(frame, *ends, between="x") if not frame.empty else stats.NO_RATIO)
        return min(r.n for r in found), min(r.runs for r in found)
    grid = next(s for name, s in named.items() if name.startswith("gpu-dense-sparse-grid-"))
    evidence = Evidence(gpu_grid=sweep_records(grid))  # the grid alone: what H2 and H3 read
    rule = claims.claim(claim)
    return rule.count(evidence), rule.runs(evidence)
