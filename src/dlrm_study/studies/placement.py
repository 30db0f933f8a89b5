"""Notebook 05 measured (`plans.placement`: its points): the cache of the `cached` placement, and local against
remote tables."""

import itertools
from pathlib import Path

from dlrm_study import config
from dlrm_study.data import make_data
from dlrm_study.distributed.processes import launch_fields
from dlrm_study.measure import context, runner
from dlrm_study.model.tables.base import TableSpec, counters
from dlrm_study.model.tables.cached import CachedSparseArch
from dlrm_study.plans.placement import (
    CACHE_RECORDS,
    REMOTE_BASE,
    REMOTE_RECORDS,
    cache_configs,
    remote_config,
    steady_variant,
)
from dlrm_study.plans.profiles import CACHE_BATCHES, RANKS, RUNS
from dlrm_study.records import columns as col
from dlrm_study.records import store
from dlrm_study.records.record import make_record

# --- the cache: hit rate against id skew ---------------------------------------------------------


def measure_cache(profile: str, out: Path) -> None:
    """Hit rate of the `cached` placement's cache (LRU, LFU) at steady state, against Zipf skew and cache size.

    The ids of `mlperf-scaled` (26 tables, batch 2,048; `tiny` when smoke), fed to the
    placement's own cache book-keeping on the CPU: a hit rate depends on the id stream and
    the policy, not on the device, so it is measured here; what a miss costs is the GPU's.
    Each point warms its cache until rows are evicted (`steady_hit_rates`), then counts.
    Resumable: points already recorded (`records.store.resume_key`) are skipped.
    """
    path, study = out / CACHE_RECORDS, f"cache-hit-rate-{profile}"
    stored = store.stored_keys(path)
    todo = []
    for cfg in cache_configs(profile):
        if store.key_here(cfg, steady_variant(cfg)) in stored:
            context.current().tally(reused=1)
        else:
            todo.append(cfg)
    for _, same_ids in itertools.groupby(todo, key=lambda cfg: cfg.data.zipf_alpha):
        same_ids = list(same_ids)
        context.current().tally(measured=len(same_ids))
        for cfg, fields in zip(same_ids, steady_hit_rates(same_ids, *CACHE_BATCHES[profile]), strict=True):
            store.append(path, make_record(study, fields, cfg, variant=steady_variant(cfg), repeat=0))
            rate = float(fields.get("cache_hit_rate", float("nan")))
            runner.say(f"{study}: {steady_variant(cfg)}, Zipf {cfg.data.zipf_alpha}: hit rate {rate:.3f}")


def steady_hit_rates(cfgs: list[config.Config], warm: int, timed: int) -> list[dict[str, object]]:
    """Each config's cache fed one id stream (the configs differ only in cache size and policy).

    A cache warms until it has evicted rows for `timed` batches (the policy's choices, not the
    first uses of rows, then decide its hits), or for `warm` batches where it never fills (it
    holds every row the ids use); then its hits and evictions are counted over `timed` batches.
    """
    import torch

    caches = [cache_of(cfg) for cfg in cfgs]
    first_eviction: list[int | None] = [None] * len(cfgs)
    counting_from: list[int | None] = [None] * len(cfgs)
    done: list[dict[str, object] | None] = [None] * len(cfgs)
    starts = caches[0].table_starts
    for i, batch in enumerate(make_data(cfgs[0]).batches()):
        ids = torch.cat([table_ids + s for table_ids, s in zip(batch.indices, starts, strict=True)])
        for k, arch in enumerate(caches):
            if done[k] is not None:
                continue
            arch.make_resident(ids)
            if counting_from[k] is None:
                if first_eviction[k] is None and int(arch.evictions) > 0:
                    first_eviction[k] = i
                settled = first_eviction[k] is not None and i - first_eviction[k] + 1 >= timed
                if settled or i + 1 >= warm:
                    counters(arch)  # the counts start now
                    counting_from[k] = i + 1
            elif i + 1 - counting_from[k] == timed:
                done[k] = steady_fields(cfgs[k], counters(arch), counting_from[k], first_eviction[k], timed)
        if all(fields is not None for fields in done):
            return done
    raise AssertionError("the batch stream ended")  # synthetic streams do not end


def cache_of(cfg: config.Config):
    """The `cached` placement's cache for the config, one column per row: which rows are resident
    does not depend on the dimension."""
    import torch

    t = cfg.train
    spec = TableSpec(tuple(cfg.model.table_rows), dim=1, lr=t.learning_rate)
    return CachedSparseArch(spec, torch.Generator(), t.cache_fraction, t.cache_policy)


def steady_fields(
    cfg: config.Config, counted: dict[str, float], warm: int, first_eviction: int | None, timed: int
) -> dict[str, object]:
    return {
        "zipf_alpha": cfg.data.zipf_alpha,
        "cache_fraction": cfg.train.cache_fraction,
        "cache_policy": cfg.train.cache_policy,
        "batches": timed,
        "warm_batches": warm,
        "first_eviction_batch": first_eviction if first_eviction is not None else float("nan"),
        **counted,
        "evictions_per_batch": counted["cache_evicted_rows"] / timed,
    }


# --- local against remote tables ------------------------------------------------------------------


def measure_remote(profile: str, out: Path) -> runner.Counts:
    """The optimized fp32 loop with its tables local, and on one parameter server (RPC), interleaved.

    Each process gets one core (the trainer and the server one each), so the remote setup has a
    second core for its tables: the comparison is of placements, not of equal hardware.
    """
    p, cfg = RANKS[profile], remote_config(profile)
    base = "tiny" if profile == "smoke" else "dlrm-benchmark"

    def measure_one(task: runner.Task) -> dict[str, object]:
        args = ["bench", "--config", base, "--loop", "optimized", "--steps", str(p.steps)]
        args += ["--warmup", str(p.warmup), "--profile-steps", "0", "--roofline", "off"]
        args += [item for o in REMOTE_BASE[profile] for item in ("--set", o)]
        if task.variant == "remote":  # a trainer and one parameter server
            return {**launch_fields(2, [*args, "--remote-tables"]), col.BUILDS: "every repeat (own processes)"}
        return {**launch_fields(0, args), col.BUILDS: "every repeat (own process)"}

    one_core = {"threads": lambda _: 1}  # a core per process
    points = [(cfg.name, {"local": cfg, "remote": cfg})]
    tasks = runner.schedule(points, p.repeats, runner.machine_of, **one_core, runs=RUNS[profile])
    return runner.run(tasks, measure_one, out / REMOTE_RECORDS, f"remote-vs-local-{profile}", record_errors=False,
                      progress=False)  # fmt: skip
