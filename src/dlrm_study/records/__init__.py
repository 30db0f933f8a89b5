"""What records are made of: the machine that measured them (`Machine`), what ran (`Variant`), their
columns and typed parts (`columns`: `Timing`, `Breakdown`), and the record itself (`Record`)."""

from dlrm_study.config.variants import Variant
from dlrm_study.records.columns import Breakdown, Timing
from dlrm_study.records.machine import Machine
from dlrm_study.records.record import Record

__all__ = ["Breakdown", "Machine", "Record", "Timing", "Variant"]
