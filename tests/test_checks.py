"""The notebooks' nbval checks can come out False (each is shown failing on a broken input)."""

import pandas as pd

from dlrm_study.report import checks


def records(cells: list[tuple]) -> pd.DataFrame:
    cols = ["point", "config_hash", "variant", "machine", "run_id", "repeat", "timestamp", "samples_per_s"]
    return pd.DataFrame([(*c, f"t{i}", 1.0 + i) for i, c in enumerate(cells)], columns=cols)


WHOLE = [("p", "h1", v, "m", "r", rep) for rep in range(2) for v in ("a", "b")]


def test_pairs_within_runs() -> None:
    assert checks.pairs_within_runs(records(WHOLE))
    assert not checks.pairs_within_runs(records([*WHOLE, WHOLE[0]]))  # a cell measured twice
    assert not checks.pairs_within_runs(records(WHOLE[:-1]))  # repeat 1 lacks variant b


def test_base_point_shared() -> None:
    a = records(WHOLE)
    assert checks.base_point_shared(a, a.copy())
    remeasured = a.assign(timestamp=a["timestamp"] + "-again")
    assert not checks.base_point_shared(a, remeasured)  # measured twice: the curves would not meet at one point


def test_seeds_per_loop() -> None:
    evals = pd.DataFrame({"kind": "eval", "variant": ["a", "a", "b"], "train.seed": [0, 1, 0]})
    assert checks.seeds_per_loop(evals[evals["variant"] == "a"], 2)
    assert not checks.seeds_per_loop(evals, 2)  # b trained from one seed


def test_a_failed_measurement_turns_the_notebooks_check_false():
    """An error record is a loop that broke: its reader leaves it out, counts it, and the check says so."""
    from dlrm_study.analysis.readers import FAILED, leave_out

    frame = pd.DataFrame({"machine": ["m", "m"], "error": [None, "RuntimeError: boom"]})
    kept = leave_out(frame, frame["error"].isna(), FAILED)
    assert len(kept) == 1 and not checks.none_failed(kept)
    assert checks.none_failed(leave_out(frame.iloc[:1], frame.iloc[:1]["error"].isna(), FAILED))
