"""The figures, one module per notebook family, on the shared style and marks (`common`). Plots only read records.

`cpu` (notebooks 01, 02), `sensitivity` (03, 04), `placement` (05), `scaling` (06), `convergence`
(07), `predictions` (00, 03); the names notebooks call are handed on here.
"""

from dlrm_study.report.plots.common import caption, ordered, save, style
from dlrm_study.report.plots.convergence import convergence
from dlrm_study.report.plots.cpu import ablation, breakdown, decomposition, speedup
from dlrm_study.report.plots.placement import hit_rates, placement_sweep, placements, remote_tables
from dlrm_study.report.plots.predictions import predictions
from dlrm_study.report.plots.scaling import scaling_breakdown, scaling_projection
from dlrm_study.report.plots.sensitivity import heatmap, knob_panels, sensitivity

__all__ = [
    "ablation", "breakdown", "caption", "convergence", "decomposition", "heatmap", "hit_rates", "knob_panels",
    "ordered", "placement_sweep", "placements", "predictions", "remote_tables", "save", "scaling_breakdown",
    "scaling_projection", "sensitivity", "speedup", "style",
]  # fmt: skip
