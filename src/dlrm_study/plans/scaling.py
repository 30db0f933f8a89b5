"""The scaling study as data (`studies.scaling` measures it): 1 and 2 ranks under torchrun, one core per rank.

Points (all on `SCALING_BASE`, named `dlrm-benchmark-scaled`): strong scaling keeps the
global batch (1 and 2 ranks at batch B, measured side by side in each repeat); weak scaling
keeps the batch per rank (1 rank at B / 2 against 2 ranks at B); and one more single-rank
point with twice the lookups lets the model tell dense work from sparse work. Every
measurement is one `dlrm-study bench --distributed` process group, through `measure.runner`:
repeats, interleaved, resumable, one record each (machine key at one thread: one core per rank).
"""

from dlrm_study import config
from dlrm_study.plans.profiles import RANKS
from dlrm_study.plans.sweep import Planned

SCALING_BASE = ["name=dlrm-benchmark-scaled", "model.table_rows=8x100000", "data.lookups_per_table=20"]
SMOKE_BASE = ["model.table_rows=4x1000", "data.lookups_per_table=4"]
BATCH = {"smoke": 64, "quick": 1024, "full": 2048}  # the global batch B


def ranks_variant(ranks: int) -> str:
    return f"{ranks} rank" + ("s" if ranks > 1 else "")


def preset(profile: str) -> str:
    return "tiny" if profile == "smoke" else "dlrm-benchmark"


def points(profile: str) -> list[tuple[str, dict[int, list[str]]]]:
    """(label, {ranks: overrides}) of every point."""
    batch, p = BATCH[profile], RANKS[profile]
    base = SMOKE_BASE if profile == "smoke" else SCALING_BASE
    lookups = int(base[-1].split("=")[1])
    common = [*base[:-1], "train.loop=optimized", f"train.steps={p.steps}"]
    at = [*common, f"data.lookups_per_table={lookups}"]
    return [
        (f"batch {batch}", {1: [*at, f"train.batch_size={batch}"], 2: [*at, f"train.batch_size={batch}"]}),
        (f"batch {batch // 2}", {1: [*at, f"train.batch_size={batch // 2}"]}),
        (f"batch {batch}, {2 * lookups} lookups",
         {1: [*common, f"data.lookups_per_table={2 * lookups}", f"train.batch_size={batch}"]}),
    ]  # fmt: skip


def plan(profile: str) -> list[Planned]:
    return [
        (label, {ranks_variant(r): config.load(preset(profile), overrides) for r, overrides in by_ranks.items()})
        for label, by_ranks in points(profile)
    ]
