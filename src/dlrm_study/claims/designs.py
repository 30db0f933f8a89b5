"""The claims' designs together (each claim's `designs`, read by its `reader`), in the registry's order: the powers
they give (`power_table`) and docs/claims.md's "Design and power" table (`power_markdown`, between the power
markers; scripts/power_table.py rewrites it). The machinery is `analysis.power`'s."""

import functools

import pandas as pd

from dlrm_study.analysis.power import (
    BEGIN,
    END,
    N_SIMS,
    PAIRS,
    RUNS,
    SEED,
    STEPS,
    TARGET_FALSE,
    TARGET_POWER,
    Measured,
    accuracy_markdown,
    amount,
    chance,
    meets,
    powers,
    runs_needed,
    schedule,
    sequential_powers,
)
from dlrm_study.analysis.power import measure as measure_with
from dlrm_study.claims import registry, s2, s3
from dlrm_study.plans.profiles import LOOKS
from dlrm_study.records import columns as col

SEQUENTIAL = (s2.ID, s3.ID)  # the claims judged at the looks (`claims.looks`)
# The classes whose runs of today's loops give the expected runs (a machine, and the codes its S2 and S3 read).
CLASSES = (
    ("intel-xeon-f6m207s2/avx512f+avx512_bf16+amx_bf16/2cpu", "AMX Xeon"),
    ("amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu", "Zen 4"),
)
TODAY = {s2.ID: s2.CLASS_CODE, s3.ID: s3.CLASS_CODE}  # the code of each claim's loop in those runs

DESIGNS = tuple(design for claim in registry.CLAIMS for design in claim.designs)


def measure(claim: str, comparison: str, machine: str, code: str, runs: int | None = None) -> Measured:
    """`analysis.power.measure` of a claim's comparison, read by the claim's own `reader`."""
    return measure_with(registry.claim(claim).reader, comparison, machine, code, runs)


@functools.cache
def table(n_sims: int = N_SIMS, seed: int = SEED) -> pd.DataFrame:
    rows = []
    for d in DESIGNS:
        found = powers(d, None, n_sims, seed)
        rows.append({"claim": d.claim, "comparison": d.comparison, "scale": d.scale, "margin": d.margin,
                     "claimed": d.claimed, "other": d.other, "confidence": d.confidence,
                     "refute_confidence": d.refute_confidence, "within_sd": d.within_sd, "between_sd": d.between_sd,
                     "runs": d.runs, "pairs": d.pairs, "steps": STEPS, **found, "meets": meets(found),
                     "runs_needed": runs_needed(d, n_sims, seed)})  # fmt: skip
    return pd.DataFrame(rows)


def power_table(n_sims: int = N_SIMS, seed: int = SEED) -> pd.DataFrame:
    """One row per claim and comparison: the truths, margin, variances, design, the chances of each word at its
    truth, whether they meet the targets, and the fewest runs that would."""
    return table(n_sims, seed).copy()


def power_markdown(n_sims: int = N_SIMS, seed: int = SEED) -> str:
    """The table of `power_table` as docs/claims.md shows it, with each row's basis."""
    found = power_table(n_sims, seed)
    lines = [
        f"Design: the CPU claims at most {RUNS} runs (the last look) x {PAIRS} repeats x {STEPS} timed steps per "
        "deciding point, the fixed columns below read as if at the cap; the GPU "
        f"claims one lending's runs (the design column); targets: >= {TARGET_POWER:.0%} for each word where the "
        f'truth is on its side, <= {TARGET_FALSE:.1%} "reproduced" where it sits on the margin; {N_SIMS:,} '
        f"simulated designs each (seed {SEED}).",
        "",
        "| claim | comparison | design (runs x repeats) | margin | truth: claim / other | within SD | between SD | "
        "reproduced | not reproduced | false reproduced | targets | runs needed (x the row's repeats) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for d, row in zip(DESIGNS, found.itertuples(), strict=True):
        needed = "more than 60" if row.runs_needed is None or row.runs_needed != row.runs_needed else int(
            row.runs_needed)  # fmt: skip
        lines.append(
            f"| {d.claim} | {d.comparison} | {d.runs} x {d.pairs} | {amount(d.margin, d.scale)} | "
            f"{amount(d.claimed, d.scale)} / "
            f"{amount(d.other, d.scale)} | {d.within_sd:.3f} | {d.between_sd:.3f} | {chance(row.reproduced)} | "
            f"{chance(row.not_reproduced)} | {chance(row.false_reproduced)} | {'met' if row.meets else 'missed'} | "
            f"{needed} |"
        )
    lines += ["", "Where the numbers came from (SDs on the rule's scale: log, logit for shares, linear for H4):", ""]
    for d in DESIGNS:
        lines.append(f"- {d.claim} {d.comparison}: {d.basis}.")
        for s in d.sources:
            between = "-" if s.between_sd != s.between_sd else f"{s.between_sd:.4f}"
            steps = f", {'/'.join(map(str, s.steps))} steps" if s.steps else ""
            runs = f"{s.runs} run{'s' * (s.runs != 1)}"
            lines.append(
                f"  - `{s.machine}` (code {s.code or 'unfingerprinted'}): {runs}, {s.pairs} pairs{steps}; "
                f"centre {amount(s.center, d.scale)}, within {s.within_sd:.4f}, between {between}"
            )
    return "\n".join(lines) + "\n\n" + sequential_markdown(n_sims, seed) + "\n" + accuracy_markdown()


@functools.cache
def sequential_table(n_sims: int = N_SIMS, seed: int = SEED) -> pd.DataFrame:
    """Per sequential claim: its chances at the looks (`analysis.power.sequential_powers`) at the designs' SDs."""
    rows = []
    for claim in SEQUENTIAL:
        found = sequential_powers(registry.claim(claim).designs, n_sims, seed)
        rows.append({"claim": claim, **found, "meets": meets(found)})
    return pd.DataFrame(rows)


@functools.cache
def class_runs(n_sims: int = N_SIMS, seed: int = SEED) -> pd.DataFrame:
    """Per judged class and sequential claim: the word and mean runs the looks give at that class's own truths and
    SDs (its committed runs of today's loops, read as the claim's design reads them)."""
    rows = []
    for machine, name in CLASSES:
        for claim in SEQUENTIAL:
            designs = registry.claim(claim).designs
            found = [measure(claim, d.comparison, machine, TODAY[claim]) for d in designs]
            if any(f.runs < 2 for f in found):
                continue
            truths = tuple(f.center for f in found)
            said = schedule(designs, truths, tuple(f.between_sd for f in found), tuple(f.within_sd for f in found),
                            n_sims, seed)  # fmt: skip
            rows.append({"class": name, col.MACHINE: machine, "claim": claim, "truths": truths, **said._asdict()})
    return pd.DataFrame(rows)


def sequential_markdown(n_sims: int = N_SIMS, seed: int = SEED) -> str:
    """docs/claims.md's account of the looks: the claims' chances under them and the runs each class takes."""
    found = sequential_table(n_sims, seed)
    lines = [
        f"Looks: S2 and S3 are judged after {', '.join(map(str, LOOKS[:-1]))} and {LOOKS[-1]} runs; each look reads "
        "the rule's intervals at one smaller level (Pocock-type, `analysis.sequential`), so that a false word at "
        "any look is as likely as at one look of a fixed design; measuring stops at the first look where every "
        "claim has a word that is not fragile.",
        "",
        "| claim | reproduced (truth: the claim) | not reproduced (truth: other) | false reproduced (margin) | "
        "mean runs: claim / other / margin | targets |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in found.itertuples():
        lines.append(
            f"| {row.claim} | {chance(row.reproduced)} | {chance(row.not_reproduced)} | "
            f"{chance(row.false_reproduced)} | {row.runs_claimed:.1f} / {row.runs_other:.1f} / {row.runs_margin:.1f} | "
            f"{'met' if row.meets else 'missed'} |"
        )
    lines += ["", "Expected runs per class, at its own truths and SDs (its committed runs of today's loops):", ""]
    lines += [
        "| class | claim | truths | reproduced | not reproduced | mean runs |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in class_runs(n_sims, seed).itertuples():
        scale = registry.claim(row.claim).designs[0].scale
        truths = ", ".join(amount(t, scale) for t in row.truths)
        lines.append(f"| {row._1} | {row.claim} | {truths} | {chance(row.reproduced)} | "
                     f"{chance(row.not_reproduced)} | {row.runs:.1f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def with_table(doc: str, text: str | None = None) -> str:
    """docs/claims.md with the text between the power markers replaced by `text` (`power_markdown()`)."""
    text = power_markdown() if text is None else text
    start, stop = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    return doc[:start] + "\n" + text + doc[stop:]
