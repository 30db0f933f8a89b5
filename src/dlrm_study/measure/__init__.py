"""Timers, per-operator breakdown and the benchmark runner that emits records."""

from dlrm_study.measure.bench import OPERATORS, bench

__all__ = ["OPERATORS", "bench"]
