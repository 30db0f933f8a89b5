"""Streaming reader for Criteo click logs (Kaggle / Terabyte TSV).

Each line: label, 13 integer features, 26 categorical features as hex strings, tab
separated; any feature may be empty. Dense features become log(1 + max(x, 0)) and
categorical ids are hashed modulo the table's rows, as facebookresearch/dlrm does.
The first `eval_batches` batches of the file are held out for evaluation.

The public logs ship gzip-compressed: a `.gz` file (told by its magic bytes) is decompressed
as it streams, and an error names the line of the decompressed text. A folder reads its
Terabyte days `day_0[.gz]`, `day_1[.gz]`, ... in order, as one stream.
"""

import gzip
import math
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

import torch

from dlrm_study.config import Config, check_input_file
from dlrm_study.data.batch import Batch
from dlrm_study.errors import UsageError

DENSE, SPARSE = 13, 26
FIELDS = 1 + DENSE + SPARSE
GZIP_MAGIC = b"\x1f\x8b"
DAY = re.compile(r"day_(\d+)(\.gz)?")


class CriteoData:
    """Batches from a Criteo TSV file; a malformed line is an error unless `skip_bad_lines`."""

    def __init__(self, cfg: Config, stream: str = "train") -> None:
        self.path = Path(cfg.data.path)
        self.files = criteo_files(self.path)  # streamed line by line later, so not read here
        self.rows = cfg.model.table_rows
        self.batch_size = cfg.train.batch_size
        self.skip_bad_lines = cfg.data.skip_bad_lines
        self.held_out = cfg.train.eval_batches
        self.stream = stream
        self.bad_lines = 0

    def batches(self, start: int = 0) -> Iterator[Batch]:
        """Batches of this stream from number `start`; the train stream wraps around the file."""
        index = 0
        while True:
            produced = 0
            for number, batch in enumerate(self._file_batches()):
                is_eval = number < self.held_out
                if is_eval != (self.stream == "eval"):
                    continue
                produced += 1
                if index >= start:
                    yield batch
                index += 1
            if self.stream == "eval":
                return
            if produced == 0:
                raise UsageError(
                    f"{self.path}: no training batches left after the {self.held_out} held out for evaluation"
                )

    def _file_batches(self) -> Iterator[Batch]:
        samples: list[tuple[float, list[float], list[int]]] = []
        bad = 0  # per pass over the files: the train stream may read them many times
        for path, number, raw in self._lines():
            try:  # decoded here, per line, so a line of bad bytes is one malformed line like any other
                samples.append(self.parse(decode(raw)))
            except ValueError as err:
                if not self.skip_bad_lines:
                    raise UsageError(f"{path}:{number}: {err}") from None
                bad += 1
                self.bad_lines = max(self.bad_lines, bad)
                continue
            if len(samples) == self.batch_size:
                yield collate(samples)
                samples = []
        if samples:
            yield collate(samples)

    def _lines(self) -> Iterator[tuple[Path, int, bytes]]:
        """(file, line number in its text, the line's bytes) of every file in order."""
        for path in self.files:
            number = 0
            try:
                with open_lines(path) as lines:
                    for number, raw in enumerate(lines, start=1):
                        yield path, number, raw
            except OSError as err:  # gzip.BadGzipFile is an OSError too
                raise UsageError(f"Criteo file {path}: {err.strerror or err}") from None
            except (EOFError, zlib.error) as err:
                raise UsageError(f"{path}:{number + 1}: the gzip stream breaks off ({err})") from None

    def parse(self, line: str) -> tuple[float, list[float], list[int]]:
        """One line as (label, dense, ids); ValueError saying what is wrong with it."""
        fields = line.rstrip("\r\n").split("\t")
        if len(fields) != FIELDS:
            raise ValueError(f"expected {FIELDS} tab-separated fields, got {len(fields)}")
        if fields[0] not in ("0", "1"):
            raise ValueError(f"label must be 0 or 1, got {fields[0]!r}")
        dense, ids = [], []
        for i, x in enumerate(fields[1 : 1 + DENSE], start=1):
            try:
                dense.append(math.log1p(max(int(x), 0)) if x else 0.0)
            except (ValueError, OverflowError):  # OverflowError: a number beyond a float's range
                raise ValueError(f"integer feature I{i} is {x!r}, not an integer") from None
        for i, (x, rows) in enumerate(zip(fields[1 + DENSE :], self.rows, strict=True), start=1):
            try:
                ids.append(int(x, 16) % rows if x else 0)
            except ValueError:
                raise ValueError(f"categorical feature C{i} is {x!r}, not hexadecimal") from None
        return float(fields[0]), dense, ids


def criteo_files(path: Path) -> list[Path]:
    """The file itself, or a folder's `day_N[.gz]` files in day order."""
    if not path.is_dir():
        check_input_file(path, "Criteo")
        return [path]
    days = sorted((f for f in path.iterdir() if DAY.fullmatch(f.name)), key=lambda f: int(DAY.fullmatch(f.name)[1]))
    if not days:
        raise UsageError(f"Criteo folder {path} holds no day_N or day_N.gz files")
    numbers = [int(DAY.fullmatch(f.name)[1]) for f in days]
    if len(set(numbers)) < len(numbers):
        raise UsageError(f"Criteo folder {path} holds a day twice (day_N and day_N.gz): keep one of each")
    return days


def open_lines(path: Path):
    """The file's lines as bytes, decompressed as they stream where it is gzip."""
    with path.open("rb") as f:
        compressed = f.read(2) == GZIP_MAGIC
    return gzip.open(path, "rb") if compressed else path.open("rb")


def decode(raw: bytes) -> str:
    """One line as text; ValueError (a malformed line) where its bytes are not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"not UTF-8 text (byte 0x{raw[err.start]:02x} at column {err.start + 1})") from None


def collate(samples: list[tuple[float, list[float], list[int]]]) -> Batch:
    """One id per table per sample: offsets are 0..B-1."""
    labels = torch.tensor([s[0] for s in samples])
    dense = torch.tensor([s[1] for s in samples], dtype=torch.float32)
    ids = torch.tensor([s[2] for s in samples], dtype=torch.int64)
    offsets = torch.arange(len(samples))
    return Batch(dense, [ids[:, t].contiguous() for t in range(SPARSE)], [offsets] * SPARSE, labels)
