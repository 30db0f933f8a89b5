"""What records are made of: the machine that measured them (`Machine`), their columns and typed parts
(`columns`: `Timing`, `Breakdown`), the record itself (`Record`), its provenance, and the CSV store."""

from dlrm_study.records.columns import Breakdown, Timing
from dlrm_study.records.machine import Machine
from dlrm_study.records.record import Record

__all__ = ["Breakdown", "Machine", "Record", "Timing"]
