"""One knob's section of a sensitivity notebook (03, 04): its figure and its table of rates, of one machine's
CPU loops. A GPU's records of the knob are of another machine: they are named, never drawn on these axes."""

from pathlib import Path

from dlrm_study.analysis.gpu_loop import label as loop_label
from dlrm_study.analysis.sensitivity import gpu_records, rates_table, sensitivity_records
from dlrm_study.records import columns as col
from dlrm_study.report import plots
from dlrm_study.studies.sensitivity import KNOBS, dropped, on_gpu, sensitivity


def knob_section(knob: str, profile: str, out: Path, machine: str | None, figures: Path | None, notebook: str) -> None:
    """Draw the knob's CPU records on `machine` and save the figure as `<notebook>_<knob>`; print its rates
    and what GPU records of the knob exist (and where)."""
    spec = sensitivity(knob, profile, out)
    records = sensitivity_records(knob, spec, machine)
    if dropped(knob, profile):
        print(f"left out in the {profile} profile (measured in full): {dropped(knob, profile)}")
    label = KNOBS[knob][2]
    fig = plots.sensitivity(records, label[0].upper() + label[1:])
    plots.save(fig, f"{notebook}_{knob}", figures)
    print("thousand samples/s, geometric mean of repeats [95% interval]:")
    print(rates_table(records).to_string())
    gpu = gpu_records(on_gpu(spec))
    if not gpu.empty:
        hosts = ", ".join(sorted(set(gpu[col.MACHINE])))
        print(f"GPU records of this knob: {len(gpu)} on {hosts}{loop_label(gpu)}; not drawn beside this machine's CPU")
