"""Runs the load guard caught (`studies.guard`, results/guard/runs.csv): their records are counted, not judged.

A run measured while other processes took the CPUs, or the hypervisor stole them, measured the machine's load as
much as the code. Its records stay in the results files; the verdicts leave them out under the guard's reason (one
reason for all, `CONTENDED`, so the ledger's counts stay short; results/guard/runs.csv says each run's own).
"""

from pathlib import Path

import pandas as pd

from dlrm_study.analysis.readers import leave_out
from dlrm_study.records import columns as col
from dlrm_study.records import store

ROWS = store.GUARD_ROWS  # the guard's rows beside the records
CONTENDED = "measured under contention (the load guard's runs, results/guard/runs.csv)"
KEY = (col.MACHINE, col.INVOCATION, col.PROCESS_ID)  # one run's process: its records name all three


def contended_runs(out: Path) -> set[tuple[str, str, str]]:
    """The (machine, invocation, process id) of every run the guard found contended."""
    path = out / ROWS
    if not path.exists():
        return set()
    rows = store.load(path)
    if rows.empty or "contended" not in rows:
        return set()
    caught = rows[rows["contended"].fillna("").astype(str) != ""]
    return {(str(m), str(i), str(int(float(p)))) for m, i, p in caught[list(KEY)].itertuples(index=False)}


def without_contended(frame: pd.DataFrame, caught: set[tuple[str, str, str]]) -> pd.DataFrame:
    """The records of runs the guard did not catch; the others counted under CONTENDED."""
    if frame.empty or not caught or any(k not in frame for k in KEY):
        return frame
    pid = pd.to_numeric(frame[col.PROCESS_ID], errors="coerce").fillna(-1).astype(int).astype(str)
    keys = zip(frame[col.MACHINE].astype(str), frame[col.INVOCATION].fillna("").astype(str), pid, strict=True)
    keep = pd.Series([k not in caught for k in keys], index=frame.index)
    return leave_out(frame, keep, CONTENDED)
