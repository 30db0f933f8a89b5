"""Notebook 05: the cache of the `cached` placement, placements on a GPU, local against remote tables."""

import itertools
from pathlib import Path

import pandas as pd

from dlrm_study import config, results
from dlrm_study.errors import UsageError
from dlrm_study.measure import runner
from dlrm_study.studies.profiles import CACHE_ALPHAS, CACHE_BATCHES, CACHE_FRACTIONS, RANKS
from dlrm_study.studies.sensitivity import GPU_RECORDS

# --- the cache: hit rate against id skew ---------------------------------------------------------


def cache_hit_rates(profile: str, out: Path, measure: bool = True, machine: str | None = "this") -> pd.DataFrame:
    """Hit rate of the `cached` placement's cache (LRU, LFU) against Zipf skew and cache size.

    The ids of `mlperf-scaled` (26 tables, batch 2,048; `tiny` when smoke), fed to the
    placement's own cache book-keeping on the CPU: a hit rate depends on the id stream and
    the policy, not on the device, so it is measured here; what a miss costs is the GPU's.
    Resumable: points already recorded (`results.resume_key`) are skipped.
    """
    path, study = out / "cache.csv", f"cache-hit-rate-{profile}"
    here = results.machine_key()
    configs = cache_configs(profile)
    if measure:
        stored = results.stored_keys(path)
        for cfg in configs:
            variant = f"cached-{cfg.train.cache_policy}"
            if results.resume_key(cfg.hash(), variant, here, 0, results.versions()) in stored:
                runner.tally(reused=1)
                continue
            runner.tally(measured=1)
            fields = hit_rate(cfg, *CACHE_BATCHES[profile])
            results.append(path, results.record(study, fields, cfg, variant=variant, repeat=0))
    if not path.exists():
        raise UsageError(f"no records yet: {path} does not exist (run with measure=True)")
    frame = results.load(path)
    frame = frame[frame["config_hash"].isin({cfg.hash() for cfg in configs})]
    if machine is not None:
        frame = frame[frame["machine"] == (here if machine == "this" else machine)]
    return frame.sort_values("timestamp").drop_duplicates(["config_hash", "machine"], keep="last")


def cache_configs(profile: str) -> list[config.Config]:
    base = "tiny" if profile == "smoke" else "mlperf-scaled"
    grid = itertools.product(CACHE_ALPHAS[profile], CACHE_FRACTIONS[profile], ("lru", "lfu"))
    return [
        config.load(
            base,
            [
                "data.id_distribution=zipf",
                "train.loop=gpu",
                "train.placement=cached",
                f"data.zipf_alpha={alpha}",
                f"train.cache_fraction={fraction}",
                f"train.cache_policy={policy}",
            ],
        )
        for alpha, fraction, policy in grid
    ]


def hit_rate(cfg: config.Config, warm: int, timed: int) -> dict[str, object]:
    """The cache's hit rate over `timed` batches of the config's ids, after `warm` batches."""
    import torch

    from dlrm_study.data import make_data
    from dlrm_study.embeddings.cached import CachedSparseArch

    t = cfg.train
    # One column per row is enough: which rows are resident does not depend on the dimension.
    arch = CachedSparseArch(
        cfg.model.table_rows, 1, t.learning_rate, torch.Generator(), "sgd", torch.device("cpu"),
        t.cache_fraction, t.cache_policy,
    )  # fmt: skip
    for i, batch in enumerate(itertools.islice(make_data(cfg).batches(), warm + timed)):
        if i == warm:
            arch.stats()
        arch.make_resident(torch.cat([ids + s for ids, s in zip(batch.indices, arch.table_starts, strict=True)]))
    return {
        "zipf_alpha": cfg.data.zipf_alpha,
        "cache_fraction": t.cache_fraction,
        "cache_policy": t.cache_policy,
        "batches": timed,
        **arch.stats(),
    }


# --- placements on a GPU (records of the GPU script) ------------------------------------------------


def placement_records(out: Path, study: str) -> pd.DataFrame:
    """One of the GPU script's placement sweeps (gpu-placements, -skew, -size), `x` its knob."""
    path = out / GPU_RECORDS
    frame = results.load(path) if path.exists() else pd.DataFrame()
    if frame.empty or "study" not in frame:
        return frame
    # The skew sweep leaves out Zipf 1.05: gpu-placements measured that point, the same config.
    studies = {study, "gpu-placements"} if study.endswith("-skew") else {study}
    frame = frame[frame["study"].isin(studies) & frame["error"].isna()].copy()
    if study.endswith("-skew"):
        skew = frame[frame["study"] == study]
        frame = frame[frame["model.table_rows"].isin(set(skew["model.table_rows"]))]
    frame = frame.sort_values("timestamp").drop_duplicates(["variant", "config_hash", "machine", "repeat"], keep="last")
    if study.endswith("-skew"):
        frame["x"], frame["knob"] = frame["data.zipf_alpha"], "Zipf exponent of the ids"
    elif study.endswith("-size"):
        frame["x"] = frame["model.table_rows"].map(lambda rows: float(str(rows).split("-")[0]))
        frame["knob"] = "rows per table"
    return frame


# --- local against remote tables ------------------------------------------------------------------

REMOTE_BASE = {
    "smoke": ["model.table_rows=4x1000", "train.batch_size=32"],
    "quick": ["name=dlrm-benchmark-scaled", "model.table_rows=8x100000", "data.lookups_per_table=20",
              "train.batch_size=1024"],
    "full": ["model.table_rows=8x1000000", "data.lookups_per_table=20", "train.batch_size=2048"],
}  # fmt: skip
TABLES = {"local": "local", "remote": "remote (1 server)"}


def remote_vs_local(profile: str, out: Path, measure: bool = True, machine: str | None = "this") -> pd.DataFrame:
    """The optimized fp32 loop with its tables local, and on one parameter server (RPC), interleaved.

    Each process gets one core (the trainer and the server one each), so the remote setup has a
    second core for its tables: the comparison is of placements, not of equal hardware.
    """
    from dlrm_study.distributed.scaling import launch_fields

    path, study = out / "remote.csv", f"remote-vs-local-{profile}"
    p = RANKS[profile]
    base = "tiny" if profile == "smoke" else "dlrm-benchmark"
    cfg = config.load(base, [*REMOTE_BASE[profile], "train.loop=optimized", f"train.steps={p.steps}"])
    here = results.machine_key(1)  # one thread per process
    if measure:

        def measure_one(task: runner.Task) -> dict[str, object]:
            args = ["bench", "--config", base, "--loop", "optimized", "--steps", str(p.steps)]
            args += ["--warmup", str(p.warmup), "--profile-steps", "0", "--roofline", "off"]
            args += [item for o in REMOTE_BASE[profile] for item in ("--set", o)]
            if task.variant == "remote":  # a trainer and one parameter server
                return {**launch_fields(2, [*args, "--remote-tables"]), "builds": "every repeat (own processes)"}
            return {**launch_fields(0, args), "builds": "every repeat (own process)"}

        tasks = runner.schedule([(cfg.name, {"local": cfg, "remote": cfg})], p.repeats, lambda _: here)
        runner.run(tasks, measure_one, path, study, record_errors=False, progress=False)
    if not path.exists():
        raise UsageError(f"no records yet: {path} does not exist (run with measure=True)")
    frame = results.load(path)
    frame = frame[(frame["config_hash"] == cfg.hash()) & frame["variant"].isin(list(TABLES))].copy()
    if machine is not None:
        frame = frame[frame["machine"] == (here if machine == "this" else machine)]
    frame["tables"] = frame["variant"].map(TABLES)
    return frame
