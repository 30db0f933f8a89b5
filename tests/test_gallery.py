"""The findings printed under a figure read the records the figure draws."""

import pandas as pd
from tests.test_identity import RECORD

from dlrm_study.records import columns as col
from dlrm_study.report import gallery


def test_the_findings_under_a_figure_read_the_newest_code_it_draws():
    # Two processes, two runs: the code changed between them.
    old = {**RECORD, col.CODE_FINGERPRINT: "aaaaaaaaaaaa", col.TIMESTAMP: "2026-12-01T00:00:00", col.RUN_ID: "old"}
    new = {**RECORD, col.CODE_FINGERPRINT: "bbbbbbbbbbbb", col.TIMESTAMP: "2026-12-03T00:00:00", col.RUN_ID: "new"}
    read = gallery.read(lambda: pd.DataFrame([old, new]))
    assert list(read[col.CODE_FINGERPRINT]) == ["bbbbbbbbbbbb"]


def test_a_run_that_holds_an_older_code_is_not_drawn():
    old = {**RECORD, col.CODE_FINGERPRINT: "aaaaaaaaaaaa", col.TIMESTAMP: "2026-12-01T00:00:00", col.RUN_ID: "one"}
    new = {**RECORD, col.CODE_FINGERPRINT: "bbbbbbbbbbbb", col.TIMESTAMP: "2026-12-03T00:00:00", col.RUN_ID: "one"}
    assert gallery.read(lambda: pd.DataFrame([old, new])).empty
