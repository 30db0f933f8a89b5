"""One record: its parts (labels, measured fields, config, provenance, identity) and its flat row.

`make_record` builds every record as a `Record` and stores `to_row()`; a stored row reads back
with `Record.from_row` into the same parts, and `to_row()` gives the row again (tested on every
committed row). The parts are told apart by column name only (`columns`, the config's dotted
names, the provenance columns), so the row's columns stay today's.
"""

import dataclasses
import os

import torch

from dlrm_study.config import Config
from dlrm_study.records import columns as col
from dlrm_study.records.code_identity import ANY
from dlrm_study.records.machine import Machine, machine_key
from dlrm_study.records.provenance import code_fingerprint, process_run_id, provenance, rules_hash

PROVENANCE = (
    col.PACKAGE_VERSION, col.GIT_COMMIT, "python_version", "torch_version", "torchrec_version", "fbgemm_gpu_version",
    "fbgemm_gpu_cpu_version", "triton_version", col.CPU_MODEL, "cpuid", col.CPU_COUNT, col.DEVICE_NAME,
    col.GPU_MODEL, "host", "command", col.TIMESTAMP, col.INVOCATION,
)  # fmt: skip
IDENTITY = (col.MACHINE, col.RUN_ID, col.RUN_SLOT, col.RULES_HASH, col.CODE_FINGERPRINT, col.PROTOCOL, col.PROCESS_ID)
LABELS = (col.VARIANT, col.REPEAT, col.POINT, col.ORDER, col.CONFIG_NAME, col.CONFIG_HASH)
SECTIONS = ("model.", "data.", "train.")  # the flattened config's columns
PARTS = ("labels", "fields", "config", "provenance", "identity")


@dataclasses.dataclass
class Record:
    """A record's parts, each a mapping of column to value, as measured or as stored."""

    study: str
    labels: dict[str, object]
    fields: dict[str, object]  # what was measured (timing, breakdown, counters, flags, error, ...)
    config: dict[str, object]
    provenance: dict[str, object]
    identity: dict[str, object]  # machine, run id and slot, rules hash, code fingerprint

    def to_row(self) -> dict[str, object]:
        """The flat row, columns in the order a reader of the CSV expects: labels first."""
        return {col.STUDY: self.study, **self.labels, **self.fields, **self.identity, **self.config, **self.provenance}

    @classmethod
    def from_row(cls, row: dict[str, object]) -> "Record":
        parts: dict[str, dict[str, object]] = {part: {} for part in PARTS}
        for column, value in row.items():
            if column == col.STUDY:
                continue
            parts[part_of(column)][column] = value
        return cls(str(row.get(col.STUDY, "")), **parts)

    @property
    def machine(self) -> Machine:
        return Machine.parse(str(self.identity[col.MACHINE]))

    @property
    def timing(self) -> col.Timing | None:
        """The timed steps' summary, where this record has one."""
        try:
            timed = (col.MS_MEDIAN, col.MS_P10, col.MS_P90, col.SAMPLES_PER_S)
            return col.Timing(*(float(self.fields[c]) for c in timed))  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError):
            return None

    @property
    def breakdown(self) -> col.Breakdown:
        return col.Breakdown.from_row(self.fields)


def part_of(column: str) -> str:
    """Which part of a record a column belongs to."""
    if column in IDENTITY:
        return "identity"
    if column in LABELS:
        return "labels"
    if column.startswith(SECTIONS) or column == "name":
        return "config"
    if column in PROVENANCE:
        return "provenance"
    return "fields"


def make_record(
    study: str,
    fields: dict[str, object],
    cfg: Config | None = None,
    device: torch.device | str = "cpu",
    machine: str | None = None,
    run_id: str | None = None,
    run_slot: int = 1,
    **labels: object,
) -> dict[str, object]:
    """The one record builder: study and labels, measured fields, the config, provenance, machine.

    `fields` may name the `threads` they ran with (a rank's, not this process's). `run_id` names
    the run of a study this record belongs to (`runner.run` makes one per run; else this
    process's), so pairs are formed only within one run, and `run_slot` which of the study's runs
    (1..RUNS) it is, `process_id` the process that measured it and `protocol` how (`columns.PROTOCOL`).
    `rules_hash` is the id of the verdict rules in force when it was measured, and
    `code_fingerprint` that of the code its loop ran (`records.code_identity`: per loop; a record of no
    config, every loop's). Labels
    (variant, repeat, point, ...) come first.
    """
    prov = provenance(device)
    if fields.get(col.THREADS):
        prov[col.THREADS] = fields[col.THREADS]
    described = {col.CONFIG_NAME: cfg.name, col.CONFIG_HASH: cfg.hash()} if cfg is not None else {}
    return Record(
        study,
        labels={**labels, **described},
        fields=dict(fields),
        config=cfg.flat() if cfg is not None else {},
        provenance={key: value for key, value in prov.items() if key not in fields},
        identity={
            col.MACHINE: machine or machine_key(),
            col.RUN_ID: run_id or process_run_id(),
            col.RUN_SLOT: run_slot,
            col.RULES_HASH: rules_hash(),
            col.CODE_FINGERPRINT: code_fingerprint(cfg.train.loop if cfg is not None else ANY),
            col.PROTOCOL: col.PROTOCOL_VERSION,
            col.PROCESS_ID: os.getpid(),
        },
    ).to_row()
