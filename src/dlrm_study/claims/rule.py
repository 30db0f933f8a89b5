"""What every claim's rule shares (docs/claims.md, Outcomes): how it reads a ratio (`Lens`), the gate of runs a
verdict word needs, and how a judgement carries what its frames left out.

Outcomes are symmetric: **reproduced** / **not reproduced** when the evidence lies wholly on one side
of the claim's threshold or margin, **inconclusive** when it spans it, **one run** when a deciding
comparison has fewer than `clusters.MIN_RUNS` runs (its numbers shown, no verdict word); **not
measurable here**, **not yet measured**, **unrecorded machine** (records that never said their ISA).

Ratios are summarized per run, then across runs (`analysis.clusters`). A rule reads its records
through a `Lens`: the verdict's, or the leave-one-out check's (`claims.claim`), which judges the runs
left with one run out by the same t interval over runs. A claim of two halves is their `conjunction`.
A rule that asks whether any of m comparisons holds
takes each interval at 1 - 0.05 / m (`stats.family`). What a rule leaves out of its frames it counts in the frames
(`readers.leave_out`), so the count travels with the records, not in the Lens.
"""

import dataclasses

import pandas as pd

from dlrm_study.analysis import stats
from dlrm_study.analysis.clusters import MIN_RUNS, over_runs
from dlrm_study.analysis.evidence import Evidence
from dlrm_study.analysis.judgement import Judgement, Status, decided
from dlrm_study.analysis.readers import leave_out, left_out, left_out_records
from dlrm_study.analysis.views import side
from dlrm_study.analysis.wording import Share, amount
from dlrm_study.records import Machine
from dlrm_study.records import columns as col

OTHER_PRESETS = "of other presets"
FEWER_THREADS = "at fewer threads than the machine's most"


@dataclasses.dataclass(frozen=True)
class Lens:
    """How a rule reads its ratios: runs as clusters (`clusters.over_runs`), a verdict word needing MIN_RUNS
    runs; the leave-one-out check (`loo`) reads the runs left by the same interval, so it needs one run fewer.
    (Pooling what is left into one pair interval judged a narrower interval than the verdict's own: it kept
    words that the verdict's interval over the remaining runs does not.)"""

    loo: bool = False

    def ratio(self, found: pd.DataFrame, confidence: float = stats.CONFIDENCE, value: str = "ratio",
              share: bool = False, linear: bool = False) -> stats.Ratio:  # fmt: skip
        if not len(found):
            return stats.NO_RATIO
        r = over_runs(found, value, confidence, share, linear)
        return Share(*r) if share else r

    def paired(self, records: pd.DataFrame, variant: object, baseline: object, between: str = col.VARIANT,
               confidence: float = stats.CONFIDENCE) -> stats.Ratio:  # fmt: skip
        return self.ratio(stats.pairs(records, variant, baseline, between=between), confidence)

    @property
    def runs_needed(self) -> int:
        """MIN_RUNS; with one run left out, the rest (a t interval over at least 2 runs)."""
        return MIN_RUNS - 1 if self.loo else MIN_RUNS

    def enough(self, r: stats.Ratio) -> bool:
        """A verdict word's gate: the runs it needs."""
        return r.n > 0 and r.runs >= self.runs_needed


def counted(judgement: Judgement, *frames: pd.DataFrame) -> Judgement:
    """The judgement with what its frames left out (readers, code, warm-up, the rule), by reason."""
    total: dict[str, int] = {}
    ids: dict[str, frozenset[str]] = {}
    for frame in frames:
        for reason, n in left_out(frame).items():
            total[reason] = total.get(reason, 0) + n
        for reason, found in left_out_records(frame).items():
            ids[reason] = ids.get(reason, frozenset()) | found
    return dataclasses.replace(judgement, left_out=total, left_records=ids)


def fewest_runs(numbers: dict[str, stats.Ratio]) -> int:
    return min((r.runs for r in numbers.values() if r.n), default=0)


def short_of(numbers: dict[str, stats.Ratio]) -> Status:
    """What comparisons short of MIN_RUNS runs say: one run, or too few repeats (none, or more runs but too few)."""
    return Status.ONE_RUN if fewest_runs(numbers) == 1 else Status.TOO_FEW


def gate(numbers: dict[str, stats.Ratio]) -> str:
    return f" (a verdict word needs {MIN_RUNS} runs; fewest {fewest_runs(numbers)})"


def too_few(numbers: dict[str, stats.Ratio], detail: str) -> Judgement:
    """Fewer than MIN_RUNS runs behind a deciding comparison: its numbers, no verdict word."""
    return decided(short_of(numbers), detail + gate(numbers), numbers)


def half(lens: Lens, r: stats.Ratio, holds: bool, fails: bool) -> Status:
    """One half of a two-half claim on one comparison: short of its runs (`short_of`), else the word its interval
    says (`holds` / `fails`: read at the confidence the rule reads each at), else inconclusive."""
    if not lens.enough(r):
        return short_of({"": r})
    return Status.REPRODUCED if holds else Status.NOT_REPRODUCED if fails else Status.INCONCLUSIVE


def most_threads(frame: pd.DataFrame) -> pd.DataFrame:
    """The records at the machine's most threads (a claim is judged at the machine's size)."""
    if frame.empty or col.THREADS not in frame:
        return frame
    most = frame[col.THREADS].astype(float).max()
    return leave_out(frame, frame[col.THREADS].astype(float) == most, FEWER_THREADS)


def outcome(r: stats.Ratio, low: float, high: float | None = None) -> Status:
    """reproduced above the threshold (or the band), not reproduced below it, inconclusive across it."""
    where = side(r, low, high)
    return {"above": Status.REPRODUCED, "below": Status.NOT_REPRODUCED}.get(where, Status.INCONCLUSIVE)


def ratio_text(r: stats.Ratio) -> str:
    return amount(r)  # the one printing of a judged quantity (`wording.amount`)


def gpu_early(evidence: Evidence, machine: str) -> Judgement | None:
    """The judgement where the machine cannot test a GPU claim or has no GPU records; None where it can."""
    if not Machine.parse(machine).has_gpu:
        return Judgement(Status.NOT_MEASURABLE, "no GPU")
    if evidence.gpu.empty:
        return Judgement(Status.NOT_YET, "no GPU records of this machine")
    return None
