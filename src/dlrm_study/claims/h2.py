"""H2 (HPCA 2021): the GPU's advantage grows with the dense part.

Along the dense/sparse grid's dense features (`claims.grid`): reproduced where, at every table count, GPU over CPU
grows from the fewest to the most dense features by more than GRID_MARGIN; not reproduced where some change's
interval (at 1 - 0.05/m) lies short of it.
"""

from dlrm_study.analysis.evidence import Evidence
from dlrm_study.analysis.judgement import Judgement
from dlrm_study.analysis.power import GPU_SPREAD, LENDING_RUNS, Design
from dlrm_study.claims.grid import DENSE, along_the_grid, grid_claim
from dlrm_study.claims.rule import Lens

ID = "H2"


def h2(evidence: Evidence, machine: str, lens: Lens) -> Judgement:
    return grid_claim(evidence, machine, lens, DENSE, grows=True)


DESIGNS = (  # one lending's runs (`analysis.power`)
    Design(ID, "each table count", "log", 1.25, 1.5625, 1.0, 0.95, 1 - 0.05 / 3, 0.20, 0.10,
           f"{GPU_SPREAD}: a ratio of four records, two of them CPU loops (S3's pairs spread up to 0.14); within "
           "0.20, between 0.10", reproduce=("all", 3), refute=("any", 3), runs=LENDING_RUNS, pairs=1),
)  # fmt: skip


CLAIM = along_the_grid(
    ID,
    "the GPU's advantage grows with the dense part",
    "GPU over CPU grows with the dense part",
    h2,
    DENSE,
    names=lambda tables: f"at {tables} tables",
    gpu_points="the grid's dense-features ends (GPU over host CPU; the fewest over the table counts)",
    designs=DESIGNS,
)
