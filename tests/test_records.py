"""Records with one schema: every committed row reads into a Record and back unchanged, and the configs
of records written under today's config schema hash as they did when measured."""

from pathlib import Path

import pytest

from dlrm_study import config
from dlrm_study.records import store
from dlrm_study.records.record import SECTIONS, Record, make_record

RESULTS = Path(__file__).resolve().parents[1] / "results"
FILES = sorted(RESULTS.glob("*.csv"))
SCHEMA = set(config.load("tiny").flat())


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_committed_row_round_trips(path: Path) -> None:
    for row in store.read_rows(path)[1]:
        record = Record.from_row(row)
        assert record.to_row() == row
        assert store.key_of(record.to_row()) == store.key_of(row)


def rebuilt(row: dict[str, str]) -> config.Config:
    """The config a stored row describes, from its flattened columns."""
    cfg = config.load("tiny")
    cfg.name = row["config_name"]
    for column, value in row.items():
        if column.startswith(SECTIONS) and value != "":
            config.apply_override(cfg, f"{column}={value}")
    return cfg


# Files none of whose rows records every field of today's schema: the test can check nothing there, and says so.
WITHOUT_COMPLETE_ROWS = {
    "gpu_predictions.csv": "predictions, with no measured config",
}


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_config_hashes_of_stored_records_stay_the_same(path: Path) -> None:
    """Rows that record every field of today's config schema (those older than a hashed field cannot)."""
    complete = [
        row for row in store.read_rows(path)[1]
        if row.get("config_hash") and all(row.get(c, "") != "" or c == "data.path" for c in SCHEMA)
    ]  # fmt: skip
    if path.name in WITHOUT_COMPLETE_ROWS:
        assert not complete, f"{path.name} now has complete rows: take it out of WITHOUT_COMPLETE_ROWS"
        return
    assert complete, f"{path.name}: no row records today's whole schema, so nothing here is checked"
    for row in complete:
        assert rebuilt(row).hash() == row["config_hash"], (path.name, row.get("study"), row.get("variant"))


def test_a_new_record_reads_back_into_its_parts() -> None:
    row = make_record("s", {"ms_median": 2.0, "ms_p10": 1.0, "ms_p90": 3.0, "samples_per_s": 10.0,
                               "op_loss_ms": 0.5}, config.load("tiny"), variant="reference", repeat=0)  # fmt: skip
    record = Record.from_row(row)
    assert record.timing.ms_median == 2.0 and record.breakdown.ms == {"loss": 0.5}
    assert record.labels["variant"] == "reference" and record.config["train.loop"] == "reference"
    assert record.machine.key == row["machine"] and record.identity["run_id"] == row["run_id"]
