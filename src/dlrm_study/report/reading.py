"""The records a page reads and their verdicts, from `results/verdicts.json` where it is the judgement of them.

Every page (a notebook, the README section, the results page) asks for the same verdicts two or three times: they
are kept here per results folder, profile, records digest and rules' id. Where the folder's verdicts.json was judged
from these records, rules and code (`report.verdicts.read`), its verdicts are the page's, so every page prints the
one judgement the render wrote. Elsewhere (a scratch folder, another profile, a tree changed since the render) the
records are judged here, and `verdict_cache` keeps that judgement on disk for the next process.
The evidence is shared between its readers, so they must not change it (none does: every reader filters).
"""

import dataclasses
from pathlib import Path

from dlrm_study.analysis.evidence import Evidence
from dlrm_study.records import provenance
from dlrm_study.report import manifest, verdict_cache, verdicts
from dlrm_study.report.verdicts import Codes, Table

KEPT = 4  # results folders kept at once (a render reads one; a test a few scratch ones)


@dataclasses.dataclass
class Judged:
    """A folder's evidence, its verdicts, the code each verdict's records are of, and per-machine views."""

    evidence: Evidence
    table: Table
    codes: Codes
    views: dict[str, Evidence] = dataclasses.field(default_factory=dict)


_kept: dict[tuple[str, str, str, str], Judged] = {}


def judged(out: Path, profile: str) -> tuple[Evidence, Table]:
    """`Evidence.load(out, profile)` and its verdicts, read or judged once for these records and rules."""
    key = str(Path(out).resolve()), profile, manifest.records_digest(out), provenance.rules_hash()
    if key not in _kept:
        while len(_kept) >= KEPT:
            del _kept[next(iter(_kept))]  # the oldest first
        _kept[key] = loaded(Path(out), profile, key)
    found = _kept[key]
    return found.evidence, found.table


def loaded(out: Path, profile: str, key: tuple[str, str, str, str]) -> Judged:
    """The folder's verdicts.json where it is the judgement of these records; else another process's judgement
    of the same inputs (`verdict_cache`); else judged here, and kept for the next."""
    if (written := verdicts.read(out, profile)) is not None:
        return Judged(Evidence.load(out, profile), *written)
    name = verdict_cache.key(*key)
    found = verdict_cache.load(name)
    if isinstance(found, tuple) and len(found) == 3 and isinstance(found[0], Evidence):
        return Judged(*found)
    evidence = Evidence.load(out, profile)
    table, codes = verdicts.judge(evidence)
    verdict_cache.store(name, (evidence, table, codes))
    return Judged(evidence, table, codes)


def evidence(out: Path, profile: str) -> Evidence:
    return judged(out, profile)[0]


def kept(evidence: Evidence) -> Judged | None:
    """What is kept for `evidence`, where it is one loaded here (by identity)."""
    return next((found for found in _kept.values() if found.evidence is evidence), None)


def verdicts_of(evidence: Evidence) -> Table:
    """The verdicts of `evidence`: the kept ones where it is one loaded here, else judged now."""
    found = kept(evidence)
    return found.table if found else verdicts.judge(evidence)[0]


def codes_of(evidence: Evidence, table: Table) -> Codes:
    """The code each verdict of `table` read (`verdicts.earlier_at`): the kept ones where `evidence` is one loaded
    here and `table` its verdicts, else said now."""
    found = kept(evidence)
    if found and found.table is table:
        return found.codes
    return {claim: {m: verdicts.earlier_at(of(evidence, m), m, claim, j) for m, j in by_machine.items()}
            for claim, by_machine in table.items()}  # fmt: skip


def of(evidence: Evidence, machine: str) -> Evidence:
    """`evidence.of(machine)` (half a second each), kept where `evidence` is one loaded here."""
    found = kept(evidence)
    if not found:
        return evidence.of(machine)
    if machine not in found.views:
        found.views[machine] = evidence.of(machine)
    return found.views[machine]
