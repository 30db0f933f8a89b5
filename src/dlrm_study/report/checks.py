"""Facts the notebooks check under nbval: each computed afresh from the run or its records, each able
to come out False (a formatting check that holds by construction is no check).

- `pairs_within_runs`: the records a notebook draws form whole repeats: every cell (point, variant,
  machine, run, repeat) measured once, and each repeat of a run holds every variant of its point.
- `base_point_shared`: two one-knob sweeps pass through the very same base-point records (the
  resume key shares them), so their curves meet at one measurement.
- `placements_train_alike`: the cached placement trains the numbers the hbm placement trains.
- `seeds_per_loop`: every loop of the convergence study trained from the profile's seeds.
- `none_failed`: no measurement a notebook reads failed (an error record is a loop that broke: its
  reader leaves it out and counts it, and the notebook's check says False).
"""

from typing import NamedTuple

import pandas as pd
import torch

from dlrm_study import config
from dlrm_study.analysis import stats
from dlrm_study.analysis.readers import FAILED, left_out
from dlrm_study.config import Loop
from dlrm_study.data import SyntheticData, make_data
from dlrm_study.model.kernels import torch_ops
from dlrm_study.records import columns as col
from dlrm_study.train import build, train, train_step
from dlrm_study.train.split_sgd import SplitSGD

CELL = [col.CONFIG_HASH, col.VARIANT, col.MACHINE, stats.RUN, col.REPEAT]


def pairs_within_runs(records: pd.DataFrame) -> bool:
    """Each cell once, and every repeat of a run holds every variant its point has in that run."""
    if records.empty:
        return False
    cells = records.assign(**{stats.RUN: records[stats.RUN].fillna("")}) if stats.RUN in records else records
    if cells.duplicated([c for c in CELL if c in cells]).any():
        return False
    point = col.POINT if col.POINT in cells else col.CONFIG_NAME
    per_repeat = cells.groupby([point, col.MACHINE, stats.RUN, col.REPEAT])[col.VARIANT].nunique()
    per_run = cells.groupby([point, col.MACHINE, stats.RUN])[col.VARIANT].nunique()
    return bool((per_repeat == per_repeat.index.droplevel(col.REPEAT).map(per_run)).all())


def base_point_shared(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Whether the records two knob sweeps have at their common point are the same records."""
    common = set(a[col.CONFIG_HASH]) & set(b[col.CONFIG_HASH])
    if not common:
        return False

    def measured(frame: pd.DataFrame) -> set:
        at = frame[frame[col.CONFIG_HASH].isin(common)]
        return set(zip(at[col.CONFIG_HASH], at[col.VARIANT], at[col.TIMESTAMP], at[col.SAMPLES_PER_S], strict=True))

    return measured(a) == measured(b)


def placements_train_alike(steps: int = 3, atol: float = 1e-6) -> bool:
    """The gpu loop's `cached` placement (a cache of 30% of the rows, evicting every step) and `hbm`
    train equal tables and dense weights from one seed (`tiny`, Zipf ids repeated within a batch)."""

    shape = ["data.pooling=fixed", "data.lookups_per_table=6", "model.table_rows=400-300-500-200",
             "train.batch_size=32", "train.loop=gpu", "train.device=cpu"]  # fmt: skip
    runs = []
    for placement in (["train.placement=hbm"], ["train.placement=cached", "train.cache_fraction=0.3"]):
        cfg = config.load("tiny", [*shape, *placement])
        run = build(cfg)
        train(run, make_data(cfg).batches(), steps)
        runs.append(run)
    pairs = [*zip(*(r.model.sparse_arch.tables() for r in runs), strict=True)]
    pairs += [*zip(*(r.model.dense_parameters() for r in runs), strict=True)]
    return all(torch.allclose(x.detach().cpu(), y.detach().cpu(), rtol=0, atol=atol) for x, y in pairs)


def seeds_per_loop(records: pd.DataFrame, seeds: int) -> bool:
    """Whether every loop in the convergence records has a held-out evaluation from each of `seeds` seeds."""
    evals = records[records[col.KIND] == "eval"]
    counts = evals.groupby(col.VARIANT)["train.seed"].nunique()
    return bool(len(counts)) and bool((counts == seeds).all())


def fused_matches_reference(steps: int = 3) -> bool:
    """The optimized fp32 loop ends where the reference does (tiny, repeated ids, 1e-5)."""
    import torch

    cfg = config.load("tiny", ["data.pooling=fixed", "data.lookups_per_table=6", "model.table_rows=50-70-30-90"])
    optimized = config.Config.from_dict(cfg.to_dict())
    optimized.train.loop = Loop.OPTIMIZED
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


def none_failed(*frames: pd.DataFrame) -> bool:
    """Whether no record the frames' readers left out was a failed measurement (`readers.FAILED`)."""
    return not any(left_out(frame).get(FAILED) for frame in frames)
