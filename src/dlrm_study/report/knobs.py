"""A sensitivity notebook's sections (03, 04): each knob's figure and table of rates, of one machine's CPU
loops; and each GPU host's records of the knobs on a figure of their own (another machine: never drawn on
the CPU's axes)."""

from pathlib import Path

import pandas as pd

from dlrm_study.analysis.gpu_loop import label as loop_label
from dlrm_study.analysis.predictions import knob_bands
from dlrm_study.analysis.sensitivity import gpu_records, rates_table, sensitivity_records, with_knob
from dlrm_study.plans.sensitivity import KNOBS, dropped, on_gpu, sensitivity
from dlrm_study.records import columns as col
from dlrm_study.report import plots
from dlrm_study.report.readable import for_readers, machine_words
from dlrm_study.report.session import timed


def knob_section(knob: str, profile: str, out: Path, machine: str | None, figures: Path | None, notebook: str) -> None:
    """Draw the knob's CPU records on `machine` and save the figure as `<notebook>_<knob>`; print its rates
    and what GPU records of the knob exist (and where)."""
    spec = sensitivity(knob, profile, out)
    records = timed(sensitivity_records(knob, spec, machine))  # what H1 and S2 judge of it
    if dropped(knob, profile):
        print(f"left out in the {profile} profile (measured in full): {dropped(knob, profile)}")
    label = KNOBS[knob][2]
    fig = plots.sensitivity(records, label[0].upper() + label[1:])
    plots.save(fig, f"{notebook}_{knob}", figures)
    print("thousand samples/s, geometric mean of repeats [95% interval]:")
    print(for_readers(rates_table(records)).to_string())
    gpu = gpu_records(on_gpu(spec))
    if not gpu.empty:
        hosts = ", ".join(sorted(set(gpu[col.MACHINE])))
        print(f"GPU records of this knob: {len(gpu)} on {hosts}{loop_label(gpu)}: drawn apart, under GPU")


def gpu_knobs(knobs: list[str], profile: str, out: Path, figures: Path | None, name: str) -> None:
    """Each GPU host's records of the knobs on its own figure (`name`, a panel per knob, with the predicted
    ranges), titled with the host and, where they are, the old GPU loop's label; nothing where none exists."""
    frames = {k: timed(gpu_records(on_gpu(sensitivity(k, profile, out)))) for k in knobs}
    frames = {k: with_knob(k, f) for k, f in frames.items() if not f.empty}  # a folder without GPU records
    hosts = sorted({m for f in frames.values() if not f.empty for m in f[col.MACHINE]})
    if not hosts:
        print("GPU: no records of these knobs in this results folder (the GPU session measures them)")
        return
    bands = {k: knob_bands(k, sensitivity(k, profile, out), out) for k in knobs}
    for i, host in enumerate(hosts):
        mine = {k: f[f[col.MACHINE] == host] for k, f in frames.items()}
        every = pd.concat(list(mine.values()), ignore_index=True)
        label = loop_label(every).strip()  # on its own line: a title wider than the panels squeezes them
        fig = plots.knob_panels(mine, f"On {machine_words(host)}" + (f"\n{label}" if label else ""), bands)
        plots.save(fig, name if i == 0 else f"{name}_{i + 1}", figures)
