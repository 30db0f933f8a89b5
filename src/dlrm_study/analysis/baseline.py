"""Notebook 02's S1 decomposition read back: each step over the 2020 step on torch 1.5.1 (measured only)."""

from pathlib import Path

import pandas as pd

from dlrm_study.analysis import clusters
from dlrm_study.analysis import flags as flagging
from dlrm_study.analysis.readers import FAILED, leave_out
from dlrm_study.plans.baseline import OLD, STEPS
from dlrm_study.records import columns as col
from dlrm_study.records import store
from dlrm_study.records.machine import select

OTHER_PROFILE = "of another profile's run"


def baseline_records(profile: str, out: Path, machine: str | None = None) -> pd.DataFrame:
    """The decomposition's records (errors left out), with `step` (what each variant is) and `threads`.

    `machine`: a machine key; its records at every thread count are kept (None: every machine's).
    """
    path = out / "baseline.csv"
    if not path.exists():
        return pd.DataFrame()
    frame = store.load(path)
    frame = leave_out(frame, frame[col.STUDY] == f"baseline-2020-{profile}", OTHER_PROFILE)
    frame = select(leave_out(frame, frame[col.ERROR].isna(), FAILED), machine)
    frame["step"] = frame[col.VARIANT].map(STEPS)
    frame[col.THREADS] = frame["train.threads"].astype(int)
    return frame


def baseline_machine(profile: str, out: Path, preferred: str) -> str:
    """Whose 2020 baseline a notebook draws: `preferred`'s where it measured one, else the machine that
    measured one last (the figure names it: the baseline needs Python 3.8 and torch 1.5.1, not every
    machine has run it)."""
    every = baseline_records(profile, out)
    if every.empty or (every[col.MACHINE] == preferred).any():
        return preferred
    return str(every.sort_values(col.TIMESTAMP)[col.MACHINE].iloc[-1])


def factors(frame: pd.DataFrame) -> pd.DataFrame:
    """Each step's samples/s over the 2020 step on torch 1.5.1, paired within repeats, per config and threads."""
    clean = flagging.with_flags(frame)  # every repeat counts
    tables = []
    for variant in STEPS:
        if variant == OLD or variant not in set(clean[col.VARIANT]):
            continue
        table = clusters.paired_ratios(clean, [col.CONFIG_NAME, col.THREADS], variant, OLD)
        tables.append(table.assign(**{col.VARIANT: variant}, step=STEPS[variant]))
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()


def ms_table(frame: pd.DataFrame) -> pd.DataFrame:
    """ms per step of each step of the decomposition, per config, a column per thread count: medians of repeats."""
    return (
        frame.groupby([col.CONFIG_NAME, col.THREADS, "step"], sort=False)[col.MS_MEDIAN].median().unstack(col.THREADS)
    )
