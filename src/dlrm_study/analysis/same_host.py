"""The same-host pair, measured and not judged: on a GPU machine, the GPU loop over its own host's optimized bf16
CPU loop, and that loop over the host's reference, per preset, paired within the repeats of its run
(`plans.gpu.same_host`). No rule reads them (H2 and H3 read the grid); the results page shows them beside the
same comparison on the 2-core machine of the same CPU model, each with where it came from."""

from dataclasses import dataclass

import pandas as pd

from dlrm_study.analysis import stats
from dlrm_study.analysis.clusters import over_runs
from dlrm_study.analysis.current import newest_code_only
from dlrm_study.config.variants import GPU_HBM, HOST_OPTIMIZED_BF16, HOST_REFERENCE, OPTIMIZED_BF16, REFERENCE
from dlrm_study.records import Machine
from dlrm_study.records import columns as col

STUDY = "gpu-same-host"  # `plans.gpu.SAME_HOST_RUN`
CPU_STUDY = "cpu-loops-quick"  # the 2-core machines' CPU loops (`plans.cpu`)
COMPARISONS = (  # (variant, baseline, what it says)
    (GPU_HBM, HOST_OPTIMIZED_BF16, "the GPU over its host's optimized bf16 loop"),
    (HOST_OPTIMIZED_BF16, HOST_REFERENCE, "the host's optimized bf16 loop over its reference"),
)
BESIDE = ((OPTIMIZED_BF16, REFERENCE, "the optimized bf16 loop over the reference"),)  # on the 2-core machines


@dataclass(frozen=True)
class Measured:
    """One comparison on one machine and preset, with what it came from."""

    machine: str
    preset: str
    batch: int
    what: str
    ratio: stats.Ratio
    commits: tuple[str, ...]


def same_host(records: pd.DataFrame) -> list[Measured]:
    """Every same-host comparison the records hold: per GPU machine (its newest code per loop) and preset."""
    return measured(of_study(records, STUDY), COMPARISONS)


def two_cores_beside(records: pd.DataFrame, gpu_machine: str) -> list[Measured]:
    """The optimized bf16 loop over the reference on 2-core machines of the GPU host's CPU model (family, model and
    stepping), per preset, from the CPU loops study at their newest code: the host's 16 cores set beside 2."""
    host = Machine.parse(gpu_machine)
    if not host.cpuid:
        return []  # no family, model and stepping to match

    def alike(key: str) -> bool:
        machine = Machine.parse(key)
        return (machine.cpu, machine.cpuid) == (host.cpu, host.cpuid) and not machine.has_gpu

    mine = of_study(records, CPU_STUDY)
    return measured(mine[mine[col.MACHINE].map(alike)], BESIDE)


def of_study(records: pd.DataFrame, study: str) -> pd.DataFrame:
    """The study's records that measured (failures out)."""
    mine = records[records[col.STUDY] == study] if col.STUDY in records else records.iloc[0:0]
    return mine[mine[col.ERROR].isna()] if col.ERROR in mine else mine


def measured(records: pd.DataFrame, comparisons: tuple[tuple[str, str, str], ...]) -> list[Measured]:
    """Each comparison per machine (its newest code per loop) and preset, paired within the repeats of a run."""
    found = []
    for (machine, preset), group in newest_code_only(records).groupby([col.MACHINE, col.CONFIG_NAME], sort=True):
        for variant, baseline, what in comparisons:
            r = over_runs(stats.pairs(group, variant, baseline))
            if r.n:
                found.append(Measured(machine, preset, int(group[col.BATCH_SIZE].max()), what, r, commits(group)))
    return found


def commits(records: pd.DataFrame) -> tuple[str, ...]:
    if col.GIT_COMMIT not in records:
        return ()
    return tuple(sorted({str(c).removesuffix("-dirty")[:7] for c in records[col.GIT_COMMIT].dropna()}))
