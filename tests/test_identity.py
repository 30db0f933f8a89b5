"""A record has one identity whichever frame holds it, and a machine's part of the evidence is made once."""

import copy
from pathlib import Path

import pandas as pd
import pytest

from dlrm_study.analysis import readers
from dlrm_study.analysis.evidence import Evidence
from dlrm_study.analysis.identity import record_ids
from dlrm_study.records import columns as col

RESULTS = Path(__file__).resolve().parents[1] / "results"
RECORD = {col.STUDY: "cpu-loops", col.MACHINE: "m", col.RUN_ID: "r1", col.THREADS: 2, col.TIMESTAMP: "t0",
          col.CONFIG_HASH: "abc", col.VARIANT: "reference", col.REPEAT: 1}  # fmt: skip


def test_a_record_pooled_with_a_newer_files_columns_keeps_its_identity():
    # sweeps.csv has no invocation column; bench.csv's compare records do: pooled, the frame has the column,
    # empty for this record. One record, one identity, or a claim counts it twice.
    alone = pd.DataFrame([RECORD])
    pooled = pd.DataFrame([{**RECORD, col.INVOCATION: None}, {**RECORD, col.RUN_ID: "r2", col.INVOCATION: "i1"}])
    assert record_ids(alone).iloc[0] == record_ids(pooled).iloc[0]
    assert record_ids(pooled).iloc[0] != record_ids(pooled).iloc[1]


def test_identity_tells_records_apart_by_every_field():
    base = pd.DataFrame([RECORD])
    changed = [(col.STUDY, "sensitivity-quick"), (col.MACHINE, "n"), (col.RUN_ID, "r2"), (col.THREADS, 1),
               (col.TIMESTAMP, "t1"), (col.CONFIG_HASH, "def"), (col.VARIANT, "optimized-fp32"), (col.REPEAT, 2),
               (col.INVOCATION, "i1"), (col.KIND, "profile"), (col.STEP, 5)]  # fmt: skip
    for field, other in changed:  # (a record of 1 thread and one of 2 may be stamped in one second)
        assert record_ids(base.assign(**{field: other})).iloc[0] != record_ids(base).iloc[0], field
    from dlrm_study.analysis.identity import IDENTITY

    assert {field for field, _ in changed} == set(IDENTITY)  # every field, each alone


def test_a_tally_is_shared_by_a_frames_copies_and_a_new_one_made_by_the_next_reader():
    frame = pd.DataFrame([RECORD, {**RECORD, col.REPEAT: 0}])
    kept = readers.leave_out(frame, frame[col.REPEAT] == 1, "a reason")
    tally = kept.attrs[readers.LEFT_OUT_RECORDS]
    assert copy.deepcopy(kept).attrs[readers.LEFT_OUT_RECORDS] is tally
    again = readers.leave_out(kept, kept[col.REPEAT] == 2, "another")
    assert again.attrs[readers.LEFT_OUT_RECORDS] is not tally
    assert set(tally) == {("m", "a reason")}  # the first tally is unchanged by the second reader
    assert set(again.attrs[readers.LEFT_OUT_RECORDS]) == {("m", "a reason"), ("m", "another")}


def test_a_machines_part_is_made_once_and_equals_one_made_anew():
    if not (RESULTS / "sweeps.csv").exists():
        pytest.skip("no committed records")
    every = Evidence.load(RESULTS, "quick")
    machine = every.machines()[0]
    part = every.of(machine)
    assert every.of(machine) is part and part.of(machine) is part
    fresh = every.select(machine)
    for name, frame in part.frames().items():
        pd.testing.assert_frame_equal(frame, fresh.frames()[name], obj=name)
        assert frame.attrs == fresh.frames()[name].attrs, name
    fewer = every.without_run("no such run")
    assert fewer.parts == {}  # a copy with other frames starts with no parts
