"""The words said of the numbers: `1.42x [1.35, 1.49]`, a direction where the interval allows one, and how
robust it is. One function per kind of sentence, so a quantity reads alike wherever it is printed."""

import re
import typing

import pandas as pd

from dlrm_study.analysis import stats
from dlrm_study.analysis.flags import flagged
from dlrm_study.analysis.judgement import Judgement
from dlrm_study.analysis.views import Views, paired, side
from dlrm_study.config import variants as v
from dlrm_study.records import columns as col

OPPOSITE = {"above": "below", "below": "above"}
MAX_CELL = 200  # characters in a ledger cell: the word (with how it was reached), the numbers with their intervals

# Variants as a reader names them (verdicts, figure titles, legends, the results page).
VARIANTS = {
    v.REFERENCE: "reference", v.TORCHREC: "torchrec", v.OPTIMIZED_FP32: "optimized fp32",
    v.OPTIMIZED_BF16: "optimized bf16", v.PLAIN_BF16: "optimized bf16, plain SGD", v.GPU_HBM: "tables in GPU memory",
    v.GPU_HBM_FP32: "GPU memory, fp32", v.GPU_EAGER: "GPU memory, eager step", v.GPU_HOST: "tables in host memory",
    v.GPU_UVM: "host memory via UVM", v.GPU_CACHED: "hot rows cached (LRU)", v.GPU_CACHED_LFU: "hot rows cached (LFU)",
}  # fmt: skip


def variant_words(variant: str) -> str:
    """A variant's id in words (`gpu-hbm` -> `tables in GPU memory`); an unlisted id with its dashes as spaces."""
    return VARIANTS.get(variant, variant.replace("-", " "))


class Share(stats.Ratio):
    """A share of a whole (S2's part of the iteration): a Ratio printed as a percentage of repeats."""

    __slots__ = ()


def amount(r: stats.Ratio) -> str:
    """THE printing of a judged quantity: `1.60x [1.32, 1.94] (4 pairs, 2 runs)` for a ratio,
    `55% [36%, 72%] (4 repeats, 2 runs)` for a `Share`; what a verdict, a ledger cell and the results page show."""
    share = isinstance(r, Share)
    if not r.n:
        return "not measured (0 repeats)" if share else "not paired (0 pairs)"
    runs = f", {r.runs} runs" if r.runs > 1 else (", one run" if r.runs == 1 else "")
    said = describe(r.center, r.low, r.high, percent=True) if share else describe(r.center, r.low, r.high, "x")
    return f"{said} ({count(r.n, 'repeat' if share else 'pair')}{runs})"


def number(value: float) -> str:
    """Samples/s as whole numbers, ratios with two decimals."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"


def describe(center: float, low: float, high: float, unit: str = "", digits: int = 2, percent: bool = False) -> str:
    """`1.42x [1.35, 1.49]`, `27% [24%, 31%]`, or `1.42x (one repeat: no interval)`."""

    def shown(value: float) -> str:
        return f"{value:.{max(0, digits - 2)}%}" if percent else f"{value:,.{digits}f}"

    if center != center:
        return "not measured (no usable repeat)"
    if low != low:
        return f"{shown(center)}{unit} (one repeat: no interval)"
    return f"{shown(center)}{unit} [{shown(low)}, {shown(high)}]"


def too_few(n: int, noun: str = "repeats") -> str | None:
    """The gate on a verdict word: what it says where `n` is short of `stats.MIN_PAIRS`, else None."""
    return f"too few {noun} for a verdict ({n} < {stats.MIN_PAIRS})" if n < stats.MIN_PAIRS else None


def direction(r: stats.Ratio, up: str = "higher", down: str = "lower", gate: bool = True) -> str:
    """A directional word only where the interval of a ratio excludes 1 (and, gated, on MIN_PAIRS pairs)."""
    if gate and (short := too_few(r.n)):
        return short
    where = side(r, 1.0)
    if where == "none":
        return "no interval"
    return {"above": up, "below": down}.get(where, "no clear effect at this size")


def robust_word(views: Views, up: str = "higher", down: str = "lower") -> str:
    """The all-pairs view's word, then the sensitivity check: `fragile` only where the unflagged pairs (at
    least `views.MIN_CLEAN`) land on the other side of 1; `robustness not assessable` where too few remain."""
    word = direction(views.all, up, down)
    if word not in (up, down) or not views.flagged:
        return word
    if not views.assessable:
        return f"{word} (robustness not assessable: {views.flagged} of {views.all.n} pairs flagged)"
    if side(views.clean, 1.0) == OPPOSITE[side(views.all, 1.0)]:
        other = up if word == down else down
        return f"fragile ({word} over all pairs; {other} without the {views.flagged} flagged)"
    return word


class Finding(typing.NamedTuple):
    """A paired ratio seen both ways (`Views`) and the one word they support."""

    views: Views
    word: str

    @property
    def all(self) -> stats.Ratio:
        return self.views.all

    def text(self, unit: str = "x") -> str:
        """`1.42x [1.35, 1.49] (5 pairs): faster`, and the unflagged pairs' view where it differs."""
        r, v = self.views.all, self.views
        said = f"{describe(r.center, r.low, r.high, unit)} ({r.n} pairs): {self.word}"
        if v.flagged and v.clean is not None and v.clean != r:
            c = v.clean
            said += (
                f"; without the {count(v.flagged, 'flagged pair')}: {describe(c.center, c.low, c.high, unit)} ({c.n})"
            )
        return said


def paired_finding(
    records: pd.DataFrame,
    variant: object,
    baseline: object,
    up: str = "higher",
    down: str = "lower",
    between: str = col.VARIANT,
    value: str = col.SAMPLES_PER_S,
) -> Finding:
    """`variant` over `baseline`, paired, over all pairs and without the flagged ones, and the word for both."""
    views = paired(records, variant, baseline, between, value)
    return Finding(views, robust_word(views, up, down))


def flag_note(records: pd.DataFrame, quantity: str = "throughput") -> list[str]:
    """`(3 of 20 repeats flagged: counted)`: what a finding says of its flagged repeats, or nothing."""
    if records.empty:
        return []
    n = int(flagged(records, quantity).sum())
    return [f"({n} of {count(len(records), 'repeat')} flagged: counted, and checked without them)"] if n else []


def unpaired_reason(records: pd.DataFrame, between: str) -> str:
    """Why no pair formed between two values of `between` (for a finding that has none)."""
    run = stats.RUN
    if between != col.VARIANT and (run not in records or not records[run].map(stats.interleaved).any()):
        return "the two ends were measured one point after the other, before runs interleaved them: not paired"
    return "no repeat pairs up at the two ends within one run"


def count(n: int, noun: str) -> str:
    """`1 seed`, `3 seeds` (a noun phrase whose last word takes the plural)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def describe_gap(mean: float, low: float, high: float, n: int, digits: int = 4) -> str:
    """`+0.0003 [-0.0004, +0.0010] (3 pairs)` from `stats.mean_interval`'s (mean, low, high, n)."""
    if not n:
        return "no pair"
    if n < 2:
        return f"{mean:+.{digits}f} (one pair: no interval)"
    return f"{mean:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}] ({count(n, 'pair')})"


def cell(judgement: Judgement, name: typing.Callable[[str], str] = str, cap: int = MAX_CELL) -> str:
    """A ledger cell of at most `cap` characters (emphasis aside): the word, then each number the rule decided
    on (`amount`), named by `name` (of its key); without numbers, the rule's first clause. Clauses that do
    not fit are left to the claim's notebook, which prints the whole judgement (`judgement_text`)."""
    clauses = [f"{name(k)} {amount(r)}" for k, r in judgement.numbers.items() if r.n]
    if not clauses and judgement.numbers:  # comparisons the rule reads, none of them paired
        clauses = [f"none of its {count(len(judgement.numbers), 'comparison')} paired (0 pairs)"]
    if not clauses and judgement.detail:  # the first clause, else what it says before its colon
        first = judgement.detail.split(";", 1)[0].strip()
        clauses = [
            first if len(first) < cap - len(judgement.status) - 2 else re.split(r"[:(]", first, maxsplit=1)[0].strip()
        ]
    said = f"**{judgement.status}**"
    for i, clause in enumerate(clauses):
        joined = said + (": " if i == 0 else "; ") + clause
        if len(joined.replace("**", "")) > cap:
            break
        said = joined
    return said


def judgement_text(judgement: Judgement) -> str:
    """A claim's judgement as the ledger's cell: `**status**: the numbers (notes)`."""
    said = f"**{judgement.status}**: {judgement.detail}" if judgement.detail else f"**{judgement.status}**"
    return f"{said} ({judgement.note})" if judgement.note else said
