"""Evidence at HEAD: per machine, the records of the newest code it measured, each protocol-1 run's warm-up left out.

A record carries the fingerprint of the code its loop ran (`code_fingerprint`, `records.code_identity`).
Per machine and loop, the newest fingerprint is the one whose latest record is latest; records of any other
fingerprint are counted as history and never mixed into a ratio with current ones. Records without a
fingerprint (measured before fingerprints existed) are a machine's current records only where it has
none newer; a verdict on them says the code is unknown and names the commits they were measured at.

Records of protocol 1 (no `protocol` column, or a value below `SETTLED`) measured a study's runs one after
the other in one process: repeat 0 of each of their runs is a warm-up, recorded, counted under `WARM_UP`, not
used (first-use costs fall on whichever variant runs first), unless its run has fewer than 2 repeats. From
protocol 2 each variant warms up untimed until its step time settles before its timed repeats, so every
timed repeat counts, repeat 0 too.
"""

import dataclasses
from collections.abc import Iterable

import pandas as pd

from dlrm_study.analysis.readers import leave_out
from dlrm_study.records import code_identity
from dlrm_study.records import columns as col

HISTORY = "earlier code (history)"
WARM_UP = "warm-up (repeat 0 of its run)"
RUN = (col.MACHINE, col.THREADS, col.RUN_ID)
SETTLED = 2  # the first protocol whose variants warm up until their step time settles: no timed repeat is a warm-up


@dataclasses.dataclass(frozen=True)
class Code:
    """The code a machine's current records were measured by: a fingerprint, or unknown with its commits."""

    fingerprint: str
    commits: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        return bool(self.fingerprint)


def fingerprints(frame: pd.DataFrame) -> pd.Series:
    """Each record's code: its fingerprint, or the first of those declared to run its loop's step alike
    (`code_identity.code_of`); "" where it has none."""
    if col.CODE_FINGERPRINT not in frame:
        return pd.Series("", index=frame.index, dtype=str)
    found = frame[col.CODE_FINGERPRINT].fillna("").astype(str)
    return pd.Series([code_identity.code_of(loop, fp) for loop, fp in zip(loops(frame), found, strict=True)],
                     index=frame.index, dtype=str)  # fmt: skip


def loops(frame: pd.DataFrame) -> pd.Series:
    """Each record's loop key (`code_identity.loop_of` its `train.loop`): fingerprints are per loop."""
    if col.TRAIN_LOOP not in frame:
        return pd.Series(code_identity.ANY, index=frame.index, dtype=str)
    return frame[col.TRAIN_LOOP].map(code_identity.loop_of)


def newest(frames: Iterable[pd.DataFrame]) -> dict[tuple[str, str], str]:
    """(machine, loop) -> its newest fingerprint (latest timestamp among its fingerprinted records of that
    loop); "" for none."""
    latest: dict[tuple[str, str, str], str] = {}
    keys: set[tuple[str, str]] = set()
    for frame in frames:
        if frame.empty or col.MACHINE not in frame:
            continue
        stamps = frame[col.TIMESTAMP].fillna("").astype(str) if col.TIMESTAMP in frame else pd.Series("", frame.index)
        rows = zip(frame[col.MACHINE].astype(str), loops(frame), fingerprints(frame), stamps, strict=True)
        for machine, loop, fp, stamp in rows:
            keys.add((machine, loop))
            if fp:
                latest[(machine, loop, fp)] = max(latest.get((machine, loop, fp), ""), stamp)
    best = dict.fromkeys(keys, "")
    for (machine, loop, fp), _stamp in sorted(latest.items(), key=lambda item: (item[1], item[0][2])):
        best[(machine, loop)] = fp  # sorted by time: the last one written is the newest
    return best


def at_head(frame: pd.DataFrame, newest_code: dict[tuple[str, str], str]) -> pd.DataFrame:
    """The records of each machine's newest code of their loop, in runs of that code alone per loop; the others
    counted under HISTORY. A run's records of one loop are history whole where the run holds a record of that
    loop at an older code. Per loop: a run whose optimized loop is of an older code beside its reference loop
    of the newest keeps its reference records (a reference-only claim, S2, counts them), and its optimized
    records are history, so no pair across loops (S1: optimized over reference, within a run) or within one
    (S3: bf16 over fp32, both optimized) ever joins two codes."""
    if frame.empty or col.MACHINE not in frame:
        return frame
    keys = zip(frame[col.MACHINE].astype(str), loops(frame), strict=True)
    wanted = pd.Series([newest_code.get(key, "") for key in keys], index=frame.index, dtype=str)
    newest = fingerprints(frame) == wanted
    if col.RUN_ID in frame:
        run = frame[col.RUN_ID].fillna("").astype(str)
        of_loop = run + "\x1f" + loops(frame)  # a run's records of one loop
        newest &= ~of_loop.isin(set(of_loop[~newest & (run != "")]))
    return leave_out(frame, newest, HISTORY)


def newest_code_only(frame: pd.DataFrame) -> pd.DataFrame:
    """`at_head` of one frame by its own newest codes: what a figure or a finding drawn from one study reads."""
    return at_head(frame, newest([frame]))


def unsettled(frame: pd.DataFrame) -> pd.Series:
    """Whether each record is of protocol 1 (measured before variants warmed up until settled): no `protocol`
    column, no value, or one below SETTLED."""
    if col.PROTOCOL not in frame:
        return pd.Series(True, index=frame.index)
    protocol = pd.to_numeric(frame[col.PROTOCOL], errors="coerce")
    return protocol.isna() | (protocol < SETTLED)


def without_warm_up(frame: pd.DataFrame) -> pd.DataFrame:
    """The records less repeat 0 of every protocol-1 run that has at least 2 repeats (counted under WARM_UP);
    records of protocol SETTLED or later keep every repeat."""
    if frame.empty or col.REPEAT not in frame or col.RUN_ID not in frame:
        return frame
    keys = [k for k in RUN if k in frame]
    repeats = frame[col.REPEAT].astype(float)
    distinct = repeats.groupby([frame[k].astype(str) for k in keys]).transform("nunique")
    return leave_out(frame, ~((repeats == 0) & (distinct >= 2) & unsettled(frame)), WARM_UP)


def current(frame: pd.DataFrame, newest_code: dict[tuple[str, str], str]) -> pd.DataFrame:
    """What a verdict may read of a frame: each machine's newest code, warm-ups out."""
    return without_warm_up(at_head(frame, newest_code))


def code_of(frames: Iterable[pd.DataFrame], machine: str) -> Code:
    """The code of a machine's current records in these frames: its fingerprints (one per loop they ran, joined
    by spaces), or unknown with the commits where none has one."""
    fps: set[str] = set()
    commits: set[str] = set()
    for frame in frames:
        if frame.empty or col.MACHINE not in frame:
            continue
        mine = frame[frame[col.MACHINE] == machine]
        fps |= set(fingerprints(mine)) - {""}
        if col.GIT_COMMIT in mine:
            commits |= set(mine[col.GIT_COMMIT].dropna().astype(str)) - {""}
    if fps:
        return Code(" ".join(sorted(fps)))
    return Code("", tuple(sorted(c[:7] for c in commits)))
