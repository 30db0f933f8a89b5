"""H4 is judged on the per-repeat recovery (c - h) / (1 - h) with its own interval, not on the ends of host's
and cached's intervals: host and cached move together within a repeat, and the recovery keeps that pairing."""

import math

import pandas as pd
from tests.test_verdicts import GPU, PATTERN, placements, ratios, verdict

from dlrm_study.analysis.evidence import Evidence
from dlrm_study.claims import h4

H4_RECOVERY = h4.H4_RECOVERY


def cached_for(host: list[float], won: float, jitter: float = 0.01) -> list[float]:
    """cached/hbm per repeat that wins back `won` (+- jitter) of what host's repeat lost."""
    return [h + (won + jitter * z) * (1 - h) for h, z in zip(host, PATTERN, strict=False)]


def test_h4_reads_the_recovery_per_repeat() -> None:
    """Host spread wide ([0.30, 0.83]) and the cache winning back 80% of each repeat's loss: the ends of the two
    intervals overlap (cached's low end, 0.86, is short of what host's high end needs, 0.92), the per-repeat
    recovery is 80% +- 1%. (Fails before: the ends' comparison said inconclusive.)"""
    host = ratios(0.5, 0.3)
    v = verdict("H4", GPU, gpu_placements=placements(host, cached_for(host, 0.8)))
    assert v.status == "reproduced", v.evidence
    assert math.isclose(v.numbers["recovery"].center, 0.8, abs_tol=0.01)


def test_h4_recovery_short_of_half_is_not_reproduced() -> None:
    host = ratios(0.5, 0.3)
    v = verdict("H4", GPU, gpu_placements=placements(host, cached_for(host, 0.4)))
    assert v.status == "not reproduced", v.evidence


def test_h4_recovery_across_half_is_inconclusive() -> None:
    host = ratios(0.5, 0.3)
    v = verdict("H4", GPU, gpu_placements=placements(host, cached_for(host, H4_RECOVERY, jitter=0.2)))
    assert v.status == "inconclusive", v.evidence


def test_h4_recovery_pairs_host_and_cached_of_one_repeat_only() -> None:
    """A run with cached and hbm but no host repeat pairs cached, and adds nothing to the recovery."""
    host = ratios(0.5, 0.3)
    frame = placements(host, cached_for(host, 0.8))
    lone = frame[(frame["run_id"] == "r1-0") & (frame["variant"] != "gpu-host")].assign(run_id="lone")
    found = h4.h4_pairs(Evidence(gpu_placements=pd.concat([frame, lone], ignore_index=True)))
    assert len(found["cached"]) == len(found["host"]) + 2  # the lone run's warm-up and repeat pair cached
    assert len(found["recovery"]) == len(found["host"])


def test_h4_refutation_is_an_or_read_at_97_5_percent() -> None:
    """Recovery 39% +- 10% per repeat over 5 runs: its 95% interval ends at 48.8%, below 50%, its 97.5% one at
    51.3%. "Not reproduced" is an OR of two tests, each at 1 - 0.05/2: so inconclusive (uncorrected: refuted)."""
    host = ratios(0.5, 0.3)
    v = verdict("H4", GPU, gpu_placements=placements(host, cached_for(host, 0.39, jitter=0.1)))
    assert 0.48 < v.numbers["recovery"].high < H4_RECOVERY
    assert v.status == "inconclusive", v.evidence


def test_a_repeat_that_mixed_triton_and_its_stand_ins_is_refused() -> None:
    """Planted: in one run, hbm ran Triton and cached the PyTorch stand-ins (a fallback at some shapes only). Its
    repeats pair no placement: they are left out whole and counted under their reason, so cached over hbm never
    compares one code with another. The host placement's own path (the fused CPU kernels) mixes nothing."""
    from dlrm_study.analysis.readers import MIXED_KERNELS

    host = ratios(0.5, 0.3)
    frame = placements(host, cached_for(host, 0.8)).assign(kernel_path="triton")
    frame.loc[frame["variant"] == "gpu-host", "kernel_path"] = "cpp"
    clean = verdict("H4", GPU, gpu_placements=frame)
    mixed = frame["run_id"].eq("r1-0") & frame["variant"].eq("gpu-cached")
    planted = frame.assign(kernel_path=frame["kernel_path"].mask(mixed, "torch"))
    refused = verdict("H4", GPU, gpu_placements=planted)
    left = refused.left_out.get(MIXED_KERNELS, 0)
    timed = frame["run_id"].eq("r1-0") & frame["repeat"].ne(0)  # its repeat 0 is a warm-up, counted as one
    assert left == int(timed.sum()) == 3 and MIXED_KERNELS not in clean.left_out
    assert refused.numbers["recovery"].n == clean.numbers["recovery"].n - 1  # one repeat fewer, the rest as before
