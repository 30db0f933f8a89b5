"""The protocol can tell a bf16 loop half as fast as fp32 from the paper's 1.8x: with every bf16 samples/s of a
native-bf16 machine's S3 records halved (a copy of results/), S3 reads "not reproduced" there, whatever its
accuracy half says (a conjunction fails when either half fails)."""

import shutil
from pathlib import Path

import pandas as pd
import pytest

from dlrm_study.analysis import claims
from dlrm_study.analysis.evidence import Evidence
from dlrm_study.analysis.judgement import Status
from dlrm_study.config.variants import OPTIMIZED_BF16
from dlrm_study.records import Machine
from dlrm_study.records import columns as col

RESULTS = Path(__file__).resolve().parents[1] / "results"


def protocol_2_bf16_machines(sweeps: pd.DataFrame) -> list[str]:
    """Native-bf16 machines with S3 records measured as separate-process runs (protocol 2)."""
    if col.PROTOCOL not in sweeps:
        return []
    new = sweeps[(pd.to_numeric(sweeps[col.PROTOCOL], errors="coerce") >= 2) & (sweeps[col.VARIANT] == OPTIMIZED_BF16)]
    return sorted(m for m in set(new[col.MACHINE].dropna()) if Machine.parse(m).native_bf16)


def halved(results: Path, machines: list[str]) -> None:
    """Every bf16 samples/s of `machines` halved (its step twice as long), in place."""
    path = results / "sweeps.csv"
    frame = pd.read_csv(path, low_memory=False)
    mine = frame[col.MACHINE].isin(machines) & (frame[col.VARIANT] == OPTIMIZED_BF16)
    frame.loc[mine, col.SAMPLES_PER_S] = frame.loc[mine, col.SAMPLES_PER_S].astype(float) * 0.5
    frame.loc[mine, col.MS_MEDIAN] = frame.loc[mine, col.MS_MEDIAN].astype(float) * 2
    frame.to_csv(path, index=False)


@pytest.mark.slow
def test_a_halved_bf16_reads_not_reproduced(tmp_path: Path) -> None:
    copy = tmp_path / "results"
    shutil.copytree(RESULTS, copy, ignore=shutil.ignore_patterns("notebooks", "figures"))
    machines = protocol_2_bf16_machines(pd.read_csv(copy / "sweeps.csv", low_memory=False))
    if not machines:  # active from the first make reproduce of protocol 2 on a native-bf16 machine
        pytest.skip("no native-bf16 machine has S3 records of protocol 2 yet (make reproduce on one)")
    before = Evidence.load(copy, "quick")
    was = {m: claims.judge("S3", before.of(m), m).status for m in machines}
    halved(copy, machines)
    after = Evidence.load(copy, "quick")
    for machine in machines:
        now = claims.judge("S3", after.of(machine), machine)
        assert now.status == Status.NOT_REPRODUCED, f"{machine}: {now.status} ({now.detail})"
        assert was[machine] != Status.NOT_REPRODUCED  # the halving, not the records, made it
