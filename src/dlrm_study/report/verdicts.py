"""Judged once, into one file: `results/verdicts.json`, every claim's verdict on every machine and the numbers it
decided on, which every page reads.

`write` (the first step of `make render`) loads the records, judges every claim on every machine once
(`claims.registry.verdicts`), says of each verdict which code its records were measured by (`earlier_at`: today's,
or earlier code named with its day), and writes the lot as JSON. A verdict is one entry, its numbers listed under
the key (claim, machine, code, name, quantity): `name` is the preset or part the number is of (`dlrm-benchmark`,
`recovery`), `quantity` what it measures in the claim's words (`bf16 over fp32, dlrm-benchmark`).

The file names what it was judged from: the profile, the records' digest, the rules' id and a digest of the
package's code. `read` gives its verdicts only where all four are those of the tree now, so a page never prints a
verdict of other records or other rules or code; where they differ the page judges for itself (`report.reading`),
and `problems` (in `make check-render` and tests/test_render.py) says the committed file is not the judgement of
the committed records.
"""

import json
import math
import os
import tempfile
from pathlib import Path

import pandas as pd

from dlrm_study.analysis import stats
from dlrm_study.analysis.current import fingerprints, loops
from dlrm_study.analysis.evidence import Evidence
from dlrm_study.analysis.identity import record_ids
from dlrm_study.analysis.judgement import Judgement, Status
from dlrm_study.analysis.wording import Share
from dlrm_study.claims import registry
from dlrm_study.claims.registry import BY_ID
from dlrm_study.records import columns as col
from dlrm_study.records import provenance
from dlrm_study.report import manifest, verdict_cache

FILE = manifest.VERDICTS
Table = dict[str, dict[str, Judgement]]  # claim -> machine -> judgement
Codes = dict[str, dict[str, str]]  # claim -> machine -> the code its records are of, as said ("" today's)

EARLIER = "earlier code"
MACHINE_FACTS = (Status.NOT_MEASURABLE, Status.UNRECORDED)  # what a machine is, not what its records judge
WHATEVER_THE_CODE = (*MACHINE_FACTS, Status.NOT_YET)  # true of a machine whichever code measured its records


def judge(evidence: Evidence) -> tuple[Table, Codes]:
    """Every claim on every machine with records, and the code each verdict's records are of (`earlier_at`)."""
    views = {m: evidence.of(m) for m in evidence.machines()}
    table = registry.verdicts(evidence, views)
    codes = {claim: {m: earlier_at(views[m], m, claim, j) for m, j in by_machine.items()}
             for claim, by_machine in table.items()}  # fmt: skip
    return table, codes


def earlier_records(view: Evidence, machine: str, claim: str, judgement: Judgement) -> str | None:
    """None where the records a verdict read on a machine (its claim's frames of the machine's evidence `view`,
    `Evidence.of`, less what its rule left out: `Judgement.left_records`) are all of today's code of their loops
    (`today_of`), or where it holds whatever the code; else the code they are of, as said: each earlier loop's
    short fingerprint, or its commits where it has none ("reference ec2605c", "optimized commit 1d7da30/4f9e144"),
    and the day of the newest record ("2026-12-05")."""
    if judgement.status in WHATEVER_THE_CODE:
        return None
    left = frozenset().union(*judgement.left_records.values())
    read = [f[f[col.MACHINE] == machine] for f in BY_ID[claim].reads(view) if not f.empty and col.MACHINE in f]
    read = [f[~record_ids(f).isin(left)] if left else f for f in read if not f.empty]
    if not read or all((fingerprints(f) == today_of(f)).all() for f in read):
        return None
    frame = pd.concat(read)
    stale = frame[(fingerprints(frame) != today_of(frame)).to_numpy()]
    parts = []
    for loop, part in stale.groupby(loops(stale).to_numpy(), sort=True):
        codes = "/".join(sorted({fp[:7] for fp in fingerprints(part)} - {""}))
        commits = short(part[col.GIT_COMMIT]) if col.GIT_COMMIT in part else ""
        code = codes or (f"commit {commits}" if commits else "code unrecorded")
        parts.append(f"{loop} {code}" if loop else code)
    stamps = frame[col.TIMESTAMP].dropna().astype(str) if col.TIMESTAMP in frame else pd.Series(dtype=str)
    return ", ".join(parts + ([stamps.max()[:10]] if len(stamps) and stamps.max() else []))


def short(commits: pd.Series) -> str:
    """Commits as said: the first two of 7 hex digits ("-dirty" dropped), "/..." after where there are more."""
    found = sorted({str(c).removesuffix("-dirty")[:7] for c in commits.dropna()} - {""})
    return "/".join(found[:2]) + ("/..." if len(found) > 2 else "")


def today_of(frame: pd.DataFrame) -> pd.Series:
    """Today's code of each record's loop (`provenance.today_code`)."""
    return loops(frame).map(provenance.today_code)


def earlier_said(commits: str | None) -> str:
    """What the first screen says of records of earlier code (`earlier_records`, `ledger.earlier_commits`): "" for
    today's code, else "earlier code (...)"."""
    if commits is None:
        return ""
    return f"{EARLIER} ({commits})" if commits else EARLIER


def earlier_at(view: Evidence, machine: str, claim: str, judgement: Judgement) -> str:
    """`earlier_said` of the verdict's `earlier_records`: "" where they are of today's code."""
    return earlier_said(earlier_records(view, machine, claim, judgement))


def stamp(out: Path, profile: str) -> dict[str, str]:
    """What a judgement of `out` follows from: the profile, the records' digest, the rules' id, the code's digest."""
    return {
        "profile": profile,
        "records": manifest.records_digest(out),
        "rules": provenance.rules_hash(),
        "code": verdict_cache.code_digest()[:12],
    }


def plain(value: object) -> float | int | None:
    """A Ratio's field as JSON holds it: a Python number, None for NaN (JSON has none)."""
    if isinstance(value, float):
        return None if math.isnan(value) else float(value)
    return int(value)


def entry(claim: str, machine: str, judgement: Judgement, code: str) -> dict:
    """One verdict as the file holds it; its numbers each under (claim, machine, code, name, quantity)."""
    of = BY_ID[claim]
    numbers = [
        {"claim": claim, col.MACHINE: machine, "code": code, "name": name, "quantity": of.quantity or of.names(name),
         "share": isinstance(ratio, Share), **{field: plain(v) for field, v in ratio._asdict().items()}}
        for name, ratio in judgement.numbers.items()
    ]  # fmt: skip
    return {
        "claim": claim,
        col.MACHINE: machine,
        "code": code,
        "status": str(judgement.status),
        "qualifier": judgement.qualifier,
        "detail": judgement.detail,
        "notes": list(judgement.notes),
        "runs": judgement.runs,
        "pairs": judgement.pairs,
        "left_out": {reason: int(n) for reason, n in judgement.left_out.items()},
        "numbers": numbers,
    }


def from_entry(found: dict) -> Judgement:
    """The Judgement an entry holds (without the record identities its rule left out: the entry's `code` says what
    they were read for)."""
    ratios = {
        n["name"]: (Share if n["share"] else stats.Ratio)(
            *(math.nan if n[f] is None else n[f] for f in stats.Ratio._fields)
        )
        for n in found["numbers"]
    }
    return Judgement(Status(found["status"]), found["detail"], ratios, found["runs"], found["pairs"],
                     dict(found["left_out"]), tuple(found["notes"]), found["qualifier"])  # fmt: skip


def document(out: Path, profile: str, table: Table, codes: Codes) -> dict:
    """The file's content: what it was judged from, then a verdict per claim and machine, in the registry's order."""
    every = [entry(c, m, j, codes[c][m]) for c, by_machine in table.items() for m, j in by_machine.items()]
    return {"judged_from": stamp(out, profile), "verdicts": every}


def write(out: Path, profile: str, evidence: Evidence | None = None) -> Path:
    """Judge the records of `out` once and write `out`/verdicts.json whole (a killed writer leaves the old file)."""
    out = Path(out)
    evidence = evidence if evidence is not None else Evidence.load(out, profile)
    text = json.dumps(document(out, profile, *judge(evidence)), indent=1, sort_keys=False) + "\n"
    target = out / FILE
    with tempfile.NamedTemporaryFile("w", dir=out, prefix=f".{FILE}.", suffix=".tmp", delete=False) as f:
        f.write(text)
    os.chmod(f.name, 0o644)  # a temporary file is the owner's alone; the file is published
    os.replace(f.name, target)
    return target


def load(out: Path) -> dict | None:
    """The file's content, None where there is none or it does not read."""
    try:
        found = json.loads((Path(out) / FILE).read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) and "verdicts" in found else None


def tables(found: dict) -> tuple[Table, Codes]:
    """The verdicts and their codes a file's content holds."""
    table: Table = {}
    codes: Codes = {}
    for e in found["verdicts"]:
        table.setdefault(e["claim"], {})[e[col.MACHINE]] = from_entry(e)
        codes.setdefault(e["claim"], {})[e[col.MACHINE]] = e["code"]
    return table, codes


def read(out: Path, profile: str) -> tuple[Table, Codes] | None:
    """The file's verdicts where it was judged from these records, rules and code at this profile, else None."""
    found = load(out)
    if found is None or found.get("judged_from") != stamp(out, profile):
        return None
    return tables(found)


def problems(out: Path, profile: str, evidence: Evidence | None = None) -> list[str]:
    """Where `out`/verdicts.json is not the judgement of the records beside it: not there, judged from other
    records, rules or code, or a verdict or number that judging them now gives otherwise (first few)."""
    found = load(out)
    if found is None:
        return [f"{FILE}: none that reads (run make render)"]
    if (said := found.get("judged_from")) != (now := stamp(out, profile)):
        moved = [k for k in now if (said or {}).get(k) != now[k]]
        return [f"{FILE}: judged from other {', '.join(moved)} than the tree's (run make render)"]
    evidence = evidence if evidence is not None else Evidence.load(Path(out), profile)
    fresh = json.loads(json.dumps(document(out, profile, *judge(evidence))["verdicts"]))  # as the file holds it
    kept = found["verdicts"]
    wrong = [f"{FILE}: {e['claim']} on {e[col.MACHINE]} reads {e} but the records give {f}"[:400]
             for e, f in zip(kept, fresh, strict=False) if e != f]  # fmt: skip
    if len(kept) != len(fresh):
        wrong.append(f"{FILE}: {len(kept)} verdicts, the records give {len(fresh)}")
    return wrong[:5]
