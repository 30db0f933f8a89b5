"""The records a page reads and their verdicts, judged once per process.

Judging the committed records takes 20-40 s on 2 cores, and one notebook, the README section or the results
page asks for the same verdicts two or three times. They are kept here per results folder, profile, records
digest and rules' id: new records or new rules are a new key, so nothing kept is older than the files. Between
processes, `verdict_cache` keeps them on disk under the same inputs and the package's code.
The evidence is shared between its readers, so they must not change it (none does: every reader filters).
"""

from pathlib import Path

from dlrm_study.analysis.evidence import Evidence
from dlrm_study.analysis.judgement import Judgement
from dlrm_study.claims.registry import verdicts
from dlrm_study.records import provenance
from dlrm_study.report import manifest, verdict_cache

Table = dict[str, dict[str, Judgement]]
KEPT = 4  # results folders kept at once (a render reads one; a test a few scratch ones)
_kept: dict[tuple[str, str, str, str], tuple[Evidence, Table, dict[str, Evidence]]] = {}


def judged(out: Path, profile: str) -> tuple[Evidence, Table]:
    """`Evidence.load(out, profile)` and `registry.verdicts` of it, computed once for these records and rules."""
    key = str(Path(out).resolve()), profile, manifest.records_digest(out), provenance.rules_hash()
    if key not in _kept:
        while len(_kept) >= KEPT:
            del _kept[next(iter(_kept))]  # the oldest first
        _kept[key] = *loaded(out, profile, key), {}
    evidence, table, _ = _kept[key]
    return evidence, table


def loaded(out: Path, profile: str, key: tuple[str, str, str, str]) -> tuple[Evidence, Table]:
    """The evidence and its verdicts from another process that judged the same inputs (`verdict_cache`), else
    loaded and judged here, and kept for the next."""
    name = verdict_cache.key(*key)
    found = verdict_cache.load(name)
    if isinstance(found, tuple) and len(found) == 2 and isinstance(found[0], Evidence):
        return found
    evidence = Evidence.load(Path(out), profile)
    table = verdicts(evidence)
    verdict_cache.store(name, (evidence, table))
    return evidence, table


def evidence(out: Path, profile: str) -> Evidence:
    return judged(out, profile)[0]


def kept(evidence: Evidence) -> tuple[Table, dict[str, Evidence]] | None:
    """The verdicts and per-machine views kept for `evidence`, where it is one loaded here (by identity)."""
    return next(((table, views) for loaded, table, views in _kept.values() if loaded is evidence), None)


def verdicts_of(evidence: Evidence) -> Table:
    """`registry.verdicts(evidence)`: the kept table where `evidence` is one loaded here, else judged now."""
    found = kept(evidence)
    return found[0] if found else verdicts(evidence)


def of(evidence: Evidence, machine: str) -> Evidence:
    """`evidence.of(machine)` (half a second each), kept where `evidence` is one loaded here."""
    found = kept(evidence)
    if not found:
        return evidence.of(machine)
    views = found[1]
    if machine not in views:
        views[machine] = evidence.of(machine)
    return views[machine]
