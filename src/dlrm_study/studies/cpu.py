"""Notebooks 01 and 02: the reference loop's breakdown, and the CPU loops side by side."""

import itertools
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from dlrm_study.measure import stats
from dlrm_study.measure.compare import ABLATION_LABELS
from dlrm_study.records import columns as col
from dlrm_study.records.variants import ABLATION, OPTIMIZED_BF16, OPTIMIZED_FP32, REFERENCE, TORCHREC
from dlrm_study.studies.profiles import PRESETS, SWEEP
from dlrm_study.sweep import Sweep

CPU_PRESETS = ["dlrm-benchmark", "mlperf-scaled", "kaggle"]
CPU_LOOPS = [REFERENCE, TORCHREC, OPTIMIZED_FP32, OPTIMIZED_BF16]


def cpu_loops(profile: str, out: Path) -> Sweep:
    """Every CPU loop on every CPU preset, interleaved, profiled after the timed steps.

    Notebook 01 draws the reference's records of it and notebook 02 all of them: one sweep,
    so the loops of a preset are always measured side by side in each repeat.
    """
    p = PRESETS[profile]
    smoke = profile == "smoke"
    return Sweep(
        name=f"cpu-loops-{profile}",
        config=["tiny"] if smoke else CPU_PRESETS,
        set=["train.batch_size=32"] if smoke else [],
        variants=CPU_LOOPS,
        repeats=p.repeats,
        steps=p.steps,
        warmup=p.warmup,
        profile_steps=p.profile_steps,
        out=str(out / "sweeps.csv"),
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
    )


def ablation_steps(records: pd.DataFrame) -> pd.DataFrame:
    """Each step's samples/s over the step before it and over the reference, paired within repeats
    (all repeats; `word` from both views, `stats.paired_finding`)."""
    steps = [v for v in ABLATION if v in set(records[col.VARIANT])]
    rows = []
    for before, step in itertools.pairwise(steps):
        gain = stats.paired_finding(records, step, before, "faster", "slower")
        total = stats.paired_ratio(records, step, REFERENCE)
        rows.append({"step": step, "label": ABLATION_LABELS[step], "after": before, **gain.all._asdict(),
                     "word": gain.word, "text": gain.text(),
                     **{f"total_{k}": v for k, v in total._asdict().items()}})  # fmt: skip
    return pd.DataFrame(rows)


def ablation_findings(records: pd.DataFrame) -> list[str]:
    """One sentence per step: its gain over the step before, and where that leaves the loop."""
    table = ablation_steps(records)
    lines = [
        f"{r.label}: over the step before, {r.text}; "
        f"{stats.describe(r.total_center, r.total_low, r.total_high, 'x')} the reference"
        for r in table.itertuples()
    ]
    lines = lines or ["ablation: no finding: no step pairs up with the one before it"]
    return lines + stats.flag_note(records)


S2_PART = ("embedding_backward_update",)  # S2's claim: embedding backward and update
EMBEDDING_PARTS = ("embedding_forward", "embedding_backward_update")


def embedding_share(records: pd.DataFrame, parts: tuple[str, ...] = S2_PART) -> pd.DataFrame:
    """Per config: the share of the profiled iteration spent in the operators `parts` (by default
    embedding backward + update, S2's claim).

    A summary table (`stats.summarize`, on the logit scale): median share over repeats and its 95% interval.
    """
    ops = records[list(col.OP_COLUMNS)].sum(axis=1)
    share = sum(records[col.op_column(name)] for name in parts) / ops
    return stats.summarize(records.assign(share=share), [col.CONFIG_NAME], "share", share=True)


def speedups(records: pd.DataFrame, baseline: str = REFERENCE) -> pd.DataFrame:
    """Every variant's samples/s over the baseline's, paired within repeats, per config."""
    parts = [
        stats.paired_ratios(records, [col.CONFIG_NAME], variant, baseline).assign(**{col.VARIANT: variant})
        for variant in records[col.VARIANT].unique()
        if variant != baseline
    ]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


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


class SplitSGDCheck(NamedTuple):
    exact: bool  # the halves reassembled bit for bit to fp32 SGD's weight after every step
    kernel: str  # the kernel that ran the steps: "cpp", or "torch" where the C++ does not build


def split_sgd_exact(steps: int = 3) -> SplitSGDCheck:
    """Training's Split-SGD optimizer (so the kernel training runs) beside fp32 SGD on the same bf16 gradients.

    Notebook 07 prints `exact` (checked by nbval, so it cannot name the machine-dependent kernel) and `kernel`.
    """
    import torch

    from dlrm_study.embeddings.kernels import torch_ops
    from dlrm_study.train.split_sgd import SplitSGD

    gen = torch.Generator().manual_seed(0)
    fp32 = torch.randn(1000, generator=gen)
    holder = torch.nn.ParameterList([fp32.clone()])
    optimizer = SplitSGD.from_fp32([holder], lr=0.1)  # the parameter becomes its bf16 upper half
    param = holder[0]
    exact = True
    for _ in range(steps):
        grad = torch.randn(1000, generator=gen).bfloat16()
        param.grad = grad
        optimizer.step()
        fp32 -= 0.1 * grad.float()
        exact &= torch.equal(torch_ops.join(param.detach().view(torch.int16), optimizer.state[param]["lo"]), fp32)
    return SplitSGDCheck(bool(exact), optimizer.ops.NAME)
