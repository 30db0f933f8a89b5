"""Reading a study's records: every record of its current points, nothing dropped without a word.

A record belongs to a point of a study by what it measured (`point_key`: the config, and so its
config hash, without the timing length: 10 or 20 timed steps measure the same point) and its
variant. What a reader leaves out it counts, by reason and machine, in the frame's
`attrs[LEFT_OUT]` (the ledger lists them): failed measurements, and configs or variants the study
no longer has. Two records of one cell (a repeat of one point and variant in one run, on one
machine at one thread count) are an error, never a silent choice of one of them.
"""

import collections
import hashlib
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from dlrm_study.analysis.identity import record_ids
from dlrm_study.config import LATER_FIELDS, Config
from dlrm_study.errors import UsageError
from dlrm_study.plans.sensitivity import NUMERICS_RECORDS
from dlrm_study.plans.sweep import Sweep, plan
from dlrm_study.records import columns as col
from dlrm_study.records import store
from dlrm_study.records.machine import select


class NoRecords(UsageError):
    """A study's records file does not exist yet (nothing measured): read as no evidence, said as such."""


LEFT_OUT = "left_out"  # frame.attrs[LEFT_OUT]: {(machine, reason): records}
LEFT_OUT_RECORDS = "left_out_records"  # frame.attrs[LEFT_OUT_RECORDS]: {(machine, reason): their identities}
FAILED = "failed (an error record)"
GONE = "of a config or variant the study no longer measures"
TIMING_LENGTH = ("train.steps",)  # how long a point is timed, not what it is
CELL = (col.MACHINE, col.THREADS, col.RUN_ID, col.POINT, col.VARIANT, col.REPEAT)


class Tally(dict):
    """A frame's `attrs` tally of what was left out. pandas deep-copies `attrs` on every selection, and the
    tallies hold every left-out record's identity; a tally is never changed once made (a reader makes a new
    one), so a copy of the frame shares it."""

    def __deepcopy__(self, memo: dict) -> "Tally":
        return self


def point_key(flat: Mapping[str, object]) -> str:
    """12 hex digits naming what a config measures: its flattened fields (`Config.flat`, or a record's config
    columns) as stored text, without its timing length; a field added later is left out at its default."""
    items = []
    for name in sorted(k for k in flat if k.startswith(("model.", "data.", "train.")) and k not in TIMING_LENGTH):
        value = store.text(flat[name])
        if name in LATER_FIELDS and value in ("", store.text(LATER_FIELDS[name])):
            continue
        items.append(f"{name}={value}")
    return hashlib.sha256("\n".join(items).encode()).hexdigest()[:12]


def config_key(cfg: Config) -> str:
    return point_key(cfg.flat())


def keys_of(frame: pd.DataFrame) -> pd.Series:
    """Each record's `point_key`, computed once per distinct config (records written before config columns
    existed share a config hash with later ones but not their columns, so the columns decide)."""
    columns = [c for c in frame.columns if c.startswith(("model.", "data.", "train."))]
    text = frame[columns].map(store.text) if columns else pd.DataFrame(index=frame.index)
    rows = text.apply(tuple, axis=1) if columns else pd.Series([()] * len(frame), index=frame.index)
    by_row = {row: point_key(dict(zip(columns, row, strict=True))) for row in set(rows)}
    return rows.map(by_row)


def leave_out(frame: pd.DataFrame, keep: pd.Series, reason: str) -> pd.DataFrame:
    """`frame[keep]`, the others counted under `reason` per machine in the result's `attrs[LEFT_OUT]`."""
    counts = collections.Counter(dict(frame.attrs.get(LEFT_OUT, {})))
    machines = frame.loc[~keep, col.MACHINE] if col.MACHINE in frame else pd.Series("", index=frame.index[~keep])
    for machine, n in machines.fillna("").value_counts().items():
        counts[(machine, reason)] += int(n)
    ids = dict(frame.attrs.get(LEFT_OUT_RECORDS, {}))
    dropped = frame[~keep]
    for machine, part in dropped.groupby(machines.fillna("").astype(str)) if len(dropped) else ():
        ids[(machine, reason)] = ids.get((machine, reason), frozenset()) | frozenset(record_ids(part))
    kept = frame[keep].copy()
    kept.attrs[LEFT_OUT] = Tally(counts)
    kept.attrs[LEFT_OUT_RECORDS] = Tally(ids)
    return kept


def labelled(frame: pd.DataFrame, labels: Mapping[tuple[str, str], str], studies: Iterable[str] = ()) -> pd.DataFrame:
    """The records of the points `labels` names ((point key, variant) -> label), with `point`, whichever study
    measured them; failed ones left out, counted, and so are the records that match no point but are this
    study's: of one of `studies`, or stored under one of its point labels (a config since changed)."""
    if frame.empty:
        return frame
    keys = list(zip(keys_of(frame), frame[col.VARIANT].astype(str), strict=True))
    matched = pd.Series([k in labels for k in keys], index=frame.index)
    own = frame[col.STUDY].isin(list(studies)) if col.STUDY in frame else pd.Series(False, index=frame.index)
    if col.POINT in frame:
        own |= frame[col.POINT].isin(set(labels.values()))
    frame = leave_out(frame.assign(_key=keys), matched | ~own, GONE)  # another study's records are not counted
    frame = frame[matched.loc[frame.index]]
    if col.ERROR in frame:
        frame = leave_out(frame, frame[col.ERROR].isna() | (frame[col.ERROR].astype(str) == ""), FAILED)
    frame[col.POINT] = frame["_key"].map(labels)
    return frame.drop(columns="_key")


def check_cells(frame: pd.DataFrame, cell: Iterable[str] = CELL) -> pd.DataFrame:
    """The frame, after refusing two records of one cell (`CELL`) in one run, naming the first such cell."""
    keys = [k for k in cell if k in frame]
    doubled = frame.duplicated(keys, keep=False) if keys and not frame.empty else pd.Series(False, index=frame.index)
    if doubled.any():
        first = frame[doubled].iloc[0]
        where = ", ".join(f"{k} {first[k]}" for k in keys)
        raise UsageError(f"two records of one cell ({where}): a repeat is measured once per run")
    return frame


def left_out(frame: pd.DataFrame, machine: str | None = None) -> dict[str, int]:
    """What a reader left out of `frame`, by reason (of one machine's records, or of every machine's)."""
    counts: collections.Counter[str] = collections.Counter()
    for (who, reason), n in frame.attrs.get(LEFT_OUT, {}).items():
        if machine is None or who == machine:
            counts[reason] += n
    return dict(counts)


def left_out_records(frame: pd.DataFrame, machine: str | None = None) -> dict[str, frozenset[str]]:
    """The identities (`identity.record_ids`) of what a reader left out of `frame`, by reason."""
    found: dict[str, frozenset[str]] = {}
    for (who, reason), ids in frame.attrs.get(LEFT_OUT_RECORDS, {}).items():
        if machine is None or who == machine:
            found[reason] = found.get(reason, frozenset()) | ids
    return found


def pool(*frames: pd.DataFrame) -> pd.DataFrame:
    """Records of one study's points read from several files, as one frame, with what each reader left out
    (a record in two files is still two records: two cells of one run are refused, `check_cells`)."""
    counts: collections.Counter = collections.Counter()
    ids: dict[tuple[str, str], frozenset[str]] = {}
    for frame in frames:
        counts.update(frame.attrs.get(LEFT_OUT, {}))
        for key, found in frame.attrs.get(LEFT_OUT_RECORDS, {}).items():
            ids[key] = ids.get(key, frozenset()) | found
    full = [f for f in frames if not f.empty]
    joined = pd.concat(full, ignore_index=True) if full else (frames[0].iloc[0:0] if frames else pd.DataFrame())
    joined.attrs = {LEFT_OUT: Tally(counts), LEFT_OUT_RECORDS: Tally(ids)}
    return check_cells(joined, (*CELL, col.CONFIG_NAME))  # a point is of one config: its name keys it too


def point_records(sweep: Sweep, path: Path, studies: Iterable[str], machine: str | None = "this") -> pd.DataFrame:
    """The records of `studies` in another results file (`path`) that measured the sweep's current points, by
    point identity, labelled with the sweep's `point`; failed ones and other configs of those studies counted."""
    if not path.exists():
        raise NoRecords(f"no records yet: {path} does not exist")
    frame = store.load(path)
    if frame.empty or col.STUDY not in frame:
        return frame.iloc[0:0]
    frame = frame[frame[col.STUDY].isin(list(studies))]  # another study's records are not this one's
    points = plan(sweep, here=False)[0]
    labels = {(config_key(cfg), v): label for label, cfgs in points for v, cfg in cfgs.items()}
    frame = labelled(frame, labels, studies)
    frame[col.GRID] = frame[col.POINT]
    return check_cells(select(frame, machine))


def sweep_records(sweep: Sweep, machine: str | None = "this") -> pd.DataFrame:
    """The stored measurements of the sweep's current points on one machine (None: every machine's), labelled
    with the sweep's `point` (whichever study measured them); failed ones and other configs left out, counted."""
    path = Path(sweep.out)
    if not path.exists():
        raise NoRecords(f"no records yet: {path} does not exist (run the sweep, or measure=True)")
    frame = store.load(path)
    if frame.empty:
        return frame
    points = plan(sweep, here=False)[0]
    labels = {(config_key(cfg), v): label for label, cfgs in points for v, cfg in cfgs.items()}
    frame = labelled(frame, labels, [sweep.name])
    frame[col.GRID] = frame[col.POINT]
    return check_cells(select(frame, machine))


TRITON = "triton"
GPU_KERNELS = (TRITON, "torch")  # a GPU step's kernels (`kernel_path`): Triton's, or their PyTorch stand-ins
MIXED_KERNELS = "of a repeat whose GPU points ran different kernels (Triton and its PyTorch stand-ins): not paired"


def one_kernel_path(frame: pd.DataFrame) -> pd.DataFrame:
    """The records of every repeat (machine, run, repeat) whose GPU points ran one kernel path; a repeat that ran
    Triton at some points and the PyTorch stand-ins at others is left out whole, counted (`MIXED_KERNELS`): a pair
    across the two would put one code at one end of a comparison and another at the other. The host's own paths
    (the fused CPU kernels of the host placement, ATen of the host loops) are another device's step, not a
    stand-in, and do not count."""
    if frame.empty or col.KERNEL_PATH not in frame:
        return frame
    cell = [frame[k].astype(str) for k in (col.MACHINE, col.RUN_ID, col.REPEAT) if k in frame]
    gpu_paths = frame[col.KERNEL_PATH].where(frame[col.KERNEL_PATH].isin(GPU_KERNELS))  # the host's: NaN, not counted
    paths = gpu_paths.groupby(cell).transform("nunique")
    return leave_out(frame, paths <= 1, MIXED_KERNELS)


NUMERICS_FAILED = "of a lending whose Triton kernels failed their numerics check (`lending.numerics`)"


def failed_checks(out: Path) -> frozenset[tuple[str, str]]:
    """(machine, invocation) of every lending whose numerics check failed at some shape (`NUMERICS_RECORDS`)."""
    path = Path(out) / NUMERICS_RECORDS
    frame = store.load(path) if path.exists() else pd.DataFrame()
    if frame.empty or col.NUMERICS_PASSED not in frame or col.INVOCATION not in frame:
        return frozenset()
    failed = frame[~frame[col.NUMERICS_PASSED].astype(str).str.lower().isin(["true", "1"])]
    return frozenset((m, i) for m, i in zip(failed[col.MACHINE], failed[col.INVOCATION].fillna(""), strict=True) if i)


def checked_kernels(frame: pd.DataFrame, failed: frozenset[tuple[str, str]]) -> pd.DataFrame:
    """The records less the Triton ones of a lending whose numerics check failed (`failed_checks`), counted."""
    if frame.empty or not failed or col.KERNEL_PATH not in frame or col.INVOCATION not in frame:
        return frame
    lending = list(zip(frame[col.MACHINE], frame[col.INVOCATION].fillna(""), strict=True))
    wrong = frame[col.KERNEL_PATH].eq(TRITON) & pd.Series([key in failed for key in lending], index=frame.index)
    return leave_out(frame, ~wrong, NUMERICS_FAILED)
