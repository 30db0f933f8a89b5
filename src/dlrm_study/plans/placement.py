"""Notebook 05's plans: the cache study's points (id skew, cache size, policy) and the config measured with local
and with remote tables (`studies.placement` measures them)."""

import itertools

from dlrm_study import config
from dlrm_study.plans.profiles import CACHE_ALPHAS, CACHE_FRACTIONS, RANKS

CACHE_RECORDS, REMOTE_RECORDS = "cache.csv", "remote.csv"


def steady_variant(cfg: config.Config) -> str:
    """`cached-lru-steady`: the steady-state count (earlier records, `cached-lru`, counted a cold cache)."""
    return f"cached-{cfg.train.cache_policy}-steady"


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


REMOTE_BASE = {
    "smoke": ["model.table_rows=4x1000", "train.batch_size=32"],
    "quick": ["name=dlrm-benchmark-scaled", "model.table_rows=8x100000", "data.lookups_per_table=20",
              "train.batch_size=1024"],
    "full": ["model.table_rows=8x1000000", "data.lookups_per_table=20", "train.batch_size=2048"],
}  # fmt: skip
TABLES = {"local": "local", "remote": "remote (1 server)"}


def remote_config(profile: str) -> config.Config:
    """The config measured with local and with remote tables."""
    base = "tiny" if profile == "smoke" else "dlrm-benchmark"
    return config.load(base, [*REMOTE_BASE[profile], "train.loop=optimized", f"train.steps={RANKS[profile].steps}"])
