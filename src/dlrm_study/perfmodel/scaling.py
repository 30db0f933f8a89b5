"""A performance model of hybrid-parallel DLRM training, calibrated on measured records.

Per rank and step, for W ranks, global batch B, T tables of L lookups, dimension D and P
dense parameters (table-wise sharding: the busiest rank holds ceil(T / W) tables):

    compute(W)   = overhead + dense * B / W + sparse * B * L * ceil(T / W)
    alltoall(W)  = 2 * [(W - 1) * latency + (W - 1) * (B / W) * ceil(T / W) * D * 4 / bandwidth]
                   (forward pooled embeddings, backward their gradients)
    allreduce(W) = 2 * (W - 1) * latency + 2 * (W - 1) / W * P * 4 / bandwidth    (ring)
    step(W)      = compute(W) + alltoall(W) + allreduce(W)

Assumptions, stated so they can be argued with: compute rates per rank are those measured
here (one core per rank), fitted by least squares to the compute-alone times of the records;
communication is not overlapped with compute (an upper bound on step time: the measured
runs overlap the forward all-to-all with the bottom MLP and DDP overlaps the allreduce with
backward); every rank has its own link of the stated bandwidth and latency, with no
contention; tables are placed whole, so beyond T ranks the busiest rank still looks up a
whole table for the global batch.
"""

import math
from dataclasses import dataclass

import pandas as pd
import torch

from dlrm_study import config
from dlrm_study.records import columns as col


@dataclass(frozen=True)
class Network:
    name: str
    bandwidth_gbps: float  # GB/s per rank, each direction
    latency_us: float


# The SC20 cluster's fabric class: 100 Gb/s Omni-Path, about 1-2 us per message.
OMNI_PATH_100G = Network("100 Gb/s link (12.5 GB/s), 2 us latency", 12.5, 2.0)

ASSUMPTIONS = (
    "Model, not measurement:\n"
    "- compute rates fitted on this\n  machine's 1-rank points\n  (one core per rank)\n"
    "- communication not overlapped\n  with compute\n"
    "- one link per rank, no contention\n"
    "- tables placed whole (table-wise)"
)


@dataclass(frozen=True)
class Shape:
    """What the model needs of a config."""

    batch: int
    tables: int
    lookups: int
    dim: int
    dense_params: int

    @classmethod
    def of(cls, record: pd.Series | dict) -> "Shape":
        """The shape of a record's config (its flattened `model.*` and `data.*` columns)."""
        keys = ("model.dense_features", "model.bottom_mlp", "model.table_rows", "model.embedding_dim", "model.top_mlp")
        model = config.load("tiny", [f"{key}={record[key]}" for key in keys]).model
        params = sum(fan_in * fan_out + fan_out for fan_in, fan_out in model.bottom_layers + model.top_layers)
        lookups = int(record["data.lookups_per_table"])
        return cls(int(record[col.BATCH_SIZE]), model.num_tables, lookups, model.embedding_dim, params)


@dataclass(frozen=True)
class Calibration:
    overhead_ms: float
    dense_ms_per_sample: float
    sparse_ms_per_lookup: float


def work(shape: Shape, world: int, batch: int | None = None) -> tuple[float, float]:
    """(samples, lookups) the busiest rank computes per step."""
    batch = batch or shape.batch
    return batch / world, batch * shape.lookups * math.ceil(shape.tables / world)


def fit(records: pd.DataFrame) -> Calibration:
    """Least squares of compute-alone time on (1, samples, lookups) per rank; rates kept non-negative.

    Fit it on single-rank records (`records[records.world_size == 1]`) and `check` it on the
    others: then the 2-rank points test the model instead of shaping it.
    """
    rows = [(1.0, *work(Shape.of(r), int(r[col.WORLD_SIZE]))) for _, r in records.iterrows()]
    a = torch.tensor(rows, dtype=torch.float64)
    y = torch.tensor(records[col.COMPUTE_MS_MEDIAN].to_numpy(), dtype=torch.float64)
    coef = torch.linalg.lstsq(a, y.unsqueeze(1)).solution.squeeze(1).clamp(min=0).tolist()
    return Calibration(*coef)


def step_ms(cal: Calibration, shape: Shape, world: int, net: Network, batch: int | None = None) -> dict[str, float]:
    """Predicted per-step times of one rank (ms): compute, all-to-all, allreduce, total."""
    batch = batch or shape.batch
    samples, lookups = work(shape, world, batch)
    compute = cal.overhead_ms + cal.dense_ms_per_sample * samples + cal.sparse_ms_per_lookup * lookups
    bandwidth = net.bandwidth_gbps * 1e6  # bytes per ms
    latency = net.latency_us / 1e3
    pooled = samples * math.ceil(shape.tables / world) * shape.dim * 4
    alltoall = 2 * ((world - 1) * latency + (world - 1) * pooled / bandwidth)
    allreduce = 2 * (world - 1) * latency + 2 * (world - 1) / world * shape.dense_params * 4 / bandwidth
    return {
        "compute_ms": compute,
        "alltoall_ms": alltoall,
        "allreduce_ms": allreduce,
        "step_ms": compute + alltoall + allreduce,
    }


def project(cal: Calibration, shape: Shape, net: Network, ranks: list[int], per_rank_batch: int) -> pd.DataFrame:
    """Strong scaling (global batch `shape.batch` fixed) and weak scaling (`per_rank_batch` fixed) over `ranks`.

    Efficiencies are against one rank at the same work: strong against one rank at the global
    batch, weak against one rank at the per-rank batch (as the measured points define them).
    """
    rows = []
    for mode in ("strong", "weak"):
        one = shape.batch if mode == "strong" else per_rank_batch
        base_rate = one / step_ms(cal, shape, 1, net, one)["step_ms"] * 1e3
        for world in ranks:
            batch = shape.batch if mode == "strong" else per_rank_batch * world
            times = step_ms(cal, shape, world, net, batch)
            rate = batch / times["step_ms"] * 1e3
            speedup = rate / base_rate
            rows.append(
                {
                    "mode": mode,
                    "ranks": world,
                    "batch": batch,
                    **times,
                    col.SAMPLES_PER_S: rate,
                    "speedup": speedup,
                    "efficiency": speedup / world,
                }
            )
    return pd.DataFrame(rows)


def fit_network(records: pd.DataFrame) -> Network:
    """This machine's own link (gloo between processes), from the collectives timed alone at 2 ranks.

    At two ranks the model's terms are: one all-to-all = latency + bytes / bandwidth, one ring
    allreduce = 2 latency + bytes / bandwidth; the two measured medians fix both unknowns (the
    latency is kept non-negative).
    """
    two = records[records[col.WORLD_SIZE] == 2]
    if two.empty:
        raise ValueError("no 2-rank records: the link cannot be measured")
    a2a_ms, a2a_bytes = two["comm_alltoall_ms"].median(), two["comm_alltoall_bytes"].median()
    ar_ms, ar_bytes = two["comm_allreduce_ms"].median(), two["comm_allreduce_bytes"].median()
    a = torch.tensor([[1.0, a2a_bytes], [2.0, ar_bytes]], dtype=torch.float64)
    latency_ms, ms_per_byte = torch.linalg.solve(a, torch.tensor([a2a_ms, ar_ms], dtype=torch.float64)).tolist()
    if latency_ms < 0 or ms_per_byte <= 0:
        latency_ms, ms_per_byte = 0.0, (a2a_ms + ar_ms) / (a2a_bytes + ar_bytes)
    return Network("gloo between 2 processes here (measured)", 1 / ms_per_byte / 1e6, latency_ms * 1e3)


def check(cal: Calibration, records: pd.DataFrame, net: Network) -> pd.DataFrame:
    """The model against each measured point (medians of its repeats): compute alone, and the whole step.

    The model's step adds its terms with no overlap, so it bounds the measured step from above
    where the measured runs overlap communication with compute.
    """
    keys = [col.WORLD_SIZE, col.BATCH_SIZE, "data.lookups_per_table"]
    points = records.groupby(keys)[[col.COMPUTE_MS_MEDIAN, col.MS_MEDIAN]].median().reset_index()
    first = records.groupby(keys).head(1).sort_values(keys)
    model = [step_ms(cal, Shape.of(r), int(r[col.WORLD_SIZE]), net) for _, r in first.iterrows()]
    points["model_compute_ms"] = [m["compute_ms"] for m in model]
    points["model_step_ms"] = [m["step_ms"] for m in model]
    points["compute_error"] = points["model_compute_ms"] / points[col.COMPUTE_MS_MEDIAN] - 1
    points["step_error"] = points["model_step_ms"] / points[col.MS_MEDIAN] - 1
    return points
