"""What each notebook measures, per profile, and the findings its records support.

One module per notebook family: `profiles` (how much every study measures), `cpu` (01, 02),
`sensitivity` (03, 04 and the GPU mirrors of their sweeps), `placement` (05), `convergence`
(07); the scaling study (06) lives in `distributed.scaling`. The names notebooks use are
re-exported here.
"""

from dlrm_study.studies.convergence import convergence_config, convergence_records, run_convergence
from dlrm_study.studies.cpu import (
    CPU_LOOPS,
    CPU_PRESETS,
    cpu_loops,
    embedding_share,
    fused_matches_reference,
    speedups,
    split_sgd_exact,
)
from dlrm_study.studies.placement import cache_hit_rates, hit_rate, placement_records, remote_vs_local
from dlrm_study.studies.profiles import PROFILES, machine, profile, results_dir
from dlrm_study.studies.sensitivity import (
    BASE_DESCRIPTION,
    BASE_NAME,
    DENSE_SPARSE_GRID,
    GPU_RECORDS,
    KNOBS,
    SENSITIVITY_BASE,
    base_intervals,
    base_point,
    best_cpu_variant,
    dense_sparse_grid,
    dropped,
    gpu_here,
    gpu_over_cpu,
    gpu_records,
    gpu_status,
    knob_findings,
    knob_value,
    on_gpu,
    rates_table,
    sensitivity,
    sensitivity_records,
    with_gpu,
    with_knob,
)

__all__ = [
    "BASE_DESCRIPTION",
    "BASE_NAME",
    "CPU_LOOPS",
    "CPU_PRESETS",
    "DENSE_SPARSE_GRID",
    "GPU_RECORDS",
    "KNOBS",
    "PROFILES",
    "SENSITIVITY_BASE",
    "base_intervals",
    "base_point",
    "best_cpu_variant",
    "cache_hit_rates",
    "convergence_config",
    "convergence_records",
    "cpu_loops",
    "dense_sparse_grid",
    "dropped",
    "embedding_share",
    "fused_matches_reference",
    "gpu_here",
    "gpu_over_cpu",
    "gpu_records",
    "gpu_status",
    "hit_rate",
    "knob_findings",
    "knob_value",
    "machine",
    "on_gpu",
    "placement_records",
    "profile",
    "rates_table",
    "remote_vs_local",
    "results_dir",
    "run_convergence",
    "sensitivity",
    "sensitivity_records",
    "speedups",
    "split_sgd_exact",
    "with_gpu",
    "with_knob",
]
