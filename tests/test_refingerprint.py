"""scripts/refingerprint.py: a first-scheme fingerprint found at the commit that gives it becomes that tree's loop
fingerprint at the record's protocol, the old value kept beside it; unknown ones and rows without one stay."""

import runpy
import subprocess
from pathlib import Path

from dlrm_study.records import code_identity, store

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = runpy.run_path(str(ROOT / "scripts" / "refingerprint.py"))


def test_old_fingerprints_become_their_commits_loop_fingerprints_once(tmp_path):
    head = SCRIPT["Tree"]("HEAD")
    old = head.old_fingerprint()
    store.append_many(tmp_path / "r.csv", [
        {"study": "s", "train.loop": "optimized", "protocol": 2, "code_fingerprint": old, "x": 1},
        {"study": "s", "train.loop": "", "protocol": "", "code_fingerprint": old, "x": 2},
        {"study": "s", "train.loop": "reference", "protocol": 2, "code_fingerprint": "0123456789ab", "x": 3},
        {"study": "s", "train.loop": "reference", "protocol": "", "code_fingerprint": "", "x": 4},
    ])  # fmt: skip
    done = SCRIPT["migrate"](tmp_path)
    assert sum(done.values()) == 2
    rows = store.read_rows(tmp_path / "r.csv")[1]
    optimized = code_identity.fingerprint("optimized", 2, head.read, head.listing)
    anything = code_identity.fingerprint(code_identity.ANY, 1, head.read, head.listing)  # protocol 1: measure/ too
    assert [r["code_fingerprint"] for r in rows] == [optimized, anything, "0123456789ab", ""]
    assert [r["code_fingerprint_v1"] for r in rows] == [old, old, "", ""]
    assert [r["x"] for r in rows] == ["1", "2", "3", "4"]
    clean = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "HEAD", "--", "src/dlrm_study"]).returncode == 0
    if clean:  # records of the checked-out code are today's code
        assert optimized == code_identity.fingerprint("optimized")
    before = (tmp_path / "r.csv").read_bytes()
    assert not SCRIPT["migrate"](tmp_path) and (tmp_path / "r.csv").read_bytes() == before


def test_the_old_scheme_is_read_as_it_was():
    """The tree's first-scheme fingerprint is what the records of that code carry (a literal from results/)."""
    tree = SCRIPT["Tree"]("9151989")
    assert tree.old_fingerprint() == "6ee9eb3419c4"
