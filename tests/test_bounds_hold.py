"""A bound is a bound (issue 70, item 3): no committed record of a CPU loop is faster than its machine's physical
sequential bound (`analysis.physical.tightest_bounds`: each phase at the fastest its probes reached), nor than the
overlapped one; and no roofline bound the tables read is beaten."""

from pathlib import Path

import pandas as pd
import pytest

from dlrm_study.analysis import operators, physical
from dlrm_study.perfmodel.operator_bounds import BEATEN
from dlrm_study.perfmodel.physical import OVERLAPPED, SEQUENTIAL
from dlrm_study.records import columns as col
from dlrm_study.records import store

RESULTS = Path(__file__).resolve().parents[1] / "results"
TIMED = ("sweeps.csv", "bench.csv")  # the CPU loops' timed records


def measured(name: str) -> pd.DataFrame:
    frame = store.load(RESULTS / name)
    failed = frame[col.ERROR].fillna("").astype(str) != "" if col.ERROR in frame else False
    return frame[~failed & frame[col.MS_MEDIAN].notna()]


def faster_than(frame: pd.DataFrame, bound: str) -> pd.DataFrame:
    return frame[frame[col.MS_MEDIAN] < frame[bound]]


@pytest.mark.parametrize("name", TIMED)
def test_no_committed_record_beats_its_physical_bound(name: str) -> None:
    bounds = store.load(RESULTS / "bounds.csv")
    joined = physical.beside(measured(name), bounds).dropna(subset=[SEQUENTIAL])
    assert len(joined) > 0, f"no record of {name} has a physical bound: nothing checked"
    for bound in (SEQUENTIAL, OVERLAPPED):
        beat = faster_than(joined, bound)
        shown = beat[[col.MACHINE, col.CONFIG_NAME, col.VARIANT, col.MS_MEDIAN, bound]].head().to_string()
        assert beat.empty, f"{len(beat)} records of {name} beat their {bound}:\n{shown}"


def test_no_roofline_bound_the_tables_read_is_beaten() -> None:
    """The roofline tables read each machine and config's newest code, invocation and limits
    (`operators.judged`): no record they read beats its roofline. A record that did beat its own (a loaded probe's
    limits, measured again since) says so, is never read against it, and is not of today's protocol."""
    bench = measured("bench.csv")
    read = operators.judged(bench).dropna(subset=[col.ROOFLINE_MS])
    assert len(read) > 0, "no record of bench.csv is read against a roofline: nothing checked"
    assert faster_than(read, col.ROOFLINE_MS).empty
    beat = faster_than(bench.dropna(subset=[col.ROOFLINE_MS]), col.ROOFLINE_MS)
    assert not set(beat.index) & set(read.index), "a record that beat its roofline is read against it"
    said = beat[BEATEN].fillna("").astype(str).str.split(",").apply(lambda parts: "step" in parts)
    assert said.all(), "a record beat its roofline without saying so"
    today = pd.to_numeric(beat[col.PROTOCOL], errors="coerce") == col.PROTOCOL_VERSION
    assert not today.any(), beat[today][[col.MACHINE, col.VARIANT, col.MS_MEDIAN, col.ROOFLINE_MS]].to_string()


def test_the_check_sees_a_planted_record_that_beats_its_bound() -> None:
    """The check can fail: a record one tenth of its bound's time is caught."""
    bounds = store.load(RESULTS / "bounds.csv")
    joined = physical.beside(measured("sweeps.csv"), bounds).dropna(subset=[SEQUENTIAL])
    planted = joined.head(1).assign(**{col.MS_MEDIAN: joined[SEQUENTIAL].iloc[0] / 10})
    assert len(faster_than(planted, SEQUENTIAL)) == 1
