"""Which GPU records the old, dispatch-bound GPU loop wrote, so that wherever they are shown they say so.

Before the GPU step was captured as a CUDA graph (`train.gpu`, records with a `capture` of `graph` or
`eager`), the gpu loop launched its kernels one by one from Python: in its first H200 session the step
time hardly moved with the model (docs/results.md gives its median from the records), so its samples/s
measure the host's dispatch more than the GPU. Those records carry no `capture`. They stay in the records
and are scored against the pre-registered predictions, but every figure or line that shows them names them.

Two rules every page shares: a GPU point's samples/s is the median of its repeats as `repeats` keeps them (each
machine's newest code of the GPU loop, warm-ups out, no error records: what the verdicts read), `rate`; and the
GPU records are counted, per machine, by `census` and said by `census_said` (docs/results.md, notebooks 03-05).
"""

import dataclasses

import pandas as pd

from dlrm_study.analysis.current import current, newest
from dlrm_study.analysis.wording import count, variant_words
from dlrm_study.config import Loop
from dlrm_study.records import columns as col

OLD_LOOP = "the old GPU loop: dispatch-bound (each kernel launched from Python), before CUDA graphs"


def old_loop(records: pd.DataFrame) -> pd.Series:
    """Whether each record is of the old gpu loop (a gpu-loop record that names no capture)."""
    if records.empty or col.LOOP not in records:
        return pd.Series(False, index=records.index)
    on_gpu = records[col.LOOP].astype(str) == Loop.GPU.value
    captured = records[col.CAPTURE].fillna("").astype(str) != "" if col.CAPTURE in records else False
    return on_gpu & ~captured


MIXED = "some records the old GPU loop's (dispatch-bound, before CUDA graphs), the others the captured loop's"


def label(records: pd.DataFrame) -> str:
    """` (the old GPU loop: ...)` where every GPU record is the old loop's, ` (some records the old GPU loop's ...)`
    where only some are, else ``."""
    old = old_loop(records)
    if not old.any():
        return ""
    on_gpu = records[col.LOOP].astype(str) == Loop.GPU.value
    return f" ({OLD_LOOP})" if old[on_gpu].all() else f" ({MIXED})"


def repeats(frame: pd.DataFrame) -> pd.DataFrame:
    """The GPU records a median reads: each machine's newest code of each loop (`analysis.current`, the verdicts'
    selection: warm-ups out), less the records of a failed point."""
    kept = current(frame, newest([frame]))
    return kept[kept[col.ERROR].isna()] if col.ERROR in kept else kept


def rate(records: pd.DataFrame) -> float:
    """A GPU point's samples/s: the median over its repeats (`repeats`); the one rule of every GPU table."""
    return float(records[col.SAMPLES_PER_S].median())


@dataclasses.dataclass(frozen=True)
class Census:
    """One machine's GPU records as a verdict reads them: how many, when and at which commits, and how their step
    ran (the old loop, captured as one CUDA graph, or the captured loop's eager placements)."""

    records: int
    first: str
    last: str
    commits: tuple[str, ...]
    old: int
    graph: int
    eager: dict[str, int]  # variant -> records run eager
    failed: int = 0  # records of a point that failed (no step ran: neither graph nor eager)


def census(records: pd.DataFrame) -> Census:
    """`Census` of one machine's GPU records (pass its part of the evidence, `Evidence.of(machine).gpu`, or
    `repeats`' selection with its errors: the same records)."""
    stamps = records[col.TIMESTAMP].astype(str).str[:10] if col.TIMESTAMP in records else pd.Series(dtype=str)
    commits = records[col.GIT_COMMIT].dropna().astype(str).str[:7] if col.GIT_COMMIT in records else pd.Series()
    capture = records[col.CAPTURE].fillna("").astype(str) if col.CAPTURE in records else pd.Series("", records.index)
    on_gpu = records[col.LOOP].astype(str) == Loop.GPU.value if col.LOOP in records else capture != ""
    eager = records[on_gpu & (capture == "eager")]
    ran = records[col.ERROR].isna() if col.ERROR in records else pd.Series(True, index=records.index)
    return Census(
        records=len(records),
        first=str(stamps.min()) if len(stamps) else "",
        last=str(stamps.max()) if len(stamps) else "",
        commits=tuple(sorted(set(commits))),
        old=int((old_loop(records) & ran).sum()),  # a failed point's record names no capture: it ran no loop
        graph=int((on_gpu & (capture == "graph")).sum()),
        eager=dict(sorted(eager[col.VARIANT].astype(str).value_counts().items())) if len(eager) else {},
        failed=int((~ran).sum()),
    )


def census_said(c: Census, name: str) -> str:
    """A `Census` in one line, named `name`: what docs/results.md and notebooks 03-05 print of each GPU machine."""
    when = c.first if c.first == c.last else f"{c.first} to {c.last}"
    said = f"{name}: {c.records} GPU records, measured {when} at commit {', '.join(c.commits) or 'unrecorded'}"
    parts = [f"{c.old} of the old GPU loop (each kernel launched from Python)"] if c.old else []
    parts += [f"{c.graph} captured, the whole step as one CUDA graph"] if c.graph else []
    if c.eager:
        which = ", ".join(f"{variant_words(v)} {n}" for v, n in c.eager.items())
        parts.append(f"{count(sum(c.eager.values()), 'record')} of the captured loop run eager, not as one graph "
                     f"({which}: host-side work each step that a graph cannot hold)")  # fmt: skip
    parts += [f"{count(c.failed, 'record')} of a point that failed (the records give the error)"] if c.failed else []
    return said + (": " + "; ".join(parts) if parts else "") + "."
