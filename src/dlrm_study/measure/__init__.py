"""Timing only: the CPU and GPU benchmarks of a run (`bench`), the machine's limits (`limits`, from the memory
microbenchmark `membench`, kept by `limits_cache`), the runner that
measures studies in interleaved, resumable repeats, sweeps, and training and distributed runs."""

from dlrm_study.measure.bench import bench

__all__ = ["bench"]
