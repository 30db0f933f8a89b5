"""What records are made of: the machine that measured them (`Machine`) and what ran (`Variant`)."""

from dlrm_study.records.machine import Machine
from dlrm_study.records.variants import Variant

__all__ = ["Machine", "Variant"]
