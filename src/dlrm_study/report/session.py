"""What a rendered notebook says of itself: where and with what it ran, and what it measured then."""

import atexit
import os
import shutil
from pathlib import Path

import pandas as pd

from dlrm_study.analysis.current import newest_code_only, without_warm_up
from dlrm_study.analysis.evidence import Evidence, published_machine
from dlrm_study.analysis.judgement import Judgement
from dlrm_study.analysis.predictions import table, table_text
from dlrm_study.analysis.wording import count
from dlrm_study.claims import registry
from dlrm_study.measure import context
from dlrm_study.plans import profiles
from dlrm_study.records import Machine, provenance
from dlrm_study.records import columns as col
from dlrm_study.records.machine import machine_key, slug
from dlrm_study.report import ledger, manifest, reading
from dlrm_study.report.gallery import gpu_note, plain
from dlrm_study.report.readable import for_readers, machine_words, words
from dlrm_study.train import checkpoint

VERSIONS = ("torch", "torchrec", "fbgemm-gpu-cpu", "triton")


def start(
    profile: str | None, results_dir: str | None, measure: bool = False, machine: str = "this", publish: bool = False
) -> tuple[str, Path, bool, str, Path | None]:
    """A notebook's parameters resolved: (profile, records folder, whether it measures, whose
    records it draws, where its figures are saved or None for inline only)."""
    profile = profiles.profile(profile)
    out = profiles.results_dir(profile, results_dir)
    if scratch(profile, results_dir):  # what the notebook drew from it is in its outputs; the folder goes with it
        own_scratch(out)
    measure = measuring(profile, results_dir, measure)
    return profile, out, measure, whose(machine, measure, out, profile), figures_dir(out, measure, publish)


def header(profile: str, out: Path, machine: str | None = "this") -> str:
    """Commit, machine, software and profile of this run, and whose records it draws (None: every machine's)."""
    prov = provenance.provenance("cpu")
    keys = {name: name.replace("-", "_") + "_version" for name in VERSIONS}
    versions = ", ".join(f"{name} {prov[key]}" for name, key in keys.items() if prov[key])
    drawn = (
        "every machine's records"
        if machine is None
        else "the rendering machine's own records"
        if machine in ("this", machine_key())
        else f"the records of another machine, {machine}"
    )
    return "\n".join(
        [
            f"dlrm-study {prov[col.PACKAGE_VERSION]}, commit {prov[col.GIT_COMMIT]}, {prov[col.TIMESTAMP]}",
            f"rendered on {machine_key()} ({prov[col.CPU_MODEL]}, {prov[col.CPU_COUNT]} CPUs)",
            f"Python {prov['python_version']}, {versions}",
            f"profile {profile}; records in {profiles.shown(out)}; figures and findings draw {drawn}",
            "rendered from records {records} under rules {rules}".format(**manifest.stamp(out)),
        ]
    )


def footer() -> str:
    """How many measurements this run made, and how many it reused from earlier runs' records."""
    t = context.current()
    if not t.measured and not t.reused:  # a render, or a notebook that only draws: nothing was run
        return "this copy measured nothing: it draws the records already in the results folder"
    measured, reused = count(t.measured, "record"), count(t.reused, "record")
    return f"this run measured {measured} and reused {reused} already in the results folder"


def in_short(out: Path, profile: str, claims: tuple[str, ...]) -> str:
    """The notebook's claims in plain words, each with its verdict per machine with records
    (the claim ledger's rules, as notebook 00 and the README state them)."""
    evidence, table = reading.judged(Path(out), profile)
    lines = []
    for claim in claims:
        lines.append(f"{claim}. {registry.BY_ID[claim].text}")
        for host, verdict in table[claim].items():
            lines.append(f"    on {machine_words(host)}: {plain(verdict)}{gpu_note(claim, evidence, host)}")
        if not table[claim]:
            lines.append("    no machine has records of it yet")
    return words("\n".join(lines))


def tally(out: Path, profile: str) -> str:
    """Notebook 00's summary: per machine, how many claims got each verdict, in the ledger's words."""
    evidence, table = reading.judged(Path(out), profile)
    earlier = earlier_codes(evidence, table)
    by_host: dict[str, dict[str, int]] = {}
    for claim, by_claim in table.items():
        for host, verdict in by_claim.items():
            counts = by_host.setdefault(host, {})
            word = ledger.said_word(verdict, earlier[claim][host])
            counts[word] = counts.get(word, 0) + 1
    lines = [
        f"On {host}: " + ", ".join(f"{n} claim{'s' if n > 1 else ''} {word}" for word, n in counts.items())
        for host, counts in by_host.items()
    ]
    return "\n".join(lines) or "no machine has records yet: run notebooks 01-07"


def verdict_lines(out: Path, profile: str) -> str:
    """Notebook 00's findings: a line per claim and machine, its verdict and evidence; the word as the ledger
    says it (`ledger.said_word`: at which earlier code, where its records are of earlier code)."""
    evidence, table = reading.judged(Path(out), profile)
    earlier = earlier_codes(evidence, table)
    lines = []
    for claim, by_host in table.items():
        for host, verdict in by_host.items():
            said = ledger.said_word(verdict, earlier[claim][host]) + plain(verdict).removeprefix(str(verdict.status))
            lines.append(f"{claim} on {host}: {said}")
    return "\n".join(lines) or "no records yet: run notebooks 01-07"


def earlier_codes(evidence: Evidence, table: dict[str, dict[str, Judgement]]) -> dict[str, dict[str, str]]:
    """claim -> machine -> `verdicts.earlier_at` of its verdict, as the ledger reads it (`ledger.earlier_table`;
    "" for a machine that never said its ISA, which the ledger lists apart)."""
    hosts = sorted({host for by_host in table.values() for host in by_host})
    found = ledger.earlier_table(evidence, table, [h for h in hosts if Machine.parse(h).recorded])
    return {claim: {h: found[claim].get(h, "") for h in by_host} for claim, by_host in table.items()}


def scratch(profile: str, results_dir: str | None) -> bool:
    """Whether the records folder is the smoke profile's scratch folder (`profiles.results_dir`), one a process."""
    return profile == "smoke" and not results_dir


OWNER = ".owner"  # in a notebook's scratch folder: the process id it belongs to


def own_scratch(out: Path) -> None:
    """A notebook's scratch folder goes when its process ends: at exit, or, for a killed kernel (nbval kills
    its kernels; no exit handler runs), when a later notebook starts and finds its owner gone."""
    for earlier in out.parent.glob(profiles.SCRATCH + "*"):
        owner = earlier / OWNER
        if earlier == out or not owner.is_file():
            continue  # this process's own, or a CLI smoke run's (it has no owner): kept
        pid = owner.read_text().strip()
        if not (pid.isdigit() and checkpoint.alive(int(pid))):
            shutil.rmtree(earlier, ignore_errors=True)
    (out / OWNER).write_text(str(os.getpid()))
    atexit.register(shutil.rmtree, out, ignore_errors=True)


def measuring(profile: str, results_dir: str | None, measure: bool) -> bool:
    """Whether this run measures: when asked to, and always in the smoke profile's scratch folder
    (it starts empty, so there is nothing stored to draw)."""
    return bool(measure) or scratch(profile, results_dir)


def figures_dir(out: Path, measure: bool, publish: bool = False) -> Path | None:
    """Where a notebook saves its figures: results/figures/ only when publishing (`make reproduce`);
    a machine's own folder under it when it measured; nowhere (inline only) when it only draws."""
    if publish:
        return Path(out) / "figures"
    if measure:
        return Path(out) / "figures" / slug(machine_key())
    return None


def whose(value: str, measure: bool, out: Path, profile: str) -> str:
    """The machine a notebook draws: `value`, except that `this` without measuring draws the published
    machine (`evidence.published_machine`: the README's figures', whichever machine renders them)."""
    if value != "this" or measure:
        return value
    return published_machine(Path(out), profile) or value


def machine(value: str = "this") -> str:
    """A notebook's `machine` parameter as a key: `this` is this machine (`records.machine.machine_key`)."""
    return machine_key() if value == "this" else value


def show_markdown(text: str) -> None:
    """Display Markdown whose plain-text form is the text itself (not `<IPython...Markdown object>`),
    so a viewer that does not render Markdown still shows the table."""
    from IPython.display import display

    text = words(text)
    display({"text/markdown": text, "text/plain": text}, raw=True)


def say(*parts: object) -> None:
    """Print as `print` does, with the internal names a reader would meet put in words (`readable.words`)."""
    print(words(" ".join(str(p) for p in parts)))


def prediction_table(scored: pd.DataFrame, claims: tuple[str, ...]) -> str:
    """`predictions.table_text` with the table's columns and ids in words (its rows and notes as they are)."""
    text = table_text(scored, claims)
    shown = table(scored, claims)
    comparable = shown[~shown["verdict"].str.startswith("not comparable")] if not shown.empty else shown
    if comparable.empty:
        return words(text)
    return text.replace(comparable.to_string(index=False), for_readers(comparable).to_string(index=False), 1)


def show_table(frame: pd.DataFrame, **to_string: object) -> None:
    """Print a table with its column, index and id names in words (`readable.for_readers`)."""
    print(for_readers(frame).to_string(**to_string))


def current_code(frame: pd.DataFrame) -> pd.DataFrame:
    """Each machine's records of its newest code only, as the verdicts read them: a figure drawn from the same
    records as its verdict (older codes' records stay in the files, counted as history)."""
    return newest_code_only(frame)


def timed(frame: pd.DataFrame) -> pd.DataFrame:
    """A timed study's records as its verdicts read them (`analysis.current.current`): each machine's newest code,
    each run's warm-up (repeat 0) left out, so its figure and tables count and draw the repeats judged. Not for
    trained seeds or hit rates (their `repeat` is a seed; `current_code`)."""
    return without_warm_up(newest_code_only(frame))


def newest_machine(frame: pd.DataFrame) -> pd.DataFrame:
    """The records of the machine that measured last: a figure's ratios are one machine's, so two GPU hosts (the
    old loop's and the captured loop's) are drawn apart, never pooled into one bar."""
    if frame.empty or col.MACHINE not in frame or col.TIMESTAMP not in frame:
        return frame
    return frame[frame[col.MACHINE] == frame.sort_values(col.TIMESTAMP)[col.MACHINE].iloc[-1]]


def measured_in(frame: pd.DataFrame, name: str) -> str:
    """Which commit measured which points of a figure drawn over records of more than one session ("" for one):
    a sweep completed across sessions says so, point by point, rather than only in its footer."""
    if frame.empty or col.GIT_COMMIT not in frame or col.POINT not in frame:
        return ""
    commits = frame[col.GIT_COMMIT].fillna("unknown").astype(str).str[:7]
    if commits.nunique() < 2:
        return ""
    parts = []
    for commit, group in frame.groupby(commits, sort=False):
        counts = group[col.POINT].astype(str).str.split("=").str[-1].value_counts(sort=False)
        points = ", ".join(f"{point} ({n})" for point, n in counts.items())
        parts.append(f"at {commit}, {count(len(group), 'record')}: {points}")
    said = f"{name}: records of {commits.nunique()} sessions, by the commit that measured them; "
    return said + "; ".join(parts) + "."
