"""Move records' code fingerprints from the first scheme to the per-loop one, once (`records.code_identity`).

The first scheme hashed the raw bytes of six folders (config, data, distributed, measure, model, train). Each
such fingerprint in results/*.csv is looked for among the commits that touched those folders: the commit whose
tree gives it holds the exact code that measured the record, so that tree's files give the record's loop
fingerprint at the record's own protocol (1 where it has none). The old value moves to `code_fingerprint_v1`.
A fingerprint no commit gives (a tree measured with uncommitted changes) and a record without one are left as
they are: they stay earlier code. Run again, it changes nothing.

    python scripts/refingerprint.py [results]   # prints what it mapped, per old fingerprint
"""

import csv
import fcntl
import hashlib
import subprocess
import sys
from collections import Counter
from pathlib import Path

from dlrm_study.records import code_identity
from dlrm_study.records import columns as col
from dlrm_study.records.store import raw_rows, write_rows

REPO = Path(__file__).resolve().parents[1]
PREFIX = "src/dlrm_study/"
OLD_FOLDERS = ("config", "data", "distributed", "measure", "model", "train")
OLD = "code_fingerprint_v1"


def git(*args: str, data: bytes | None = None) -> bytes:
    return subprocess.run(["git", "-C", str(REPO), *args], input=data, capture_output=True, check=True).stdout


class Tree:
    """One commit's package sources, read through git."""

    def __init__(self, commit: str) -> None:
        self.commit = commit
        listed = git("ls-tree", "-r", commit, "--", *(PREFIX + f for f in OLD_FOLDERS)).decode().splitlines()
        self.blobs = {line.split("\t", 1)[1].removeprefix(PREFIX): line.split()[2] for line in listed}
        self.texts: dict[str, bytes] = {}

    def load(self, paths: list[str]) -> None:
        wanted = [p for p in paths if p in self.blobs and p not in self.texts]
        if not wanted:
            return
        out = git("cat-file", "--batch", data="".join(self.blobs[p] + "\n" for p in wanted).encode())
        at = 0
        for path in wanted:
            header_end = out.index(b"\n", at)
            size = int(out[at:header_end].split()[2])
            self.texts[path] = out[header_end + 1 : header_end + 1 + size]
            at = header_end + 1 + size + 1

    def old_fingerprint(self) -> str:
        """The first scheme's fingerprint of this tree (`provenance.fingerprint` as it was)."""
        files = sorted((p for p in self.blobs if p.endswith(code_identity.SOURCE_SUFFIXES)), key=lambda p: p.split("/"))
        self.load(files)
        digest = hashlib.sha256()
        for path in files:
            digest.update(path.encode() + b"\0")
            digest.update(self.texts[path] + b"\0")
        return digest.hexdigest()[:12]

    def read(self, path: str) -> str | None:
        self.load([path])
        return self.texts[path].decode() if path in self.texts else None

    def listing(self, folder: str) -> list[str]:
        found = [p for p in self.blobs if p.startswith(folder + "/") and p.endswith(code_identity.SOURCE_SUFFIXES)]
        return sorted(found)


def commits_by_old_fingerprint(wanted: set[str]) -> dict[str, Tree]:
    """old fingerprint -> the tree of a commit that gives it, for those of `wanted` any commit gives."""
    found: dict[str, Tree] = {}
    history = git("log", "--format=%H", "--", *(PREFIX + f for f in OLD_FOLDERS)).decode().split()
    for commit in history:
        if wanted <= set(found):
            break
        tree = Tree(commit)
        found.setdefault(tree.old_fingerprint(), tree)
    return {fp: tree for fp, tree in found.items() if fp in wanted}


def protocol_of(value: str) -> int:
    return int(float(value)) if value else 1


def migrate(results: Path) -> Counter:
    files = sorted(results.glob("*.csv"))
    old = {row[col.CODE_FINGERPRINT] for path in files for row in dict_rows(path) if row.get(col.CODE_FINGERPRINT)}
    trees = commits_by_old_fingerprint(old)
    done: Counter = Counter()
    cache: dict[tuple[str, str, int], str] = {}
    for path in files:
        with open(path.with_name(path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            header, rows = raw_rows(path)
            if col.CODE_FINGERPRINT not in header:
                continue
            if OLD not in header:  # a new last column: every whole row widens with it
                rows = [[*row, ""] if len(row) == len(header) else row for row in rows]
                header = [*header, OLD]
            at = {name: i for i, name in enumerate(header)}
            changed = False
            for row in rows:
                if len(row) != len(header):
                    continue  # a line cut short: as found
                fp = row[at[col.CODE_FINGERPRINT]]
                if fp not in trees:
                    continue
                loop = code_identity.loop_of(row[at[col.TRAIN_LOOP]] if col.TRAIN_LOOP in at else "")
                protocol = protocol_of(row[at[col.PROTOCOL]] if col.PROTOCOL in at else "")
                key = (fp, loop, protocol)
                if key not in cache:
                    tree = trees[fp]
                    cache[key] = code_identity.fingerprint(loop, protocol, tree.read, tree.listing)
                row[at[OLD]], row[at[col.CODE_FINGERPRINT]] = fp, cache[key]
                done[(fp, trees[fp].commit[:7], loop or "any", protocol, cache[key])] += 1
                changed = True
            if changed:
                write_rows(path, header, rows)
    return done


def dict_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def main() -> int:
    results = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "results"
    if not results.is_dir():
        print(f"{results}: no such folder of records", file=sys.stderr)
        return 2
    done = migrate(results)
    for (old, commit, loop, protocol, new), n in sorted(done.items()):
        print(f"{old} (commit {commit}) -> {new}: {n} records of loop {loop}, protocol {protocol}")
    print(f"{sum(done.values())} records moved to per-loop fingerprints" if done else "nothing to move")
    return 0


if __name__ == "__main__":
    sys.exit(main())
