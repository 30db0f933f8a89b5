"""One knob's section of a sensitivity notebook (03, 04): its figure, its table of rates, its findings."""

from pathlib import Path

from dlrm_study.analysis import findings
from dlrm_study.analysis.predictions import knob_bands
from dlrm_study.analysis.sensitivity import rates_table, with_gpu
from dlrm_study.report import plots
from dlrm_study.studies.sensitivity import KNOBS, dropped, sensitivity


def knob_section(
    knob: str, profile: str, out: Path, machine: str | None, figures: Path | None, notebook: str
) -> list[str]:
    """Draw the knob's records (CPU loops, GPU where measured, predicted bands) and save the figure as
    `<notebook>_<knob>`; print its rates; return its findings, one sentence per loop."""
    spec = sensitivity(knob, profile, out)
    records = with_gpu(knob, spec, machine)
    if dropped(knob, profile):
        print(f"left out in the {profile} profile (measured in full): {dropped(knob, profile)}")
    label = KNOBS[knob][2]
    fig = plots.sensitivity(records, label[0].upper() + label[1:], knob_bands(knob, spec, out))
    plots.save(fig, f"{notebook}_{knob}", figures)
    print("thousand samples/s, median of repeats [95% interval]:")
    print(rates_table(records).to_string())
    return findings.knob(records, knob)
