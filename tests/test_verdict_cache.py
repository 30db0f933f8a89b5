"""Judged records kept between processes (`report.verdict_cache`): a process takes another's verdicts only for the
same records, rules and code; a file that does not read is judged again; a folder that cannot be written fails
nothing."""

import shutil

import pytest
from tests.conftest import ROOT

from dlrm_study import settings
from dlrm_study.report import reading, verdict_cache

RECORDS = 400  # the first records of results/sweeps.csv


@pytest.fixture
def records(tmp_path, monkeypatch):
    """A results folder with some of the committed CPU loops' records (a few runs: judged in seconds), a cache
    folder of its own, nothing kept in memory."""
    out = tmp_path / "results"
    out.mkdir()
    lines = (ROOT / "results" / "sweeps.csv").read_text().splitlines(keepends=True)
    (out / "sweeps.csv").write_text("".join(lines[: RECORDS + 1]))
    monkeypatch.setenv(settings.VERDICT_CACHE, str(tmp_path / "kept"))
    monkeypatch.setattr(reading, "_kept", {})
    return out


def judged_elsewhere(out, monkeypatch):
    """What another process would get: nothing in memory, and judging refused (so only the file can answer)."""
    monkeypatch.setattr(reading, "_kept", {})
    monkeypatch.setattr(reading.verdicts, "judge", lambda evidence: pytest.fail("judged again"))
    return reading.judged(out, "quick")


def test_another_process_takes_the_verdicts_of_the_same_inputs(records, monkeypatch):
    evidence, table = reading.judged(records, "quick")
    assert len(list(verdict_cache.folder().glob("*.pickle"))) == 1
    again, kept = judged_elsewhere(records, monkeypatch)
    assert again is not evidence and kept == table
    assert again.cpu_loops.equals(evidence.cpu_loops)


def test_new_records_are_judged_anew(records, monkeypatch):
    reading.judged(records, "quick")
    (records / "sweeps.csv").write_text((records / "sweeps.csv").read_text() + "\n")  # another digest
    monkeypatch.setattr(reading, "_kept", {})
    called = []
    judge = reading.verdicts.judge
    monkeypatch.setattr(reading.verdicts, "judge", lambda evidence: called.append(1) or judge(evidence))
    reading.judged(records, "quick")
    assert called == [1] and len(list(verdict_cache.folder().glob("*.pickle"))) == 2


def test_a_change_to_the_code_is_another_key(tmp_path, monkeypatch):
    copy = tmp_path / "dlrm_study"
    shutil.copytree(verdict_cache.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(verdict_cache, "PACKAGE", copy)
    verdict_cache.code_digest.cache_clear()
    before = verdict_cache.key("out", "quick", "records", "rules")
    path = copy / "claims" / "s3.py"
    path.write_text(path.read_text() + "\n# an edit\n")
    verdict_cache.code_digest.cache_clear()
    assert verdict_cache.key("out", "quick", "records", "rules") != before
    verdict_cache.code_digest.cache_clear()


def test_a_corrupt_file_is_removed_and_judged_again(records, monkeypatch):
    _, table = reading.judged(records, "quick")
    (kept,) = verdict_cache.folder().glob("*.pickle")
    kept.write_bytes(kept.read_bytes()[:100])  # a writer killed mid-file would leave no such file; a disk could
    monkeypatch.setattr(reading, "_kept", {})
    assert reading.judged(records, "quick")[1] == table
    assert kept.is_file() and verdict_cache.load(kept.stem) is not None  # judged, and kept whole again


def test_a_folder_that_cannot_be_written_keeps_nothing_and_fails_nothing(records, monkeypatch, tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv(settings.VERDICT_CACHE, str(blocked / "kept"))
    _, table = reading.judged(records, "quick")
    assert table and not list(tmp_path.glob(".*.tmp"))
    monkeypatch.setenv(settings.VERDICT_CACHE, "off")
    assert verdict_cache.folder() is None and verdict_cache.load("any") is None
