"""A bound is a bound (issue 70, item 3): no committed record of a CPU loop is faster than its machine's physical
sequential bound (`analysis.physical.tightest_bounds`: each phase at the fastest its probes reached), nor than the
overlapped one; a record faster than its own roofline says so (`roofline_beaten` names the step), and no record of
today's protocol is."""

from pathlib import Path

import pandas as pd
import pytest

from dlrm_study.analysis import physical
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


def test_a_record_faster_than_its_roofline_says_so_and_none_is_of_todays_protocol() -> None:
    bench = measured("bench.csv").dropna(subset=[col.ROOFLINE_MS])
    beat = faster_than(bench, col.ROOFLINE_MS)
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
