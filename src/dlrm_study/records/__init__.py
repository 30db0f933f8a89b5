"""What records are made of: the machine that measured them (`Machine`)."""

from dlrm_study.records.machine import Machine

__all__ = ["Machine"]
