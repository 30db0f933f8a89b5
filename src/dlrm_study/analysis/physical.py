"""Each loop against this machine's physical bound (notebook 02, `make compare-upstream`): how far from the hardware.

The bound is a record of its own (`dlrm-study bound`, results/bounds.csv: `perfmodel.physical`), measured by
probes no loop runs, per machine, config, precision and threads. A bench record is read against the tightest
bound of its machine, config, precision and threads (`tightest_bounds`), operator by operator and as a step, in
sequence and overlapped (`operators.PHYSICAL`). A part faster than its bound says the probe fell short, never a
share over 100%. The step's target: the optimized loop at its fastest native precision (bf16 where the CPU has
it, else fp32) within STEP_TARGET of the sequential bound.
"""

from pathlib import Path

import pandas as pd

from dlrm_study.analysis import operators
from dlrm_study.config.variants import OPTIMIZED_BF16, OPTIMIZED_FP32
from dlrm_study.perfmodel import physical
from dlrm_study.records import columns as col
from dlrm_study.records import store

KEYS = [col.MACHINE, col.CONFIG_NAME, col.PRECISION, col.THREADS]
COLUMNS = [physical.op_column(name) for name in physical.OPERATORS] + [physical.SEQUENTIAL, physical.OVERLAPPED]
STEP_TARGET = 0.9  # the optimized step within 90% of its sequential physical bound (or under it where overlap allows)
STEP = operators.PHYSICAL.steps[0][0]


def tightest_bounds(bounds: pd.DataFrame) -> pd.DataFrame:
    """Per machine, config, precision and threads n: each operator's bound the fastest any bound record of that
    machine, config and precision reached on n threads or fewer, and the two step bounds of those parts.

    Every probe's rate was reached, so each is a bound; the fastest is the tightest. A probe on a loaded machine
    only slows, and a newer record would otherwise loosen the bound. Fewer threads count too: a loop on n
    threads may leave some idle (`measure.physical.thread_counts`)."""
    if bounds.empty or any(c not in bounds for c in KEYS + COLUMNS):
        return pd.DataFrame(columns=KEYS + COLUMNS)
    records, rows = keyed(bounds), []
    for key, mine in records.groupby(KEYS[:-1]):
        for threads in sorted(set(mine[col.THREADS])):
            fewer = mine[mine[col.THREADS] <= threads]
            fastest = {name: float(fewer[physical.op_column(name)].min()) for name in physical.OPERATORS}
            parts = {physical.op_column(name): ms for name, ms in fastest.items()}
            rows.append(dict(zip(KEYS, (*key, threads), strict=True)) | parts | physical.step_bounds(fastest))
    return pd.DataFrame(rows, columns=KEYS + COLUMNS)


def keyed(frame: pd.DataFrame) -> pd.DataFrame:
    """The keys as one type each (precision as text, threads as integers), so records of two files join."""
    frame = frame.copy()
    frame[col.PRECISION] = frame[col.PRECISION].astype(str)
    frame[col.THREADS] = pd.to_numeric(frame[col.THREADS], errors="coerce").fillna(0).astype(int)
    return frame


def with_bounds(bench: pd.DataFrame, bounds: pd.DataFrame) -> pd.DataFrame:
    """Bench records that have a physical bound, with its columns beside theirs (a bench record's own columns of
    the same names, none today, give way)."""
    if bench.empty or any(c not in bench for c in KEYS):
        return bench.iloc[0:0]
    return beside(bench, bounds).dropna(subset=[physical.SEQUENTIAL])


def beside(records: pd.DataFrame, bounds: pd.DataFrame) -> pd.DataFrame:
    """Every record (its keys as `keyed` writes them), with the physical bound's columns where its machine,
    config, precision and threads have one, empty elsewhere."""
    if records.empty or any(c not in records for c in KEYS):
        return records
    ours = keyed(records.drop(columns=[c for c in COLUMNS if c in records]))
    return ours.merge(tightest_bounds(bounds), on=KEYS, how="left").set_axis(ours.index)  # a left merge keeps order


def unbounded(bench: pd.DataFrame, bounds: pd.DataFrame) -> list[str]:
    """The machines with bench records and no bound record of their config, precision and threads."""
    if bench.empty or any(c not in bench for c in KEYS):
        return []
    have = set(map(tuple, tightest_bounds(bounds)[KEYS].itertuples(index=False)))
    keys = keyed(bench)[KEYS].drop_duplicates()
    return sorted({k[0] for k in map(tuple, keys.itertuples(index=False)) if k not in have})


def fastest_variant(records: pd.DataFrame, machine: str) -> str:
    """The variant the step target names on a machine: optimized bf16 where its bf16 is native, else fp32."""
    mine = records[records[col.MACHINE] == machine]
    native = col.NATIVE_BF16 in mine and (mine[col.NATIVE_BF16].astype(str) == "True").any()
    return OPTIMIZED_BF16 if native else OPTIMIZED_FP32


def report(bench: pd.DataFrame, bounds: pd.DataFrame) -> str:
    """Each operator and the step against the physical bound, per machine, config and variant; then the
    machines that have no bound."""
    joined = with_bounds(bench, bounds)

    def target(key: tuple, part: str) -> tuple[float, str] | None:
        machine, _, variant = key
        return (STEP_TARGET, "") if part == STEP and variant == fastest_variant(joined, machine) else None

    lines = [operators.report(joined, operators.PHYSICAL, target)] if not joined.empty else []
    lines += [f"{machine}: no physical bound measured at its bench records' config, precision and threads "
              "(dlrm-study bound)" for machine in unbounded(bench, bounds)]  # fmt: skip
    return "\n".join(lines) or "no bench records here"


def stored_report(folder: Path) -> str:
    """`report` of a results folder's bench and bound records (notebook 02's cell)."""
    bench, bounds = folder / "bench.csv", folder / "bounds.csv"
    if not bench.is_file():
        return "no bench records here"
    return report(store.load(bench), store.load(bounds) if bounds.is_file() else pd.DataFrame())
