"""Each published figure's findings, one function for the notebook that draws it and the README's gallery.

A notebook prints `said(figures, ...)` for the figures it draws; the README's gallery prints
`findings_by_figure` for every figure. Both read the records through the notebooks' own readers,
on one machine (`evidence.published_machine` when publishing), so a number appears in the study
only as computed here (tests/test_render.py holds the README's lines to the notebooks').
"""

from collections.abc import Callable, Iterable
from pathlib import Path

import pandas as pd

from dlrm_study.analysis import findings
from dlrm_study.analysis import scaling as scaling_read
from dlrm_study.analysis.convergence import accuracy_records, convergence_records
from dlrm_study.analysis.current import newest_code_only
from dlrm_study.analysis.evidence import Evidence, gpu_hosts, same_class
from dlrm_study.analysis.gpu_loop import label as loop_label
from dlrm_study.analysis.judgement import Judgement
from dlrm_study.analysis.placement import cache_hit_rates, remote_vs_local
from dlrm_study.analysis.readers import NoRecords, sweep_records
from dlrm_study.analysis.sensitivity import sensitivity_records
from dlrm_study.analysis.wording import judgement_text
from dlrm_study.claims import registry
from dlrm_study.errors import UsageError
from dlrm_study.plans import cpu
from dlrm_study.plans.sensitivity import sensitivity
from dlrm_study.report import reading
from dlrm_study.report.readable import machine_words, words

NB01, NB02, NB03 = "01_cpu_reference_breakdown", "02_cpu_optimizations", "03_dense_sparse_sensitivity"
NB04, NB05, NB06, NB07 = "04_model_shape_sensitivity", "05_embedding_placement", "06_scaling", "07_convergence"
FIGURES = {  # figure -> (notebook, what it shows)
    "01_cpu_reference_breakdown": (NB01, "where the reference spends its time, per preset"),
    "02_cpu_speedup": (NB02, "each loop over the reference, per preset"),
    "02_ablation": (NB02, "the optimized loop's techniques added one at a time"),
    "02_s1_decomposition": (NB02, "S1 step by step, from the 2020 reference on torch 1.5.1"),
    "02_cpu_breakdown": (NB02, "where each loop spends its time"),
    "03_dense_features": (NB03, "throughput against dense features"),
    "03_tables": (NB03, "throughput against sparse features (tables)"),
    "04_embedding_dim": (NB04, "throughput against embedding dimension"),
    "04_rows": (NB04, "throughput against rows per table"),
    "04_lookups": (NB04, "throughput against the pooling factor"),
    "04_mlp_width": (NB04, "throughput against top-MLP width"),
    "04_batch_size": (NB04, "throughput against batch size"),
    "03_gpu_over_cpu": (NB03, "GPU (H200) over the same host's CPU loops on the dense x sparse grid"),
    "05_cache_hit_rate": (NB05, "hit rate of a cache of hot rows"),
    "05_placements": (NB05, "GPU placements relative to hbm, with their predicted ranges"),
    "05_remote_tables": (NB05, "tables local or on a parameter server"),
    "06_scaling_breakdown": (NB06, "compute and exposed communication, 1 and 2 ranks"),
    "06_scaling_projection": (NB06, "modelled scaling to 64 ranks, with the measured points"),
    "07_convergence": (NB07, "each loop's loss and held-out AUC against the reference's"),
}
KNOB_FIGURES = {
    "03_dense_features": "dense_features",
    "03_tables": "tables",
    "04_embedding_dim": "embedding_dim",
    "04_rows": "rows",
    "04_lookups": "lookups",
    "04_mlp_width": "mlp_width",
    "04_batch_size": "batch_size",
}
NOT_MEASURED = "not yet measured"


def read(reader: Callable[..., pd.DataFrame], *args) -> pd.DataFrame:
    """A reader's records of each machine's newest code (what the figures draw, `session.current_code`), or
    none where the study has none (a config the profile lacks is none too)."""
    try:
        return newest_code_only(reader(*args))
    except (NoRecords, UsageError):
        return pd.DataFrame()


def figure_findings(figure: str, out: Path, profile: str, machine: str) -> list[str]:
    """The findings printed under `figure`, from `machine`'s records ([NOT_MEASURED] where it has none)."""
    if figure in KNOB_FIGURES:
        knob = KNOB_FIGURES[figure]
        records = read(sensitivity_records, knob, sensitivity(knob, profile, out), machine)
        return findings.knob(records, knob) if not records.empty else [NOT_MEASURED]
    if claims := registry.on_figure(figure):
        return gpu_verdicts(claims, out, profile)
    said = FINDINGS[figure](out, profile, machine)
    return said or [NOT_MEASURED]


def cpu_loops(out: Path, profile: str, machine: str) -> pd.DataFrame:
    return read(sweep_records, cpu.cpu_loops(profile, out), machine)


def scaling(out: Path, profile: str, machine: str) -> pd.DataFrame:
    return read(scaling_read.scaling_records, profile, out, machine)


def s1_records(out: Path, profile: str, machine: str) -> pd.DataFrame:
    """The 2020 baseline's records S1's verdict reads on `machine` (its part of the evidence: its newest code,
    warm-ups out): what notebook 02's decomposition figure draws and its table prints, the findings under it and
    docs/results.md's lines; one set of runs, so one interval per factor (`clusters.over_runs`)."""
    return reading.of(reading.evidence(out, profile), machine).baseline


def when_any(records: pd.DataFrame, said: Callable[[pd.DataFrame], list[str]]) -> list[str]:
    return said(records) if not records.empty else []


FINDINGS: dict[str, Callable[[Path, str, str], list[str]]] = {
    "01_cpu_reference_breakdown": lambda o, p, m: when_any(cpu_loops(o, p, m), findings.reference_breakdown),
    "02_cpu_speedup": lambda o, p, m: when_any(cpu_loops(o, p, m), findings.speedups),
    "02_cpu_breakdown": lambda o, p, m: when_any(cpu_loops(o, p, m), findings.largest_operator),
    "02_ablation": lambda o, p, m: when_any(read(sweep_records, cpu.ablation(p, o), m), findings.ablation),
    "02_s1_decomposition": lambda o, p, m: when_any(s1_records(o, p, m), findings.baseline_2020),
    "05_cache_hit_rate": lambda o, p, m: when_any(read(cache_hit_rates, p, o, m), lambda r: findings.cache(r, p)),
    "05_remote_tables": lambda o, p, m: when_any(read(remote_vs_local, p, o, m), findings.remote),
    "06_scaling_breakdown": lambda o, p, m: when_any(scaling(o, p, m), findings.scaling),
    "06_scaling_projection": lambda o, p, m: when_any(
        scaling(o, p, m), lambda r: findings.projection(scaling_read.model(r))
    ),
    "07_convergence": lambda o, p, m: (
        when_any(read(convergence_records, p, o, m), findings.convergence)
        + findings.timed_accuracy(same_class(read(accuracy_records, p, o, None), m))
    ),
}


def plain(verdict: Judgement) -> str:
    """A verdict as a notebook prints it: the ledger's cell without its Markdown, names in words."""
    return words(judgement_text(verdict).replace("**", ""))


def gpu_note(claim: str, evidence: Evidence, machine: str) -> str:
    """A GPU claim's verdict on a machine whose GPU records are the old loop's says so (`analysis.gpu_loop`)."""
    return loop_label(reading.of(evidence, machine).gpu) if claim.startswith("H") else ""


def gpu_verdicts(claims: Iterable[str], out: Path, profile: str) -> list[str]:
    """The GPU claims' verdicts on each GPU host with records (the figures of 03 and 05 draw them)."""
    evidence = reading.evidence(out, profile)
    hosts = gpu_hosts(evidence)
    lines = [
        f"{c} on {host}: {plain(registry.judge(c, reading.of(evidence, host), host))}{gpu_note(c, evidence, host)}"
        for host in hosts
        for c in claims
    ]
    return lines or [NOT_MEASURED]


def said(figures: Iterable[str], out: Path, profile: str, machine: str) -> str:
    """What a notebook prints under its figures: whose records, then each figure's title and its findings (names in
    words)."""
    blocks = [f"On {machine_words(machine)}:"] if machine else []  # the findings are of one machine: say which
    for figure in figures:
        lines = figure_findings(figure, out, profile, machine)
        blocks.append("\n".join([f"{FIGURES[figure][1][0].upper()}{FIGURES[figure][1][1:]}:", *lines]))
    return words("\n\n".join(blocks))


def findings_by_figure(out: Path, profile: str, machine: str) -> dict[str, list[str]]:
    """Every published figure's findings on `machine` (the README's gallery)."""
    return {figure: figure_findings(figure, out, profile, machine) for figure in FIGURES}


def gallery(out: Path, profile: str, machine: str | None) -> str:
    """The figures as a Markdown table: the image, its computed findings, the notebook."""
    if machine is None:
        return "No figures yet: run `make reproduce`."
    said_by = findings_by_figure(out, profile, machine)
    rows = ["| figure | findings (computed from the records) | notebook |", "| --- | --- | --- |"]
    for figure, (notebook, what) in FIGURES.items():
        text = "<br>".join([f"*{what}*", *said_by[figure]])
        # A figure beside "not yet measured" would show another machine's records as this one's: none then.
        measured = said_by[figure] != [NOT_MEASURED]
        drawn = measured and (Path(out) / "figures" / f"{figure}.png").exists()
        none = "(no figure: nothing measured for it)"
        image = f"![{what}](results/figures/{figure}.png)" if drawn else none
        rows.append(f"| {image} | {text} | [{notebook[:2]}](results/notebooks/{notebook}.ipynb) |")
    return "\n".join(rows)
