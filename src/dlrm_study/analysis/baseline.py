"""Notebook 02's S1 decomposition read back: each step over the 2020 step on torch 1.5.1, and its projection."""

import math
from pathlib import Path

import pandas as pd

from dlrm_study.analysis import flags as flagging
from dlrm_study.analysis import stats
from dlrm_study.analysis.readers import FAILED, leave_out
from dlrm_study.config.variants import BF16_PAIR
from dlrm_study.records import columns as col
from dlrm_study.records import store
from dlrm_study.records.machine import select
from dlrm_study.studies.baseline import OLD, STEPS

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
        table = stats.paired_ratios(clean, [col.CONFIG_NAME, col.THREADS], variant, OLD)
        tables.append(table.assign(**{col.VARIANT: variant}, step=STEPS[variant]))
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()


def projection(
    frame: pd.DataFrame, config_name: str, cores: int = 28, loop: str | None = None
) -> dict[str, float] | None:
    """An optimized loop's factor over the 2020 step, extrapolated from 2 threads to `cores`: `loop` where
    given (S1 declares its loop: bf16 where the CPU has it), else the faster of the pair.

    Assumption (a projection, not a measurement): each side keeps scaling with threads as it did
    from 1 to 2 threads here, as a power law (speedup(n) = n ** a, a = log2(rate at 2 / rate at 1)).
    """
    clean = frame[frame[col.CONFIG_NAME] == config_name]
    rate = clean.groupby([col.VARIANT, col.THREADS])[col.SAMPLES_PER_S].median()
    best = max(
        (v for v in ((loop,) if loop else BF16_PAIR) if (v, 2) in rate and (v, 1) in rate),
        key=lambda v: rate[(v, 2)],
        default=None,
    )
    if best is None or (OLD, 1) not in rate or (OLD, 2) not in rate:
        return None
    exponent = {v: math.log2(rate[(v, 2)] / rate[(v, 1)]) for v in (best, OLD)}
    measured = rate[(best, 2)] / rate[(OLD, 2)]
    projected = measured * (cores / 2) ** (exponent[best] - exponent[OLD])
    return {col.VARIANT: best, "measured": measured, "projected": projected, "cores": cores,
            "exponent_best": exponent[best], "exponent_2020": exponent[OLD]}  # fmt: skip


def ms_table(frame: pd.DataFrame) -> pd.DataFrame:
    """ms per step of each step of the decomposition, per config, a column per thread count: medians of repeats."""
    return (
        frame.groupby([col.CONFIG_NAME, col.THREADS, "step"], sort=False)[col.MS_MEDIAN].median().unstack(col.THREADS)
    )
