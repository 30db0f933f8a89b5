"""H3 (HPCA 2021): the GPU's advantage shrinks as the sparse part grows.

Along the dense/sparse grid's tables (`claims.grid`): reproduced where, at every dense-feature count, GPU over CPU
shrinks from the fewest to the most tables by more than GRID_MARGIN; not reproduced where some change's interval
(at 1 - 0.05/m) lies short of it.
"""

from dlrm_study.analysis.evidence import Evidence
from dlrm_study.analysis.judgement import Judgement
from dlrm_study.analysis.power import GPU_SPREAD, LENDING_RUNS, Design
from dlrm_study.claims.grid import TABLES, along_the_grid, grid_claim
from dlrm_study.claims.rule import Lens

ID = "H3"


def h3(evidence: Evidence, machine: str, lens: Lens) -> Judgement:
    return grid_claim(evidence, machine, lens, TABLES, grows=False)


DESIGNS = (  # one lending's runs (`analysis.power`)
    Design(ID, "each dense count", "log", 0.8, 0.64, 1.0, 0.95, 1 - 0.05 / 3, 0.20, 0.10,
           f"{GPU_SPREAD}: as H2's", direction="below", reproduce=("all", 3), refute=("any", 3), runs=LENDING_RUNS,
           pairs=1),
)  # fmt: skip


CLAIM = along_the_grid(
    ID,
    "the GPU's advantage shrinks as the sparse part grows",
    "GPU over CPU shrinks as the sparse part grows",
    h3,
    TABLES,
    names=lambda dense: f"at {dense} dense features",
    gpu_points="the grid's table-count ends (GPU over host CPU; the fewest over the dense-feature counts)",
    designs=DESIGNS,
)
