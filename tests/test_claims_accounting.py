"""Nothing uncounted (docs/claims.md): every record of every frame a claim reads is in a deciding pair or counted
under one reason, once, so the two sum to the frames' records (by identity: a record two readers hold is one)."""

from pathlib import Path

import pandas as pd
import pytest
from tests.test_verdicts import GPU, WITHIN, evidence, knob

from dlrm_study.analysis import evidence as ev
from dlrm_study.analysis import readers
from dlrm_study.analysis.identity import record_ids
from dlrm_study.claims import registry as claims
from dlrm_study.claims.claim import NOT_PAIRED, Claim, ids_of
from dlrm_study.records import Machine, store
from dlrm_study.records import columns as col

RESULTS = Path(__file__).resolve().parents[1] / "results"


def size(claim: Claim, evidence: ev.Evidence, machine: str) -> int:
    """The distinct records of `machine` in the claim's frames: those read and those the readers left out."""
    found: set[str] = set()
    for frame in claim.reads(evidence):
        mine = frame[frame["machine"] == machine] if "machine" in frame else frame.iloc[0:0]
        found |= set(record_ids(mine))
        for ids in readers.left_out_records(frame, machine).values():
            found |= ids
    return len(found)


def accounted(claim: Claim, evidence: ev.Evidence, machine: str) -> tuple[int, int]:
    """(in a deciding pair + every counted reason, the frames' size) of one claim on one machine."""
    judged = claim.judge(evidence, machine)
    return len(claim.used(evidence)) + sum(judged.left_out.values()), size(claim, evidence, machine)


@pytest.fixture(scope="module", params=["full", "quick"])
def stored(request: pytest.FixtureRequest) -> ev.Evidence:
    """The committed records of a profile: `quick` holds the accuracy study S3's accuracy half reads."""
    if not (RESULTS / "sweeps.csv").exists():
        pytest.skip("no committed records")
    return ev.Evidence.load(RESULTS, request.param)


def test_every_stored_record_of_every_claim_is_paired_or_counted_once(stored: ev.Evidence) -> None:
    checked = 0
    for machine in stored.machines():
        if not Machine.parse(machine).recorded:
            continue
        mine = stored.of(machine)
        for claim in claims.CLAIMS:
            total, records = accounted(claim, mine, machine)
            assert total == records, f"{claim.id} on {machine}: {total} counted of {records} records"
            checked += records
    assert checked  # the committed records were read, not an empty folder


def test_every_stored_accuracy_record_is_in_s3s_frame_or_counted() -> None:
    """Every record the accuracy study stored (results/convergence.csv), of every machine, is in S3's accuracy frame
    or counted by reason, and S3's account sums to its frames. (Fails before: 168 `accuracy-quick` records of an
    earlier config, 84 of each of two machines, were dropped by the reader and counted nowhere.)"""
    if not (RESULTS / "convergence.csv").exists():
        pytest.skip("no committed records")
    evidence = ev.Evidence.load(RESULTS, "quick")
    written = store.load(RESULTS / "convergence.csv")
    written = written[written[col.STUDY] == "accuracy-quick"]
    claim = claims.BY_ID["S3"]
    for machine, rows in written.groupby(col.MACHINE):
        mine = evidence.of(machine)
        assert ids_of(mine.accuracy, machine) == set(record_ids(rows)), machine
        total, records = accounted(claim, mine, machine)
        assert total == records >= len(rows), f"S3 on {machine}: {total} counted of {records} records"
    assert len(written)  # the committed accuracy records were read


def sweep(tag: str = "") -> pd.DataFrame:
    """A knob's sweep whose two ends are two configs (records of one cell at two points are two records)."""
    frame = knob(WITHIN)
    return frame.assign(config_hash=tag + frame["x"].astype(str))


def knob_at(frame: pd.DataFrame, x: float, stamp: str) -> pd.DataFrame:
    """The knob sweep's records at another value (between its ends): shown, in no deciding pair."""
    return frame.assign(x=x, timestamp=frame["timestamp"] + stamp)


def test_a_record_two_knob_readers_hold_is_counted_once() -> None:
    """The rows sweep pairs a record the tables sweep's reader left out (its label matches both sweeps): it is
    in a pair, never also "of a config ... no longer measured"; a record both readers left out is counted once.
    (Fails before: the reasons were summed over frames, so H1 counted the shared records twice.)"""
    knobs = {k: sweep() for k in ev.H1_KNOBS}
    shared = knobs["rows"] = sweep("shared-")
    stray = knob_at(sweep("gone-").iloc[:4], 5.0, "x")
    tables = pd.concat([knobs["tables"], shared, stray], ignore_index=True)
    knobs["tables"] = readers.leave_out(
        tables, ~tables["config_hash"].isin([*shared["config_hash"], *stray["config_hash"]]), readers.GONE
    )
    rows = pd.concat([shared, stray], ignore_index=True)
    knobs["rows"] = readers.leave_out(rows, rows["config_hash"].isin(shared["config_hash"]), readers.GONE)
    found = evidence(gpu_knobs=knobs).of(GPU)
    claim = claims.BY_ID["H1"]
    judged = claim.judge(found, GPU)
    assert judged.left_out.get(readers.GONE) == len(stray)  # once, though both readers left it out
    assert accounted(claim, found, GPU)[0] == accounted(claim, found, GPU)[1]


def test_records_between_a_knobs_ends_are_counted_as_read_in_no_pair() -> None:
    """(Fails before: the knob's middle values were neither used nor counted.)"""
    knobs = {k: sweep() for k in ev.H1_KNOBS}
    middle = knob_at(sweep("middle-"), 5.0, "m")
    knobs["lookups"] = pd.concat([knobs["lookups"], middle], ignore_index=True)
    found = evidence(gpu_knobs=knobs).of(GPU)
    claim = claims.BY_ID["H1"]
    assert claim.judge(found, GPU).left_out[NOT_PAIRED] == int((middle["repeat"] != 0).sum())
    assert accounted(claim, found, GPU)[0] == accounted(claim, found, GPU)[1]
