"""Give records measured under other rules' ids today's id, where the code that measured them decides as
today's rules do (`dlrm_study.rules`): after the rules were declared, or after the golden fixture grew.

Before the rules were declared, a record's `rules_hash` was the digest of docs/claims.md's rules block and of the
source the claims imported (12 hex digits, no dash); since, the rules' id (`<values>-<judgements>`). For each id
the records were measured under (`rules_hash_measured` where set, else `rules_hash`) that is not today's, the
commits its records name (`git_commit`) are tried in turn: a commit's tree (src/ and docs/claims.md, from git) is
the code that measured them where it gives that id by its own code. The records take today's id where that code
(1) judges the golden fixture (tests/golden/records.jsonl) exactly as src/dlrm_study/rules/golden.json says, and
(2) holds every literal of src/dlrm_study/rules/rules.toml at its declared value (its constants, read by name;
one its code did not name is judged by (1) alone). The id measured under is kept in `rules_hash_measured`. Any
other id stays: those records were measured under other rules. Run again, it changes nothing.

    python scripts/rerule.py [results]   # prints, per old digest, the commit tried and what it found
"""

import json
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from io import BytesIO
from pathlib import Path

from dlrm_study import rules
from dlrm_study.records import columns as col
from dlrm_study.records.store import read_rows, relabel

REPO = Path(__file__).resolve().parents[1]
MEASURED = "rules_hash_measured"  # the id a record was measured under, kept where it took today's
# Where each declared literal lived before it was declared: module, constant.
NAMED = {
    ("intervals", "confidence"): ("dlrm_study.analysis.stats", "CONFIDENCE"),
    ("intervals", "min_runs"): ("dlrm_study.analysis.clusters", "MIN_RUNS"),
    ("H1", "factor"): ("dlrm_study.analysis.verdicts", "H1_FACTOR"),
    ("H1", "knobs"): ("dlrm_study.analysis.evidence", "H1_KNOBS"),
    ("H2_H3", "margin"): ("dlrm_study.analysis.verdicts", "GRID_MARGIN"),
    ("H4", "recovery"): ("dlrm_study.analysis.verdicts", "H4_RECOVERY"),
    ("S1", "factor"): ("dlrm_study.analysis.verdicts", "S1_FACTOR"),
    ("S1", "cores"): ("dlrm_study.analysis.verdicts", "S1_CORES"),
    ("S2", "share"): ("dlrm_study.analysis.verdicts", "S2_SHARE"),
    ("S2", "presets"): ("dlrm_study.analysis.verdicts", "S2_PRESETS"),
    ("S3", "factor"): ("dlrm_study.analysis.verdicts", "S3_FACTOR"),
    ("S3", "margin"): ("dlrm_study.analysis.verdicts", "S3_MARGIN"),
    ("S3", "presets"): ("dlrm_study.analysis.verdicts", "S3_PRESETS"),
    ("S3_accuracy", "gain_margin"): ("dlrm_study.analysis.convergence", "GAIN_MARGIN"),
    ("S3_accuracy", "learned_share"): ("dlrm_study.analysis.convergence", "LEARNED_SHARE"),
    ("S3_accuracy", "min_auc"): ("dlrm_study.analysis.convergence", "MIN_AUC"),
    ("S3_accuracy", "min_seeds"): ("dlrm_study.analysis.convergence", "MIN_SEEDS"),
    ("design", "claim_runs"): ("dlrm_study.analysis.power", "RUNS"),
    ("design", "pairs"): ("dlrm_study.analysis.power", "PAIRS"),
    ("design", "steps"): ("dlrm_study.analysis.power", "STEPS"),
    ("design", "profile_steps"): ("dlrm_study.analysis.power", "PROFILE_STEPS"),
    ("design", "target_power"): ("dlrm_study.analysis.power", "TARGET_POWER"),
    ("design", "target_false"): ("dlrm_study.analysis.power", "TARGET_FALSE"),
}
# Run in the commit's tree (its src/ first on the path, today's tests/ for the fixture): its digest, its
# judgements' digest, and its literals by name.
PROBE = """
import importlib, json, sys
from dlrm_study.records import provenance
print(json.dumps({"hash": provenance.rules_hash()}), flush=True)
from tests.golden import fixture
named = {}
for key, (module, name) in json.loads(sys.argv[1]).items():
    try:
        value = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        continue
    named[key] = list(value) if isinstance(value, tuple) else value
print(json.dumps({"judgements": fixture.digest(fixture.judgements()), "named": named}))
"""


def measured_under(results: Path, today: str) -> dict[str, Counter]:
    """Each id records were measured under, other than today's, with the commits they name (most records first)."""
    found: dict[str, Counter] = {}
    for path in sorted(results.glob("*.csv")):
        for row in read_rows(path)[1]:
            rules_id = row.get(MEASURED) or row.get(col.RULES_HASH) or ""
            commit = (row.get("git_commit") or "").removesuffix("-dirty")
            if rules_id and rules_id != today and commit:
                found.setdefault(rules_id, Counter())[commit] += 1
    return found


def tree_of(commit: str, into: Path) -> None:
    """The commit's src/ and docs/claims.md, unpacked into `into`."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "src", "docs/claims.md"],
                             capture_output=True, check=True).stdout  # fmt: skip
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")


def probe(commit: str) -> dict:
    """What the commit's code says: its digest, its judgements of the fixture, its named literals."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            tree_of(commit, Path(tmp))
        except subprocess.CalledProcessError:
            return {"error": "not in this repository's history"}
        keys = {f"{s}.{n}": where for (s, n), where in NAMED.items()}
        env = {"PYTHONPATH": f"{tmp}/src:{REPO}", "PATH": "/usr/bin:/bin"}
        r = subprocess.run([sys.executable, "-c", PROBE, json.dumps(keys)], capture_output=True, text=True, env=env,
                           cwd=tmp)  # fmt: skip
    found: dict = {}
    for line in r.stdout.splitlines():
        found |= json.loads(line)
    if r.returncode:
        found["error"] = (r.stderr.strip().splitlines() or ["failed"])[-1][:160]
    return found


def mismatched(named: dict) -> list[str]:
    declared = {f"{s}.{n}": rules.literal(s, n) for s, n in NAMED}
    return [f"{k} {v!r} (declared {declared[k]!r})" for k, v in sorted(named.items()) if v != declared[k]]


def decide(digest: str, commits: Counter, golden: str) -> tuple[bool, str]:
    """Whether `digest` is today's rules, and what was found, from the first commit that gives it."""
    said = []
    for commit, _ in commits.most_common():
        found = probe(commit)
        if found.get("hash") != digest:
            said.append(f"{commit[:7]} gives {found.get('hash') or found.get('error', 'nothing')}")
            continue
        if "error" in found:
            return False, f"{commit[:7]}: its code cannot judge the fixture ({found['error']})"
        if found["judgements"] != golden:
            return False, f"{commit[:7]}: judges the fixture otherwise ({found['judgements']}, golden {golden})"
        if wrong := mismatched(found["named"]):
            return False, f"{commit[:7]}: other literals: {'; '.join(wrong)}"
        return True, f"{commit[:7]}: the golden judgements and every named literal"
    return False, "no commit its records name gives it (" + "; ".join(said) + ")"


def main() -> int:
    results = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "results"
    if not results.is_dir():
        print(f"{results}: no such folder of records", file=sys.stderr)
        return 2
    sys.path.insert(0, str(REPO))  # the fixture is the repository's tests/golden
    from tests.golden import fixture

    golden, today = fixture.digest(fixture.written()), rules.rules_id()
    same = {}
    for digest, commits in sorted(measured_under(results, today).items()):
        ok, said = decide(digest, commits, golden)
        print(f"{digest}: {'today' + chr(39) + 's rules' if ok else 'other rules'}: {said}", flush=True)
        if ok:
            same[digest] = today
    moved: Counter = Counter()
    for path in sorted(results.glob("*.csv")):
        moved += relabel(path, col.RULES_HASH, MEASURED, same)
    print(f"{sum(moved.values())} records given the rules' id {today}" if moved else "nothing to move")
    return 0


if __name__ == "__main__":
    sys.exit(main())
