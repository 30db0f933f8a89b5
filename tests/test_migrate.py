"""scripts/migrate_records.py: today's machine keys from a record's own fields, once, nothing else touched."""

import runpy
from pathlib import Path

from dlrm_study.records import store
from dlrm_study.records.machine import is_legacy_key

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "migrate_records.py"


def test_migration_rewrites_only_old_machine_keys_and_is_idempotent(tmp_path, monkeypatch):
    path = tmp_path / "r.csv"
    store.append_many(path, [
        {"study": "s", "machine": "intel-xeon/avx512f+avx512_bf16/2t", "cpu_count": 2, "threads": 2, "x": 1},
        {"study": "s", "machine": "", "cpu_model": "Intel(R) Xeon(R) Processor", "cpu_count": 2, "threads": 2, "x": 2},
        {"study": "s", "machine": "amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu", "cpu_count": 2, "threads": 2, "x": 3},
    ])  # fmt: skip
    migrate = runpy.run_path(str(SCRIPT))["migrate"]
    assert migrate(path) == 3  # two machine keys, and every row's run id
    rows = store.read_rows(path)[1]
    assert [r["machine"] for r in rows] == [
        "intel-xeon/avx512f+avx512_bf16/2cpu",
        "intel-xeon/isa-unrecorded/2cpu",
        "amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu",
    ]
    assert [r["x"] for r in rows] == ["1", "2", "3"] and [r["threads"] for r in rows] == ["2"] * 3
    assert {r["run_id"] for r in rows} == {"legacy-r-1"}  # one block: one study, commit and command
    before = path.read_bytes()
    assert migrate(path) == 0 and path.read_bytes() == before


def test_committed_records_are_migrated():
    root = Path(__file__).resolve().parents[1] / "results"
    for path in sorted(root.glob("*.csv")):
        rows = store.read_rows(path)[1]
        assert not any(is_legacy_key(r.get("machine")) or not r.get("run_id") for r in rows), path
