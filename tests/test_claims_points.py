"""S3 reads its points' records by point identity across results files: the CPU loops' sweep (sweeps.csv) and
`dlrm-study compare` (bench.csv) pool per machine, each run a cluster, at the machine's current code only."""

import pandas as pd
from tests.test_verdicts import SAME, XEON, aucs, ratios, speed, verdict

from dlrm_study.analysis.evidence import Evidence
from dlrm_study.analysis.identity import record_ids
from dlrm_study.claims import registry as claims

FAST = ratios(1.9, 1.8)  # 5 runs, each its own run id


def loops(machine: str, bf16: list[float], run: str) -> pd.DataFrame:
    """bf16 and fp32 records of S3's presets, each preset its own point (as the readers label them)."""
    frame = pd.DataFrame(speed(machine, bf16, run=run))
    return frame.assign(point=frame["config_name"], config_hash=frame["config_name"])


def seeds(machine: str) -> pd.DataFrame:
    """S3's accuracy records, each seed a record of its own (its `repeat`, as stored)."""
    frame = aucs(machine, SAME)
    return frame.assign(repeat=frame["train.seed"])


def test_s3_pools_the_compare_records_of_its_points_with_the_sweeps() -> None:
    """One run in the sweep, the others in `compare`: alone each file is one run or fewer; pooled, a verdict.
    (Fails before: S3 read the sweep's records only, and said "one run".)"""
    sweep = loops(XEON, FAST[:1], "sweep")
    compare = loops(XEON, FAST[1:], "compare")
    assert verdict("S3", XEON, cpu_loops=sweep, accuracy=aucs(XEON, SAME)).status == "one run"
    pooled = verdict("S3", XEON, cpu_loops=sweep, cpu_compare=compare, accuracy=aucs(XEON, SAME))
    assert pooled.status == "reproduced" and pooled.runs == len(FAST), pooled.evidence
    assert verdict("S3", XEON, cpu_compare=compare, accuracy=aucs(XEON, SAME)).status == "reproduced"


def test_s3_pools_one_machine_s_records_and_counts_each_once() -> None:
    """Another machine's compare records never join; every pooled record is in a pair or counted."""
    sweep = loops(XEON, FAST[:1], "sweep")
    other = loops("intel-xeon-f6m143s8/avx512f+avx512_bf16/2cpu", FAST[1:], "compare")
    found = verdict("S3", XEON, cpu_loops=sweep, cpu_compare=other, accuracy=aucs(XEON, SAME))
    assert found.status == "one run"
    compare = loops(XEON, FAST[1:], "compare")
    evidence = Evidence(cpu_loops=sweep, cpu_compare=compare, accuracy=seeds(XEON)).of(XEON)
    claim = claims.BY_ID["S3"]
    every = set(record_ids(pd.concat([sweep, compare, seeds(XEON)])))
    assert len(claim.used(evidence)) + sum(claim.judge(evidence, XEON).left_out.values()) == len(every)
    assert len(claim.used(evidence)) == 2 * 2 * len(FAST)  # two presets, two loops, one pair per run
