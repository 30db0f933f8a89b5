"""Judged once, into one file (`report.verdicts`): results/verdicts.json holds every verdict and its numbers, the
pages print what it holds, and a file that is not the judgement of the records beside it is said to be so."""

import json
import math

import pytest
from tests.conftest import ROOT

from dlrm_study import settings
from dlrm_study.analysis import stats
from dlrm_study.analysis.judgement import Judgement, Status
from dlrm_study.analysis.wording import Share
from dlrm_study.report import reading, session, verdicts

RECORDS = 400  # the first records of results/sweeps.csv: a few runs, judged in seconds


@pytest.fixture
def out(tmp_path, monkeypatch):
    """A results folder with some of the committed CPU loops' records, judged into its verdicts.json; no cache."""
    folder = tmp_path / "results"
    folder.mkdir()
    lines = (ROOT / "results" / "sweeps.csv").read_text().splitlines(keepends=True)
    (folder / "sweeps.csv").write_text("".join(lines[: RECORDS + 1]))
    monkeypatch.setenv(settings.VERDICT_CACHE, "off")
    monkeypatch.setattr(reading, "_kept", {})
    verdicts.write(folder, "quick")
    return folder


def test_a_verdict_reads_back_as_it_was_judged():
    numbers = {"dlrm-benchmark": stats.Ratio(2.34, 2.31, 2.37, 96, 0.03, runs=32), "kaggle": stats.NO_RATIO,
               "share": Share(0.55, 0.36, 0.72, 4, 0.18, runs=2)}  # fmt: skip
    judged = Judgement(Status.REPRODUCED, "bf16 over fp32", numbers, 32, 96, {"earlier code (history)": 4},
                       ("a note",), "exceeded 1.8x")  # fmt: skip
    again = verdicts.from_entry(json.loads(json.dumps(verdicts.entry("S3", "m", judged, ""))))
    assert again == judged and again.left_out == judged.left_out
    assert again.numbers["dlrm-benchmark"] == numbers["dlrm-benchmark"] and math.isnan(again.numbers["kaggle"].center)
    assert type(again.numbers["share"]) is Share and type(again.numbers["dlrm-benchmark"]) is stats.Ratio
    (number, *_) = verdicts.entry("S3", "m", judged, "earlier code (optimized 9e2daaf, 2026-12-06)")["numbers"]
    key = tuple(number[k] for k in ("claim", "machine", "code", "name", "quantity"))
    assert key == ("S3", "m", "earlier code (optimized 9e2daaf, 2026-12-06)", "dlrm-benchmark",
                   "bf16 over fp32, dlrm-benchmark")  # fmt: skip


def test_the_pages_print_what_the_file_holds_and_the_check_says_it_is_not_the_records_judgement(out, monkeypatch):
    """A second value planted in verdicts.json is what every page prints (they read the file, never judge again),
    and `problems` names it: the file is not what the records give."""
    assert verdicts.problems(out, "quick") == []
    monkeypatch.setattr(verdicts, "judge", lambda evidence: pytest.fail("a page judged again"))
    found = verdicts.load(out)
    planted = next(e for e in found["verdicts"] if e["claim"] == "S2")
    planted["detail"], planted["status"] = "a planted 9.99x", "reproduced"
    (out / verdicts.FILE).write_text(json.dumps(found))
    said = session.verdict_lines(out, "quick")
    assert f"S2 on {planted['machine']}: reproduced" in said and "a planted 9.99x" in said
    monkeypatch.undo()
    monkeypatch.setenv(settings.VERDICT_CACHE, "off")
    wrong = verdicts.problems(out, "quick")
    assert len(wrong) == 1 and f"S2 on {planted['machine']}" in wrong[0]


def test_a_file_of_other_records_is_not_read_and_says_so(out, monkeypatch):
    (out / "sweeps.csv").write_text((out / "sweeps.csv").read_text() + "\n")  # another digest
    assert verdicts.read(out, "quick") is None and verdicts.read(out, "smoke") is None
    assert verdicts.problems(out, "quick") == [f"{verdicts.FILE}: judged from other records than the tree's "
                                               "(run make render)"]  # fmt: skip
    (out / verdicts.FILE).write_text("{not json")
    assert verdicts.problems(out, "quick") == [f"{verdicts.FILE}: none that reads (run make render)"]


def test_a_fresh_measurement_is_judged_into_its_own_file_beside_the_committed_one(out, tmp_path):
    """`make reproduce FRESH=1` judges its folder alone, into that folder's verdicts.json, and reads the committed
    words from the committed folder's."""
    import shutil

    import pandas as pd

    from dlrm_study.report import fresh

    mine = tmp_path / "fresh"
    shutil.copytree(out, mine, ignore=shutil.ignore_patterns(verdicts.FILE))
    machine = pd.read_csv(out / "sweeps.csv", usecols=["machine"])["machine"].iloc[0]
    lines = fresh.compare(mine, out, "quick", machine)
    table, _ = verdicts.tables(verdicts.load(mine))
    assert f"S3 fresh: {table['S3'][machine].status}: {table['S3'][machine].detail}" in lines
    assert any(line.startswith("S3 committed: ") for line in lines) and verdicts.problems(mine, "quick") == []
