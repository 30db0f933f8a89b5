"""Per claim H1-H4: the pairs its rule (`analysis.verdicts`) counts at its verdict points in a GPU session's
records, against the `stats.MIN_PAIRS` a verdict word needs, and where fewer, why (a GPU session's summary).
Pairs only: the verdicts themselves are the claim ledger's (`report.ledger`).
"""

from pathlib import Path

from dlrm_study.analysis import claims, clusters, stats
from dlrm_study.analysis.evidence import H1_KNOBS, Evidence
from dlrm_study.analysis.placement import placement_records
from dlrm_study.analysis.readers import sweep_records
from dlrm_study.analysis.sensitivity import sensitivity_records
from dlrm_study.config.variants import GPU_CACHED, GPU_HBM, GPU_HOST, GPU_UVM
from dlrm_study.measure import runner, sweep
from dlrm_study.records import columns as col
from dlrm_study.records.machine import machine_key
from dlrm_study.studies.gpu import PLACEMENTS_RUN, GpuRun
from dlrm_study.studies.sensitivity import GPU_RECORDS


def pending(run: GpuRun) -> list[runner.Task]:
    """The run's measurements its records file lacks, in the runner's order (all its repeats)."""
    plan, _ = sweep.merged_plan(run.specs, run.only)
    return runner.pending(runner.schedule(plan, run.specs[0].repeats, runner.machine_of), Path(run.specs[0].out))


CLAIM_POINTS = {  # what each rule pairs (analysis.verdicts), and over what the fewest pairs are counted
    "H1": "each model-shape knob's two ends (gpu-hbm; the fewest over the knobs)",
    "H2": "the grid's dense-features ends (GPU over host CPU; the fewest over the table counts)",
    "H3": "the grid's table-count ends (GPU over host CPU; the fewest over the dense-feature counts)",
    "H4": "host, uvm and cached with hbm (the fewest of the three)",
}


def claim_lines(out: Path, runs: list[GpuRun]) -> list[str]:
    """Per claim H1-H4: the pairs its rule (`analysis.verdicts`) counts at its verdict points in `out`'s
    records of this machine (all repeats), against the `stats.MIN_PAIRS` a verdict word needs; where
    fewer, why. Pairs only: the verdicts themselves are the claim ledger's (`report.ledger`)."""
    by_claim = {claim: run for run in runs for claim in run.claims}
    left: dict[str, int] = {}  # a run's measurements not yet recorded, by study
    lines = []
    for claim, what in CLAIM_POINTS.items():
        run = by_claim.get(claim)
        if run is None:
            lines.append(f"{claim}: its verdict points are not in this plan")
            continue
        try:
            n = claim_pairs(claim, out, run)
            if n < stats.MIN_PAIRS and run.study not in left:
                left[run.study] = len(pending(run))
        except Exception as err:  # the summary is the session's record: a count that fails must not stop it
            text = str(err).strip().splitlines()
            lines.append(f"{claim}: its pairs not counted: {type(err).__name__}: {text[0][:300] if text else ''}")
            continue
        if n >= stats.MIN_PAIRS:
            lines.append(f"{claim}: {n} pairs at {what}: enough for a verdict ({stats.MIN_PAIRS} needed)")
            continue
        planned = run.specs[0].repeats
        if planned < stats.MIN_PAIRS:
            why = f"this plan measures {planned} repeats"
        elif left[run.study]:
            why = f"{left[run.study]} measurements of {run.study} left for a later call"
        else:
            why = f"{run.study} is measured: a failure, or a repeat split between two calls, left pairs out"
        lines.append(f"{claim}: {n} of the {stats.MIN_PAIRS} pairs a verdict needs at {what}: {why}")
    return lines


def claim_pairs(claim: str, out: Path, run: GpuRun) -> int:
    """The fewest pairs among the comparisons the claim's rule reads, as the rule pairs them (within one
    repeat of one run, on this machine); 0 before any record."""
    if not (out / GPU_RECORDS).exists():
        return 0
    if claim == "H4":
        frame = placement_records(out, PLACEMENTS_RUN)
        if frame.empty or col.MACHINE not in frame:
            return 0
        frame = frame[frame[col.MACHINE] == machine_key()]
        return min(clusters.paired_ratio(frame, v, GPU_HBM).n for v in (GPU_HOST, GPU_UVM, GPU_CACHED))
    named = {spec.name: spec for spec in run.specs}
    if claim == "H1":
        counts = []
        for knob in H1_KNOBS:
            spec = next(s for name, s in named.items() if name.startswith(f"gpu-sensitivity-{knob.replace('_', '-')}-"))
            frame = sensitivity_records(knob, spec)
            ends = (frame["x"].max(), frame["x"].min()) if not frame.empty else (None, None)
            counts.append(clusters.paired_ratio(frame, *ends, between="x").n if not frame.empty else 0)
        return min(counts)
    grid = next(s for name, s in named.items() if name.startswith("gpu-dense-sparse-grid-"))
    evidence = Evidence(gpu_grid=sweep_records(grid))  # the grid alone: what H2 and H3 read
    return claims.claim(claim).count(evidence)  # as the claim's own rule pairs them, over every repeat as H1 and H4
