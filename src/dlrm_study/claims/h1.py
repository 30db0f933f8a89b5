"""H1 (HPCA 2021): GPU throughput depends strongly on the model's shape.

Reproduced where some model-shape knob moves gpu-hbm samples/s by more than H1_FACTOR between its ends, either way
(intervals at 1 - 0.05/6); not reproduced where every knob stays within H1_FACTOR both ways.
"""

from pathlib import Path

import pandas as pd

from dlrm_study.analysis import clusters, stats
from dlrm_study.analysis.evidence import H1_KNOBS, Evidence
from dlrm_study.analysis.judgement import Judgement, Status, decided
from dlrm_study.analysis.power import GPU_SPREAD, LENDING_RUNS, Design
from dlrm_study.analysis.sensitivity import sensitivity_records
from dlrm_study.analysis.views import side
from dlrm_study.analysis.wording import variant_words
from dlrm_study.claims.claim import HPCA, Claim
from dlrm_study.claims.rule import Lens, counted, gpu_early, ratio_text, too_few
from dlrm_study.config.variants import GPU_HBM
from dlrm_study.plans.gpu import GpuRun
from dlrm_study.plans.sensitivity import KNOBS
from dlrm_study.rules import literal

ID = "H1"
H1_FACTOR = literal(ID, "factor")


def h1_pairs(evidence: Evidence) -> dict[str, pd.DataFrame]:
    """Each knob's pairs: gpu-hbm samples/s at its largest value over its smallest, within runs."""
    found = {}
    for knob in H1_KNOBS:
        frame = evidence.gpu_knobs.get(knob, pd.DataFrame())
        if not frame.empty:
            found[knob] = stats.pairs(frame, frame["x"].max(), frame["x"].min(), between="x")
    return found


def h1(evidence: Evidence, machine: str, lens: Lens) -> Judgement:
    """Some model-shape knob moves gpu-hbm samples/s by more than H1_FACTOR between its ends (either way,
    intervals at 1 - 0.05/6); every knob within H1_FACTOR both ways refutes it."""
    if (early := gpu_early(evidence, machine)) is not None:
        return early
    found = h1_pairs(evidence)
    if not found:  # GPU records, but none of a knob's sweep (a lending that ran only its headline)
        return Judgement(Status.NOT_YET, "no knob sweep on this machine's GPU")
    family = stats.family(len(H1_KNOBS))
    effects = {k: lens.ratio(f) for k, f in found.items()}
    strict = {k: lens.ratio(f, family) for k, f in found.items()}
    judged = {k for k, r in effects.items() if lens.enough(r)}
    said = [f"{KNOBS[k][2]} {ratio_text(r)}" for k, r in effects.items() if r.n]
    if unpaired := [KNOBS[k][2] for k, r in effects.items() if not r.n]:  # named once, not once per knob
        said.append(f"not paired (0 pairs): {', '.join(unpaired)}")
    text = "; ".join(said)
    text = (f"samples/s with {variant_words(GPU_HBM)} between each knob's ends, paired within runs: {text}; "
            f"beyond {H1_FACTOR}x either way at {family:.1%} each ({len(H1_KNOBS)} knobs)")  # fmt: skip
    frames = list(evidence.gpu_knobs.values())
    if not judged:
        return counted(too_few(effects, text), *frames)
    if any(side(strict[k], 1 / H1_FACTOR, H1_FACTOR) in ("above", "below") for k in judged):
        return counted(decided(Status.REPRODUCED, text, {k: strict[k] for k in judged}), *frames)
    if judged == set(H1_KNOBS) and all(side(effects[k], 1 / H1_FACTOR, H1_FACTOR) == "within" for k in judged):
        return counted(decided(Status.NOT_REPRODUCED, text, effects), *frames)
    return counted(decided(Status.INCONCLUSIVE, text, effects), *frames)


def deciding(evidence: Evidence) -> list[pd.DataFrame]:
    found = h1_pairs(evidence)
    return [found.get(k, pd.DataFrame()) for k in H1_KNOBS]


def session_counts(out: Path, run: GpuRun) -> tuple[int, int]:
    """(pairs, runs) of the knob with fewest in a GPU session's records, each knob's ends paired as the rule pairs
    them."""
    named = {spec.name: spec for spec in run.specs}
    found = []
    for knob in H1_KNOBS:
        spec = next(s for name, s in named.items() if name.startswith(f"gpu-sensitivity-{knob.replace('_', '-')}-"))
        frame = sensitivity_records(knob, spec)
        ends = (frame["x"].max(), frame["x"].min()) if not frame.empty else (None, None)
        found.append(clusters.paired_ratio(frame, *ends, between="x") if not frame.empty else stats.NO_RATIO)
    return min(r.n for r in found), min(r.runs for r in found)


DESIGNS = (  # one lending's runs (`analysis.power`)
    Design(ID, "each knob", "log", 1.5, 1.875, 1.0, 1 - 0.05 / 6, 0.95, 0.10, 0.10,
           f"{GPU_SPREAD}: a GPU ratio, whose repeats spread 0.1-6% on the H200; 0.10 each, within and between",
           band=True, reproduce=("any", 6), refute=("all", 6), runs=LENDING_RUNS, pairs=3),
)  # fmt: skip


CLAIM = Claim(
    ID, "GPU throughput depends strongly on the model's shape", HPCA,
    f"throughput moves with the model's shape (judged at {H1_FACTOR}x either way)",
    ("gpu_knobs",), h1, "04_model_shape_sensitivity", deciding,
    names=lambda knob: KNOBS[knob][2] if knob in KNOBS else knob,
    gpu_points="each model-shape knob's two ends (gpu-hbm; the fewest over the knobs)",
    session_counts=session_counts,
    designs=DESIGNS,
)  # fmt: skip
