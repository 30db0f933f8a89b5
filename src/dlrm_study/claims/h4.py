"""H4 (HPCA 2021): host-memory tables cost throughput, and a hot-row cache recovers most of it.

A `conjunction` of two halves on mlperf-scaled with Zipf ids: host memory's cost (host over hbm wholly below 1)
and the recovery (the share of host's loss the cache wins back, wholly above H4_RECOVERY). On a machine without a
GPU it is not measurable; the remote tables of a CPU parameter server are shown beside.
"""

import math
from pathlib import Path

import pandas as pd

from dlrm_study.analysis import clusters, stats
from dlrm_study.analysis.evidence import Evidence
from dlrm_study.analysis.judgement import LACKING, Judgement, Status, conjunction, decided
from dlrm_study.analysis.placement import placement_records, recovery
from dlrm_study.analysis.power import LENDING_RUNS, Design, Measured, Reader, records
from dlrm_study.analysis.wording import Share, amount
from dlrm_study.claims.claim import HPCA, Claim
from dlrm_study.claims.rule import Lens, counted, gate, gpu_early, half, ratio_text
from dlrm_study.config.variants import GPU_CACHED, GPU_HBM, GPU_HOST, GPU_UVM
from dlrm_study.plans.gpu import PLACEMENTS_RUN, GpuRun
from dlrm_study.records import Machine
from dlrm_study.records import columns as col
from dlrm_study.records.machine import machine_key
from dlrm_study.rules import literal

ID = "H4"
H4_RECOVERY = literal(ID, "recovery")
PAIR_NAMES = {"host": "host tables over HBM", "recovery": "share of host's loss the cache wins back"}


def h4_pairs(evidence: Evidence) -> dict[str, pd.DataFrame]:
    """host, uvm and cached over hbm, paired per repeat; `recovery` per repeat (`recovery`)."""
    frame = evidence.gpu_placements
    found = {name: stats.pairs(frame, variant, GPU_HBM) for name, variant in
             (("host", GPU_HOST), ("uvm", GPU_UVM), ("cached", GPU_CACHED))}  # fmt: skip
    return found | {"recovery": recovery(found["host"], found["cached"])}


def h4_halves(found: dict[str, pd.DataFrame], ratios: dict[str, stats.Ratio], lens: Lens) -> tuple[Status, Status]:
    """H4's two halves: host memory's cost (host's interval wholly below 1; refuted wholly above it) and the
    recovery (wholly above H4_RECOVERY; refuted wholly below it). A refutation is one side of an OR, read at
    1 - 0.05/2."""
    host, won = ratios["host"], ratios["recovery"]
    host2 = lens.ratio(found["host"], stats.family(2))
    won2 = lens.ratio(found["recovery"], stats.family(2), linear=True)
    return half(lens, host, host.high < 1, host2.low > 1), half(lens, won, won.low > H4_RECOVERY,
                                                                won2.high < H4_RECOVERY)  # fmt: skip


def h4(evidence: Evidence, machine: str, lens: Lens) -> Judgement:
    """Host-memory tables cost throughput against hbm, and the cache of hot rows wins back most of it: a
    `conjunction` of the two halves (`h4_halves`), so either refuted refutes it whatever the other's evidence."""
    if not Machine.parse(machine).has_gpu:
        text = "no GPU for the placements"
        if not evidence.remote.empty:
            text += (
                f"; remote tables over local tables (a CPU parameter server): "
                f"{ratio_text(lens.paired(evidence.remote, 'remote', 'local'))}"
            )
        return counted(Judgement(Status.NOT_MEASURABLE, text), evidence.remote)
    if (early := gpu_early(evidence, machine)) is not None:
        return early
    found = h4_pairs(evidence)
    ratios = {name: lens.ratio(f) for name, f in found.items() if name != "recovery"}
    if not (ratios["host"].n and ratios["cached"].n):
        return counted(Judgement(Status.NOT_YET, "no host or cached repeat pairs up with hbm"), evidence.gpu_placements)
    ratios["recovery"] = Share(*lens.ratio(found["recovery"], linear=True))  # a share of what host loses
    text = "mlperf-scaled, Zipf 1.05, 10% of rows cached, over hbm (paired): " + ", ".join(
        f"{name} {ratio_text(r)}" for name, r in ratios.items() if name != "recovery"
    )
    r = ratios["recovery"]
    text += f"; the cache wins back (cached - host) / (1 - host), per repeat: {amount(r)}, against {H4_RECOVERY:.0%}"
    deciding = {name: ratios[name] for name in ("host", "recovery")}
    status = conjunction(*h4_halves(found, ratios, lens))
    text += gate(deciding) if status in LACKING else ""
    return counted(decided(status, text, deciding), evidence.gpu_placements)


def deciding(evidence: Evidence) -> list[pd.DataFrame]:
    if evidence.gpu_placements.empty:
        return []
    found = h4_pairs(evidence)
    return [found["host"], found["recovery"]]  # recovery's records are cached's and host's; uvm is shown beside


def session_counts(out: Path, run: GpuRun) -> tuple[int, int]:
    """(pairs, runs) of the fewer of host and cached with hbm in a GPU session's records of this machine."""
    frame = placement_records(out, PLACEMENTS_RUN)
    if frame.empty or col.MACHINE not in frame:
        return 0, 0
    frame = frame[frame[col.MACHINE] == machine_key()]
    found = [clusters.paired_ratio(frame, v, GPU_HBM) for v in (GPU_HOST, GPU_CACHED)]
    return min(r.n for r in found), min(r.runs for r in found)


# The design of its deciding comparison (`analysis.power`): the recoveries of the placements' records.
H4_FILES = (("gpu_sweeps.csv", "gpu-placements"),)


def h4_recoveries(machine: str, code: str, comparison: str = "recovery", runs: int | None = None) -> pd.DataFrame:
    """H4's recovery (c - h) / (1 - h) per repeat (`placement.recovery`, the rule's own arithmetic), from host and
    cached over hbm."""
    frame = records(H4_FILES, machine, code, runs)
    return recovery(stats.pairs(frame, GPU_HOST, GPU_HBM), stats.pairs(frame, GPU_CACHED, GPU_HBM))


READER = Reader(h4_recoveries, "ratio", "linear", timed=False)  # a GPU point times blocks of steps
H200 = "avx512f+avx512_bf16+amx_bf16/16cpu/nvidia-h200"
H4_SOURCES = {
    "mlperf-scaled": (
        Measured(f"intel-xeon-f6m207s2/{H200}", "d21ede0945ba", 1, 4, (), 0.1439, 0.0124, math.nan),
        Measured(f"intel-xeon/{H200}", "", 1, 2, (), 0.6756, 0.0091, math.nan),
    ),
}
DESIGNS = (
    Design(ID, "recovery", "linear", 0.5, 0.7, 0.3, 0.95, 0.975, 0.0124, 0.10,
           "within: the largest of the H200 placements' recoveries (results/gpu_sweeps.csv gpu-placements, one run "
           "each); between: assumed 0.10 (10 points of recovery: one run per machine, none to estimate it from); "
           "host below hbm taken as given (its ratio was 0.05-0.08x)", H4_SOURCES["mlperf-scaled"],
           refute=("any", 2), runs=LENDING_RUNS, pairs=3),
)  # fmt: skip


CLAIM = Claim(
    ID, "host-memory tables cost throughput; a hot-row cache recovers most", HPCA,
    f"a hot-row cache recovers more than {H4_RECOVERY:.0%} of what host tables lose",
    ("gpu_placements", "remote"), h4, "05_embedding_placement", deciding,
    names=lambda p: PAIR_NAMES.get(p, p),
    figures=("05_placements",),
    gpu_points="host and cached with hbm (the fewer of the two)",
    session_counts=session_counts,
    designs=DESIGNS,
    reader=READER,
)  # fmt: skip
