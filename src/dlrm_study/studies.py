"""What each notebook measures, per profile, and the findings its records support.

Profiles: `smoke` (seconds; what nbval runs in CI), `quick` (the default: every notebook
within `make reproduce`'s 30 minutes on a 2-core CPU) and `full` (paper-grade).
"""

import os
import tempfile
from pathlib import Path

import pandas as pd

from dlrm_study.errors import UsageError
from dlrm_study.measure.bench import OPERATORS
from dlrm_study.sweep import Sweep

PROFILES = ("smoke", "quick", "full")
CPU_PRESETS = ["dlrm-benchmark", "mlperf-scaled", "kaggle"]


def profile(value: str | None = None) -> str:
    """The profile asked for, else $DLRM_STUDY_PROFILE, else quick."""
    chosen = value or os.environ.get("DLRM_STUDY_PROFILE") or "quick"
    if chosen not in PROFILES:
        raise UsageError(f"profile {chosen!r} is not one of {', '.join(PROFILES)}")
    return chosen


def results_dir(profile: str, value: str | None = None) -> Path:
    """Where records and figures go: the given folder; a scratch folder for smoke runs."""
    if value:
        return Path(value)
    if profile == "smoke":
        return Path(tempfile.mkdtemp(prefix="dlrm-study-smoke-"))
    return Path("../results")


def _sized(name: str, profile: str, configs: list[str], variants: list[str], out: Path) -> Sweep:
    steps, warmup = {"smoke": (2, 1), "quick": (5, 2), "full": (20, 3)}[profile]
    return Sweep(
        name=f"{name}-{profile}",
        config=["tiny"] if profile == "smoke" else configs,
        set=["train.batch_size=32"] if profile == "smoke" else [],
        variants=variants,
        steps=steps,
        warmup=warmup,
        profile_steps=1 if profile == "smoke" else 2,
        out=str(out / "sweeps.csv"),
    )


def reference_breakdown(profile: str, out: Path) -> Sweep:
    """Notebook 01: the reference loop's per-operator time on each CPU preset."""
    return _sized("reference-breakdown", profile, CPU_PRESETS, ["reference"], out)


def cpu_optimizations(profile: str, out: Path) -> Sweep:
    """Notebook 02: reference, torchrec, optimized fp32 and bf16 on each CPU preset."""
    variants = ["reference", "torchrec", "optimized-fp32", "optimized-bf16"]
    return _sized("cpu-optimizations", profile, CPU_PRESETS, variants, out)


def embedding_share(records: pd.DataFrame) -> pd.Series:
    """Fraction of each config's iteration spent in embedding forward, backward and update."""
    ops = records[[f"op_{name}_ms" for name in OPERATORS]].sum(axis=1)
    emb = records["op_embedding_forward_ms"] + records["op_embedding_backward_update_ms"]
    return (emb / ops).groupby(records["config_name"]).median()


def speedups(records: pd.DataFrame, baseline: str = "reference") -> pd.DataFrame:
    """samples/s of every variant over the baseline's, per config (medians over records)."""
    rates = records.groupby(["config_name", "variant"])["samples_per_s"].median().unstack()
    return rates.div(rates[baseline], axis=0)


def fused_matches_reference(steps: int = 3) -> bool:
    """The optimized fp32 loop ends where the reference does (tiny, repeated ids, 1e-5)."""
    import torch

    from dlrm_study import config
    from dlrm_study.data import SyntheticData
    from dlrm_study.train import build, train_step

    cfg = config.load("tiny", ["data.pooling=fixed", "data.lookups_per_table=6", "model.table_rows=50-70-30-90"])
    optimized = config.Config.from_dict(cfg.to_dict())
    optimized.train.loop = "optimized"
    runs = [build(cfg), build(optimized)]
    for i in range(steps):
        for run in runs:
            train_step(run, SyntheticData(cfg).batch(i))
    tables = [torch.cat(run.model.sparse_arch.tables()) for run in runs]
    return bool(torch.allclose(tables[0], tables[1], rtol=0, atol=1e-5))
