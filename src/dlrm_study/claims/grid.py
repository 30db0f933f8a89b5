"""What H2 and H3 share: the dense/sparse grid's GPU over CPU, and its change along one axis at every value of the
other (docs/claims.md). H2 reads it along dense features, H3 along tables.
"""

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from dlrm_study.analysis import stats
from dlrm_study.analysis.evidence import Evidence
from dlrm_study.analysis.judgement import Judgement, Status, decided
from dlrm_study.analysis.power import Design
from dlrm_study.analysis.readers import sweep_records
from dlrm_study.analysis.sensitivity import gpu_over_cpu_pairs
from dlrm_study.analysis.views import side
from dlrm_study.claims.claim import HPCA, Claim, Rule
from dlrm_study.claims.rule import Lens, counted, gpu_early, ratio_text, too_few
from dlrm_study.plans.gpu import GpuRun
from dlrm_study.records import columns as col
from dlrm_study.rules import literal

GRID_MARGIN = literal("H2_H3", "margin")
DENSE = "model.dense_features"
TABLES = "tables"


def grid_pairs(evidence: Evidence, along: str) -> tuple[list[tuple[object, pd.DataFrame]], str | None]:
    """GPU over the fastest CPU loop, paired per repeat within one run on this machine
    (`sensitivity.gpu_over_cpu_pairs`), and its change from the low to the high end of `along` at
    every value of the other axis, paired within runs: (other value, pairs) per value."""
    ratio, best = gpu_over_cpu_pairs(evidence.gpu_grid)
    if ratio.empty:
        return [], best
    other = TABLES if along == DENSE else DENSE
    lo, hi = ratio[along].min(), ratio[along].max()
    changes = []
    for value, part in ratio.groupby(other):
        ends = part[part[along].isin([lo, hi])].assign(end=lambda f: f[along].map({lo: "lo", hi: "hi"}))
        ends = ends.assign(**{col.VARIANT: ends["end"], col.SAMPLES_PER_S: ends["ratio"]}).drop(columns="ratio")
        changes.append((value, stats.pairs(ends, "hi", "lo")))
    return changes, best


def grid_changes(evidence: Evidence, lens: Lens, along: str, confidence: float = stats.CONFIDENCE) -> tuple:
    """(other value, Ratio) of each change along `along` (`grid_pairs`), and the CPU loop used."""
    found, best = grid_pairs(evidence, along)
    return [(value, lens.ratio(pairs, confidence)) for value, pairs in found], best


def grid_claim(evidence: Evidence, machine: str, lens: Lens, along: str, grows: bool) -> Judgement:
    """H2 (along dense features, grows) and H3 (along tables, shrinks): the change of GPU/CPU between the
    axis's ends at every value of the other axis. Reproduced: every change beyond GRID_MARGIN the claimed
    way; not reproduced: some change's interval (at 1 - 0.05/m) short of GRID_MARGIN that way."""
    if (early := gpu_early(evidence, machine)) is not None:
        return early
    changes, best = grid_changes(evidence, lens, along)
    if not changes:
        return Judgement(Status.NOT_YET, "needs the GPU host's CPU records of the grid, measured in the same run")
    strict, _ = grid_changes(evidence, lens, along, stats.family(len(changes)))
    name = "dense features" if along == DENSE else "tables"
    parts = "; ".join(f"at {v}: {ratio_text(r)}" for v, r in changes)
    margin = GRID_MARGIN if grows else 1 / GRID_MARGIN
    text = (f"change of GPU / {best} (same machine, paired within runs) from the fewest to the most {name}: {parts}; "
            f"margin {margin:.2f}x")  # fmt: skip
    numbers = {str(v): r for v, r in changes}
    if not all(lens.enough(r) for _, r in changes):
        return counted(too_few(numbers, text), evidence.gpu_grid)
    claimed = "above" if grows else "below"
    if all(side(r, margin) == claimed for _, r in changes):
        return counted(decided(Status.REPRODUCED, text, numbers), evidence.gpu_grid)
    if any(side(r, margin) == ("below" if grows else "above") for _, r in strict):
        return counted(decided(Status.NOT_REPRODUCED, text, numbers), evidence.gpu_grid)
    return counted(decided(Status.INCONCLUSIVE, text, numbers), evidence.gpu_grid)


def grid_counts(claim: Claim, out: Path, run: GpuRun) -> tuple[int, int]:
    """(pairs, runs) of `claim`'s deciding comparisons in a GPU session's records of the grid alone (what H2 and H3
    read)."""
    grid = next(spec for spec in run.specs if spec.name.startswith("gpu-dense-sparse-grid-"))
    evidence = Evidence(gpu_grid=sweep_records(grid))
    return claim.count(evidence), claim.runs(evidence)


def deciding(along: str) -> Callable[[Evidence], list[pd.DataFrame]]:
    return lambda evidence: [p for _, p in grid_pairs(evidence, along)[0]]


def along_the_grid(claim_id: str, text: str, claimed: str, rule: Rule, along: str, names: Callable[[str], str],
                   gpu_points: str, designs: tuple[Design, ...]) -> Claim:  # fmt: skip
    """H2 or H3: HPCA's claim read on the grid along `along` by `rule`, in notebook 03, its pairs counted in a GPU
    session's grid records (`grid_counts`)."""
    made = Claim(claim_id, text, HPCA, claimed, ("gpu_grid",), rule, "03_dense_sparse_sensitivity", deciding(along),
                 names=names, figures=("03_gpu_over_cpu",), gpu_points=gpu_points, designs=designs)  # fmt: skip
    return dataclasses.replace(made, session_counts=lambda out, run: grid_counts(made, out, run))
