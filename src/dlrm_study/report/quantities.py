"""One number per quantity: every interval printed in what is published, by the quantity it names.

A published number with an interval (`2.09x [1.88, 2.33]`, `61% [59%, 62%]`) is read with its label:
the machine it is of, the preset and thread count its sentence names, the commit where it names one,
and what it measures. What it measures is the sentence up to the number (digits dropped), or, for the
quantities several pages print in their own words (`CANONICAL`: the claims' ratios and shares), that
quantity's name. The machine is the one the sentence names, else the column of the table it sits in,
else the last one its page named (a notebook's header, the gallery's heading).

`conflicts` lists each label printed with two values anywhere in README.md, docs/*.md and the rendered
notebooks (their Markdown and printed outputs). A quantity may differ by machine or code only where
its label names the machine or code; one function per quantity keeps the rest equal.

Some quantities are printed without an interval, or with one at another confidence, and are read too:
notebook 02's bf16-vs-fp32 tables give S3's quantity at 95% (the verdict reads it at its own level: their centres must
agree, `Said.center_only`); its two bound tables give each part's ms per step (`bound_rows`); the GPU records
are counted on docs/results.md and in notebooks 03-05 (`gpu_record_counts`).
"""

import dataclasses
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from PIL import Image

from dlrm_study.claims.registry import CLAIMS
from dlrm_study.config.presets import PRESETS
from dlrm_study.report.plots.common import CAPTION
from dlrm_study.report.readable import machine_words

INTERVAL = re.compile(
    r"(?<![\w.])(?P<center>-?\d[\d,]*(?:\.\d+)?)(?P<unit>x|%)? "
    r"\[(?P<low>-?\d[\d,]*(?:\.\d+)?)(?:x|%)?, (?P<high>-?\d[\d,]*(?:\.\d+)?)(?:x|%)?\]"
)
STATEMENT_ENDS = re.compile(r"<br>|\. (?=[A-Z])")
PRESET = re.compile(r"\b(" + "|".join(sorted(map(re.escape, PRESETS), key=len, reverse=True)) + r")\b")
THREADS = re.compile(r"\bat (\d+) thread|\b(\d+)t\b|\b(\d+) threads?\b")
COMMIT = re.compile(r"\b(?:commits?|code) ([0-9a-f]{7})[0-9a-f]{0,33}\b")
# A row of a table printed as text: columns apart by spaces, or an indented row under its index's keys.
TABLE_ROW = re.compile(r"^ +\S.* {2,}\S|\S {2,}\S.*\S {2,}\S")
COUNTS = re.compile(r"\((?:\d+|one) \w+(?:, (?:\d+|one) \w+)*\)")  # `(96 pairs, 32 runs)`
CLAIM = re.compile(r"\[?(" + "|".join(c.id for c in CLAIMS) + r")\b")  # a claim's row or line (`S2 on <host>: ...`)
CLAIM_QUANTITY = {c.id: c.quantity for c in CLAIMS if c.quantity}  # a number named only by its claim's id
MACHINE_KEY = re.compile(r"\b[a-z]+(?:-[a-z0-9]+)+/[a-z0-9_+-]+/\d+cpu(?:/[a-z0-9-]+)?")
CANONICAL = (  # (what the clause before a number says, the quantity): several pages print these in their own words
    (re.compile(r"embedding backward \+ update"), "embedding backward + update, share of the reference's iteration"),
    (re.compile(r"(?:optimized )?bf16 over (?:optimized )?fp32"), "optimized bf16 over optimized fp32"),
    (re.compile(r"optimized bf16(?: loop)? over (?:the|today's) reference"), "optimized bf16 over the reference"),
    (re.compile(r"optimized fp32(?: loop)? over (?:the|today's) reference"), "optimized fp32 over the reference"),
    (re.compile(r"strong efficiency$"), "strong scaling efficiency, 1 to 2 ranks"),
    (re.compile(r"^weak(?: efficiency)?$"), "weak scaling efficiency, 1 to 2 ranks"),
)
CANONICAL_NAMES = {name for _, name in CANONICAL}
# Rows of printed tables that are a canonical quantity under their title (`said`): (title, row, quantity). Notebook
# 02's bf16-vs-fp32 breakdown: its samples/s row is S3's bf16 over fp32 (at 95%, so its centre only: `center_only`).
TABLE_QUANTITIES = (
    (
        re.compile(r"/ the CPU (?:loops|comparison)\b.* / \S+$"),
        re.compile(r"^samples/s\b"),
        "optimized bf16 over optimized fp32",
    ),
)
# Notebook 02's bound tables (`analysis.operators.report`): a block's title, then a row per part.
BOUND_TITLE = re.compile(
    r"^(?P<machine>\S+) / (?P<config>\S+) / (?P<variant>[^(]+?) \(\d+ repeats?\): ms per step, (?:physical )?bound"
)
BOUND_ROW = re.compile(r"^  (?P<part>\S.*?) {2,}(?P<ms>\d[\d,]*\.\d+) +(?P<bound>\d[\d,]*\.\d+) ")
# The GPU records counted, on a line: (its records, the old loop's among them); the census
# (`analysis.gpu_loop.census_said`) and the two forms it replaced (docs/results.md's, notebooks 03-05's).
GPU_CENSUS = (
    (re.compile(r"(\d+) GPU records, measured"), re.compile(r"(\d+) of the old GPU loop")),
    (re.compile(r"of (\d+) GPU records measured the (?:old GPU|captured) loop"),
     re.compile(r"(\d+) of \d+ GPU records measured the old GPU loop")),
    (re.compile(r"GPU: (\d+) records measured on"), re.compile(r"(\d+) of them of the old GPU loop")),
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Said:
    """A number printed with its interval, the quantity it is of (`label`) and where it was printed."""

    label: tuple[str, ...]
    value: str
    where: str
    center_only: bool = False  # printed at another confidence than the quantity's other printings: its centre only

    @property
    def center(self) -> str:
        """The number without its interval (`2.34x`); the value itself where it has none."""
        m = INTERVAL.match(self.value)
        return f"{m.group('center')}{m.group('unit') or ''}" if m else self.value


def unnamed(text: str, names: list[tuple[str, str]]) -> str:
    """`text` without the machines it names (they are the label's own part)."""
    for name, _ in names:
        text = text.replace(name, "")
    return MACHINE_KEY.sub("", text).strip(" /")


def machines_named(words_of: dict[str, str]) -> list[tuple[str, str]]:
    """(a way a page names a machine, its key), longest first: keys as they are, and in words."""
    named = {key: key for key in words_of} | {words: key for key, words in words_of.items()}
    return sorted(named.items(), key=lambda item: -len(item[0]))


def last_machine(text: str, names: list[tuple[str, str]]) -> str | None:
    """The machine `text` names last (its key), or None."""
    best, at = None, -1
    for name, key in names:
        found = text.rfind(name)
        if found > at:
            best, at = key, found
    if best is None and (keys := list(MACHINE_KEY.finditer(text))):
        return keys[-1].group(0)
    return best


def clause_before(statement: str, start: int) -> str:
    """The words before a number back to its clause's start (a colon, comma, semicolon, opening bracket)."""
    head = INTERVAL.sub("#", statement[:start]).rstrip(" :;,(")  # `without the 3 flagged: 1.2x`: the words before
    return re.split(r"[:;,(]|#", head)[-1].strip()


def quantity(statement: str, start: int, scope: str) -> str:
    """What the number at `start` measures: a canonical quantity's name (`CANONICAL`) where its clause says one,
    or its clause names only a preset under a sentence (or a claim's row, `scope`) that does; else its sentence
    up to it, digits out."""
    clause = clause_before(statement, start).lower()
    for pattern, name in CANONICAL:
        if pattern.search(clause):
            return name
    head = INTERVAL.sub("#", statement[:start]).lower()
    preset_only = not PRESET.sub("", clause).strip(" *")  # `...; mlperf-scaled 8% [7%, 9%]`
    if preset_only:  # the sentence's quantity since the last number, or the claim's
        since = head.split("#")[-1]
        found = [(m.start(), name) for pattern, name in CANONICAL for m in pattern.finditer(since)]
        if found:
            return max(found)[1]
        claim = CLAIM.match(scope.strip()) or CLAIM.match(statement.strip())
        if claim and not PRESET.sub("", COUNTS.sub("", since)).strip(" ;,:*"):  # nothing said since the last number
            return CLAIM_QUANTITY.get(claim.group(1), head)
    words = re.sub(r"\*\*|`|\d[\d,.]*(?:x|%)?|#", " ", head)
    return re.sub(r"\s+", " ", words).strip(" :;,-")


def label(statement: str, start: int, machine: str | None, scope: str = "") -> tuple[str, ...]:
    """The quantity's label: machine, commit, preset, threads where named (in the statement, else its scope),
    and what it measures."""
    head = f"{scope}\n{statement[:start]}"
    preset = PRESET.findall(head)
    threads = [next(g for g in m.groups() if g) for m in THREADS.finditer(head)]
    commit = COMMIT.findall(head)
    return (
        machine or "",
        commit[-1] if commit else "",
        preset[-1] if preset else "",
        threads[-1] if threads else "",
        quantity(statement, start, scope),
    )


def said(text: str, where: str, names: list[tuple[str, str]], machine: str | None = None) -> Iterator[Said]:
    """Every number with an interval in `text` (a page), labelled; `machine`: the page's, until it names one.

    A Markdown table's cell is read under its row's first cell and its column's header; any other line under
    its paragraph's first line (a printed table's title)."""
    header: list[str] = []
    title = above = ""
    outline: list[tuple[int, str]] = []
    for line in text.split("\n"):
        blank = len(line) - len(line.lstrip())
        if blank and TABLE_ROW.search(line) and TABLE_ROW.search(above) and above[blank - 1 : blank] == " ":
            line = above[:blank] + line[blank:]  # a printed index's repeated keys, filled in
        above = line
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.lstrip().startswith("|") else None
        if cells is not None and not header:
            header = cells
        elif cells is None:
            header = []
        title = "" if not line.strip() else title or line
        indent = len(line) - len(line.lstrip())
        outline = [(i, up) for i, up in outline if i < indent] if line.strip() else []
        context = "\n".join(up for _, up in outline)  # the lines this one is indented under
        outline.append((indent, line))
        for i, cell in enumerate(cells if cells is not None else [line]):
            column = header[i] if cells is not None and i < len(header) else ""
            scope = f"{cells[0]} {column}" if cells is not None and i else (context or title if title != line else "")
            for statement in STATEMENT_ENDS.split(cell):
                for m in INTERVAL.finditer(statement):
                    mine = last_machine(statement[: m.start()], names) or last_machine(scope, names) or machine
                    named = label(statement, m.start(), mine, scope)
                    center_only = False
                    if cells is None and TABLE_ROW.search(line) and scope:  # a printed table's row, as it is printed
                        row = re.sub(r"\s+", " ", f"{unnamed(scope, names)} / {statement[: m.start()]}").strip()
                        named = (*named[:-1], row)
                        for of_title, of_row, name in TABLE_QUANTITIES:
                            if of_title.search(scope.strip()) and of_row.search(line.strip()):
                                named, center_only = (*named[:-1], name), True
                    elif cells is not None and column and named[-1] not in CANONICAL_NAMES:
                        named = (*named[:-1], f"{unnamed(column, names)}: {named[-1]}")
                    yield Said(named, m.group(0), where, center_only)
        machine = (last_machine(line, names) or machine) if cells is None else machine


def conflicts(found: Iterable[Said]) -> list[str]:
    """Each label printed with more than one value (or, for a printing at another confidence, `center_only`, with
    another centre): the label, then each value and where it was printed."""
    by_label: dict[tuple[str, ...], dict[str, list[str]]] = {}
    centers: dict[tuple[str, ...], set[str]] = {}
    whole: dict[tuple[str, ...], set[str]] = {}
    for s in found:
        by_label.setdefault(s.label, {}).setdefault(s.value, []).append(s.where)
        centers.setdefault(s.label, set()).add(s.center)
        if not s.center_only:
            whole.setdefault(s.label, set()).add(s.value)
    return [
        " / ".join(filter(None, lab))
        + ": "
        + "; ".join(f"{v} ({', '.join(sorted(set(w)))})" for v, w in values.items())
        for lab, values in sorted(by_label.items())
        if len(whole.get(lab, ())) > 1 or len(centers[lab]) > 1
    ]


def bound_rows(text: str, where: str) -> Iterator[Said]:
    """Each part's ms per step in a bound table (`analysis.operators.report`), labelled by machine, config, variant
    and part: the physical bound's table and the roofline's print one step time, whatever bound they read it
    against (`step (timed)`, in sequence or overlapped, is one quantity)."""
    title = None
    for line in text.split("\n"):
        if head := BOUND_TITLE.match(line):
            title = head
            continue
        row = BOUND_ROW.match(line) if title else None
        if row is None:
            title = title if line.startswith("  ") else None
            continue
        part = re.sub(r", (?:in sequence|overlapped)$", "", row.group("part").strip())
        quantity_of = f"ms per step: {title.group('variant').strip()} / {part}"
        yield Said((title.group("machine"), "", title.group("config"), "", quantity_of), row.group("ms"), where)


def gpu_record_counts(text: str, where: str) -> Iterator[Said]:
    """How many GPU records a page counts, every machine's together, and how many of them the old GPU loop wrote:
    one count, wherever it is printed (`analysis.gpu_loop.census`). A line printed twice on a page counts once."""
    total = old = 0
    lines = list(dict.fromkeys(text.split("\n")))
    found = False
    for line in lines:
        for records, of_old in GPU_CENSUS:
            if m := records.search(line):
                found = True
                total += int(m.group(1))
                old += int(o.group(1)) if (o := of_old.search(line)) else 0
                break
    if found:
        yield Said(("", "", "", "", "GPU records, every machine's"), str(total), where)
        yield Said(("", "", "", "", "GPU records of the old GPU loop, every machine's"), str(old), where)


def figure_caption(path: Path) -> str:
    """A saved figure's caption (`plots.add_caption` writes it into the PNG's metadata): what it drew."""
    with Image.open(path) as image:
        return str(image.info.get(CAPTION, ""))


def caption_runs(caption: str) -> set[int]:
    """The runs a caption says its points drew (`plots.caption`: `2 runs x 3 repeats`: {2}; `1 to 2 runs a point`:
    {1, 2}; none said: {1})."""
    if m := re.search(r"\b(\d+) runs x\b", caption):
        return {int(m.group(1))}
    if m := re.search(r"\b(\d+) to (\d+) runs a point", caption):
        return {int(m.group(1)), int(m.group(2))}
    return {1}


def runs_stated(text: str, machine: str, marker: str) -> set[int]:
    """The runs each number of a verdict's line on `machine` (`on <machine in words>: ...`) names in its clauses
    that say `marker` (`(3 pairs, one run)`: 1)."""
    found: set[int] = set()
    for line in text.split("\n"):
        if not line.strip().startswith(f"on {machine_words(machine)}:"):
            continue
        for clause in line.split(";"):
            if marker in clause:
                for counts in COUNTS.finditer(clause):
                    runs = re.search(r"\b(\d+|one) runs?\b", counts.group(0))
                    found.add(1 if runs is None or runs.group(1) == "one" else int(runs.group(1)))
    return found


def published_conflicts(pages: Iterable[tuple[str, str]]) -> list[str]:
    """`conflicts` over pages (where, text) read in order: README.md, docs, the rendered notebooks."""
    pages = list(pages)
    keys = {m.group(0) for _, text in pages for m in MACHINE_KEY.finditer(text)}
    names = machines_named({key: machine_words(key) for key in keys if parses(key)})
    return conflicts(
        s
        for where, text in pages
        for s in [*said(text, where, names), *bound_rows(text, where), *gpu_record_counts(text, where)]
    )


def parses(key: str) -> bool:
    """Whether `key` is a machine key (`records.machine.Machine.parse`), not a path that looks like one."""
    try:
        machine_words(key)
    except ValueError:
        return False
    return True
