"""Timers, per-operator breakdown and the benchmark runner that emits records."""

from dlrm_study.measure.bench import bench

__all__ = ["bench"]
