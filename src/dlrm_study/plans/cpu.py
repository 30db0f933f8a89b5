"""Notebooks 01 and 02: the reference loop's breakdown, and the CPU loops side by side."""

from pathlib import Path

from dlrm_study.config.variants import ABLATION, OPTIMIZED_BF16, OPTIMIZED_FP32, REFERENCE, TORCHREC
from dlrm_study.plans.profiles import CLAIM_RUNS, PRESETS, RUNS, SWEEP
from dlrm_study.plans.sweep import Sweep

CPU_PRESETS = ["dlrm-benchmark", "mlperf-scaled", "kaggle"]
CPU_LOOPS = [REFERENCE, TORCHREC, OPTIMIZED_FP32, OPTIMIZED_BF16]
BF16_PRESETS = ("dlrm-benchmark", "mlperf-scaled")  # where S3 times bf16 against fp32


def deciding(presets: list[str]) -> list[str]:
    """The CPU loops' points a claim's rule reads, as point/variant: the reference's breakdown at every preset
    (S2), bf16 and fp32 at S3's presets (the smoke profile's one config stands for both)."""
    s3 = [p for p in presets if p in BF16_PRESETS or len(presets) == 1]
    return [f"{p}/{REFERENCE}" for p in presets] + [f"{p}/{v}" for p in s3 for v in (OPTIMIZED_FP32, OPTIMIZED_BF16)]


def cpu_loops(profile: str, out: Path) -> Sweep:
    """Every CPU loop on every CPU preset, interleaved, profiled after the timed steps.

    Notebook 01 draws the reference's records of it and notebook 02 all of them: one sweep,
    so the loops of a preset are always measured side by side in each repeat. Its first RUNS runs
    measure every loop; the points S2 and S3 read (`deciding`) get CLAIM_RUNS runs in all, their design.
    """
    p = PRESETS[profile]
    smoke = profile == "smoke"
    presets = ["tiny"] if smoke else CPU_PRESETS
    return Sweep(
        name=f"cpu-loops-{profile}",
        config=presets,
        set=["train.batch_size=32"] if smoke else [],
        variants=CPU_LOOPS,
        repeats=p.repeats,
        steps=p.steps,
        warmup=p.warmup,
        profile_steps=p.profile_steps,
        out=str(out / "sweeps.csv"),
        runs=RUNS[profile],
        claim_runs=CLAIM_RUNS[profile],
        deciding=deciding(presets),
    )


# The ablation's config: dlrm-benchmark with tables 4x the last-level cache of the development machine
# (8 x 500,000 rows of dim 64: 1 GB), so the memory techniques meet memory; full: the preset itself.
ABLATION_BASE = {
    "smoke": ["train.batch_size=32"],
    "quick": ["name=dlrm-benchmark-500k", "model.table_rows=8x500000", "data.lookups_per_table=20",
              "train.batch_size=1024"],
    "full": [],
}  # fmt: skip


def ablation(profile: str, out: Path) -> Sweep:
    """Notebook 02's ablation: the reference, then each technique of the optimized loop added in turn."""
    p = SWEEP[profile]
    return Sweep(
        name=f"ablation-{profile}",
        config="tiny" if profile == "smoke" else "dlrm-benchmark",
        set=list(ABLATION_BASE[profile]),
        variants=list(ABLATION),
        repeats=p.repeats,
        steps=p.steps,
        warmup=p.warmup,
        out=str(out / "sweeps.csv"),
        runs=RUNS[profile],
    )
