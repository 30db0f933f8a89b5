"""What was published, and from what: the commit, the records and the rules each render came from.

A render (`make render`: records reused; `make reproduce`: measured first) writes
`results/manifest.json`: the commit of the code that rendered, a digest of every records file it
read, the rules' hash, and each rendered notebook and figure with a digest of its content. The
rendered notebooks print the same three facts in their header (`session.header`), and each figure
carries them in its metadata (`plots.save`). `problems` holds the committed manifest against the
working tree: the records, the rules and the code must be the ones it names.
"""

import hashlib
import json
import subprocess
from pathlib import Path

from dlrm_study.records import provenance, store

MANIFEST = "manifest.json"
CODE = ("src", "notebooks")  # what a render's output follows from (with the records and the rules)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


def records_files(results: Path) -> list[Path]:
    """Every file the verdicts read: the records (`*.csv`) and the load guard's rows (`store.GUARD_ROWS`)."""
    guard = Path(results) / store.GUARD_ROWS
    return sorted(Path(results).glob("*.csv")) + ([guard] if guard.exists() else [])


def records_digest(results: Path) -> str:
    """12 hex digits over every records file of a results folder (`records_files`), by name and content."""
    hasher = hashlib.sha256()
    for path in records_files(results):
        hasher.update(str(path.relative_to(results)).encode() + b"\0" + path.read_bytes() + b"\0")
    return hasher.hexdigest()[:12]


def code_commit(repo: Path) -> str:
    """The last commit that changed the code a render follows from (`CODE`): what a render names as its code.
    A render's own commit changes only its outputs, so the name stays the same after it is committed."""
    done = subprocess.run(["git", "log", "-1", "--format=%H", "--", *CODE], cwd=repo, capture_output=True, text=True)
    # Seven digits, as every other commit the pages name: git's own `%h` grows with the clone's object count,
    # so a fresh clone would name the same commit with more digits than the render did.
    return done.stdout.strip()[:7] or "unknown"


def stamp(results: Path, commit: str | None = None) -> dict[str, str]:
    """What a rendered artifact says of its origin: the code's commit (`provenance.git_commit` unless given),
    the records' digest, the rules' hash."""
    commit = commit or provenance.git_commit()
    return {"commit": commit, "records": records_digest(results), "rules": provenance.rules_hash()}


def write(results: Path, commit: str | None = None) -> Path:
    """The manifest of the render now in `results` (its notebooks and figures), written beside them.
    `commit` is the tree's commit as the render found it: asked after the render wrote docs/results.md,
    git would call the tree dirty."""
    results = Path(results)
    artifacts = {name: digest((results / name).read_bytes()) for name in published(results)}
    records = {str(path.relative_to(results)): digest(path.read_bytes()) for path in records_files(results)}
    doc = {**stamp(results, commit), "records_files": records, "artifacts": artifacts}
    path = results / MANIFEST
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return path


def problems(results: Path, repo: Path | None = None) -> list[str]:
    """Where the committed render is not what the working tree would render: records or rules changed
    since, code changed since its commit, or an artifact missing, changed, or not in the manifest."""
    results = Path(results)
    path = results / MANIFEST
    if not path.exists():
        return [f"{path}: no manifest (run make render)"]
    doc = json.loads(path.read_text())
    found = []
    if doc["records"] != records_digest(results):
        found.append(f"records changed since the render ({doc['records']} rendered, {records_digest(results)} now)")
    if doc["rules"] != provenance.rules_hash():
        found.append(f"rules changed since the render ({doc['rules']} rendered, {provenance.rules_hash()} now)")
    found += code_changes(doc["commit"], repo or results.parent)
    for name, want in doc["artifacts"].items():
        artifact = results / name
        if not artifact.exists():
            found.append(f"{name}: in the manifest, not in {results}")
        elif digest(artifact.read_bytes()) != want:
            found.append(f"{name}: changed since the render")
    stale = sorted(set(published(results)) - set(doc["artifacts"]))
    return found + [f"{name}: published but not rendered (no code writes it)" for name in stale]


VERDICTS = "verdicts.json"  # the render's one judgement (`report.verdicts`), which every page reads


def published(results: Path) -> list[str]:
    """The published artifacts of a results folder: its verdicts, rendered notebooks and figures (not a machine's
    own folder)."""
    return [VERDICTS] * (results / VERDICTS).is_file() + [
        str(path.relative_to(results))
        for folder in ("notebooks", "figures")
        for path in sorted((results / folder).glob("*"))
        if path.is_file() and path.suffix in (".ipynb", ".png", ".svg")
    ]


def code_changes(commit: str, repo: Path) -> list[str]:
    """Whether the code (`CODE`) differs between the render's commit and the working tree."""
    if commit.endswith("-dirty") or commit == "unknown":
        return [f"rendered from {commit}: not a committed tree"]
    done = subprocess.run(["git", "diff", "--quiet", commit, "--", *CODE], cwd=repo, capture_output=True)
    if done.returncode == 1:
        return [f"the code changed since the render's commit {commit[:7]} (run make render)"]
    if done.returncode != 0:
        return [f"cannot compare with the render's commit {commit[:7]}: {done.stderr.decode().strip()[:120]}"]
    return []


if __name__ == "__main__":  # `make render` and `make reproduce`: python -m dlrm_study.report.manifest results
    import sys

    print(f"wrote {write(Path(sys.argv[1] if len(sys.argv) > 1 else 'results'))}")
