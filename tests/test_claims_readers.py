"""The readers a claim's frames come from: failed records counted, a doubled cell refused, later fields keyed."""

import pandas as pd
import pytest

from dlrm_study.analysis import readers
from dlrm_study.errors import UsageError

MACHINE = "intel-xeon/avx512f+avx512_bf16/2cpu"
CONFIG = {"model.dense_features": 13, "train.batch_size": 128, "train.steps": 10}


def record(repeat: int, error: str = "", **config: object) -> dict:
    return {"machine": MACHINE, "threads": 2, "run_id": "r1", "study": "s", "variant": "v", "repeat": repeat,
            "error": error, "timestamp": f"t{repeat}", **CONFIG, **config}  # fmt: skip


def labels() -> dict[tuple[str, str], str]:
    return {(readers.point_key(CONFIG), "v"): "p"}


def test_failed_records_are_left_out_and_counted() -> None:
    frame = pd.DataFrame([record(0), record(1, error="boom"), record(2)])
    kept = readers.labelled(frame, labels(), ["s"])
    assert len(kept) == 2 and readers.left_out(kept) == {readers.FAILED: 1}
    assert len(readers.left_out_records(kept)[readers.FAILED]) == 1


def test_two_records_of_one_cell_are_refused() -> None:
    frame = readers.labelled(pd.DataFrame([record(1), record(1) | {"timestamp": "later"}]), labels(), ["s"])
    with pytest.raises(UsageError, match="two records of one cell"):
        readers.check_cells(frame)


def test_a_later_field_is_keyed_off_its_default_and_not_at_it() -> None:
    """A field added later is part of the point where it differs from its default (a record measured with it
    off is another point), and left out at its default (older records without it are the same point)."""
    base = readers.point_key(CONFIG)
    assert readers.point_key(CONFIG | {"train.split_sgd": True}) == base
    assert readers.point_key(CONFIG | {"train.split_sgd": False}) != base
    assert readers.point_key(CONFIG | {"train.steps": 20}) == base  # the timing length is not the point
