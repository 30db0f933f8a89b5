"""Notebook 05's cache study: counted at steady state (after evictions begin), with the arch's own cache."""

import math

import pandas as pd

from dlrm_study.analysis import findings
from dlrm_study.analysis.placement import cache_hit_rates
from dlrm_study.plans.placement import cache_configs
from dlrm_study.plans.profiles import CACHE_BATCHES
from dlrm_study.studies import placement


def test_each_cache_is_counted_once_it_evicts(tmp_path):
    placement.measure_cache("smoke", tmp_path)
    rates = cache_hit_rates("smoke", tmp_path)
    most, timed = CACHE_BATCHES["smoke"]
    assert len(rates) == len(cache_configs("smoke")) and (rates["batches"] == timed).all()
    for r in rates.itertuples():
        if math.isnan(r.first_eviction_batch):  # never filled while warming: warmed as long as allowed
            assert r.warm_batches == most
        else:  # evicting for `timed` batches before the count began
            assert r.warm_batches == r.first_eviction_batch + timed
    assert (rates["evictions_per_batch"] > 0).all()  # the smoke caches are small enough to evict
    assert (rates["evictions_per_batch"] == rates["cache_evicted_rows"] / timed).all()
    assert rates["cache_hit_rate"].between(0, 1).all()
    placement.measure_cache("smoke", tmp_path)  # resumable: nothing counted twice
    again = cache_hit_rates("smoke", tmp_path)
    assert len(again) == len(rates)


def test_one_id_stream_gives_the_same_counts_as_each_cache_alone():
    """Feeding several caches one stream is the same as feeding each its own (the stream is the config's)."""
    cfgs = [c for c in cache_configs("smoke") if c.data.zipf_alpha == 0.8]
    together = placement.steady_hit_rates(cfgs, 20, 4)
    alone = [placement.steady_hit_rates([cfg], 20, 4)[0] for cfg in cfgs]
    assert together == alone


def rates(lru: float, lfu: float, evicted: float) -> pd.DataFrame:
    return pd.DataFrame([
        {"zipf_alpha": 1.05, "cache_fraction": 0.1, "cache_policy": policy, "cache_hit_rate": rate,
         "evictions_per_batch": evicted, "batches": 100}
        for policy, rate in (("lru", lru), ("lfu", lfu))
    ])  # fmt: skip


def test_the_finding_says_whether_the_policies_differ_at_steady_state():
    (same,) = findings.cache(rates(0.9421, 0.9424, 3000.0), "quick")
    assert "at steady state (3,000 and 3,000 rows evicted per batch" in same and "the same to within 0.1" in same
    (differ,) = findings.cache(rates(0.90, 0.93, 3000.0), "quick")
    assert "LFU higher by 3.0 points" in differ
    (cold,) = findings.cache(rates(0.924, 0.924, 0.0), "quick")
    assert "no row evicted" in cold and "cannot differ" in cold


def test_the_finding_reads_one_code_where_a_machine_has_two():
    """A machine measured at two codes has each point twice: the finding reads its newest code's (before, the
    two records of one policy failed the comparison in notebook 05)."""
    old = rates(0.90, 0.93, 3000.0).assign(code_fingerprint="aaaaaaaaaaaa", timestamp="2026-12-01T00:00:00")
    new = rates(0.9421, 0.9424, 3000.0).assign(code_fingerprint="bbbbbbbbbbbb", timestamp="2026-12-03T00:00:00")
    both = pd.concat([old, new], ignore_index=True).assign(machine="amd-epyc-f25m1s1/avx2/2cpu")
    (said,) = findings.cache(both, "quick")
    assert "the same to within 0.1" in said and "94.2%" in said
