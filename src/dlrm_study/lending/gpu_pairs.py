"""Per GPU claim (H1-H4): the runs and pairs its rule (`claims`) counts at its verdict points in a GPU
session's records, against the `clusters.MIN_RUNS` runs a verdict word needs, and where fewer, why (a GPU
session's summary). Counts only: the verdicts themselves are the claim ledger's (`report.ledger`).
"""

from pathlib import Path

from dlrm_study.analysis import clusters
from dlrm_study.analysis.wording import count
from dlrm_study.claims import registry
from dlrm_study.measure import runner, sweep
from dlrm_study.plans.gpu import GpuRun
from dlrm_study.plans.sensitivity import GPU_RECORDS


def pending(run: GpuRun) -> list[runner.Task]:
    """The run's measurements its records file lacks, in the runner's order (all its runs and repeats)."""
    plan, _ = sweep.merged_plan(run.specs, run.only)
    first = run.specs[0]
    tasks = runner.schedule(plan, first.repeats, runner.machine_of, runs=first.runs)
    return runner.pending(tasks, Path(first.out))


def claim_lines(out: Path, runs: list[GpuRun]) -> list[str]:
    """Per claim H1-H4: the runs (and pairs) its rule counts at its verdict points in `out`'s records of this
    machine, against the `clusters.MIN_RUNS` runs a verdict word needs; where fewer, why. Counts only: the
    verdicts themselves are the claim ledger's (`report.ledger`)."""
    by_claim = {claim: run for run in runs for claim in run.claims}
    left: dict[str, int] = {}  # a run's measurements not yet recorded, by study
    lines = []
    for rule in registry.gpu_claims():
        claim, what = rule.id, rule.gpu_points
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
    (within one repeat of one run, on this machine: the claim's `session_counts`); (0, 0) before any record."""
    if not (out / GPU_RECORDS).exists():
        return 0, 0
    return registry.claim(claim).session_counts(out, run)
