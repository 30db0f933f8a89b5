"""The share of updates plain bf16 would round away: exact against bf16's own rounding, recorded per window and
weight group, resumable, and read back into the table notebook 07 prints."""

import pandas as pd
import torch

from dlrm_study.analysis.bf16_rounding import control_words, rounding_records, rounding_table, rounding_words
from dlrm_study.analysis.convergence import FAILS, HOLDS, UNDECIDED, AccuracyJudgement
from dlrm_study.records import store
from dlrm_study.studies import bf16_rounding as br


def test_half_a_spacing_is_the_binades_gap_halved():
    values = torch.tensor([1.0, 1.5, 0.75, -0.75, 0.0])
    assert br.half_spacing(values).tolist() == [2**-8, 2**-8, 2**-9, 2**-9, 0.0]


def test_an_update_below_half_a_spacing_is_lost_and_one_above_is_kept():
    before = torch.tensor([1.0, 1.0, 1.0, 0.75])
    after = before + torch.tensor([0.001, 0.01, 0.0, -0.001])  # half a spacing: 2^-8 at 1.0, 2^-9 at 0.75
    found = br.against_spacing(before, after)
    assert found[br.MOVED] == 3  # the unchanged weight is not counted
    assert abs(found[br.ROUNDED_AWAY] - 2 / 3) < 1e-6  # 0.001 at 1.0 and at 0.75 (under 2^-9 = 0.00195) are lost
    ratios = sorted([0.001 / 2**-8, 0.01 / 2**-8, 0.001 / 2**-9])
    assert abs(found[br.MEDIAN_OVER_HALF] - ratios[1]) < 1e-5


def test_the_lost_share_is_bf16s_own_rounding():
    g = torch.Generator().manual_seed(0)
    before = (torch.rand(10_000, generator=g) - 0.5) * 4
    after = before + (torch.rand(10_000, generator=g) - 0.5) * before.abs() * 2**-6
    held = before.bfloat16()
    lost = ((held.float() + (after - before)).bfloat16() == held).float().mean().item()
    assert 0.1 < lost < 0.9 and br.against_spacing(before, after)[br.ROUNDED_AWAY] == lost


def follow_in_bf16(start: torch.Tensor, updates: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32's weights after `updates`, and plain bf16's along them (as `rounding_rows` follows them)."""
    plain = start.bfloat16().float()
    for u in updates:
        plain = (plain + u).bfloat16().float()
    return start + sum(updates), plain


def test_plain_bf16_keeps_movement_made_of_updates_above_half_a_spacing():
    start = torch.ones(1000)
    end, plain = follow_in_bf16(start, [torch.full((1000,), 2**-6)] * 10)  # 4 half spacings at 1.0, exact in bf16
    assert br.kept(start, end, plain) == 1.0


def test_plain_bf16_keeps_no_movement_made_of_steady_updates_below_half_a_spacing():
    start = torch.ones(1000)
    end, plain = follow_in_bf16(start, [torch.full((1000,), 2**-10)] * 10)  # a quarter of half a spacing, 10 times
    assert br.kept(start, end, plain) == 0.0  # fp32 moved 10 x 2^-10; bf16 rounded every update away


def test_noise_as_wide_as_half_a_spacing_dithers_the_rounding_so_movement_is_kept():
    """A steady drift below half a spacing, with noise on each update: at noise of half a spacing most single
    updates still round away, yet the rounding is unbiased on average and plain bf16 keeps the drift; at a quarter
    of a spacing it does not."""
    g = torch.Generator().manual_seed(0)
    start = torch.full((100_000,), 1.5)  # mid-binade: half a spacing is 2^-8 on both sides

    def lost_and_kept(noise: float) -> tuple[float, float]:
        updates = [2**-10 + torch.randn(100_000, generator=g) * noise for _ in range(10)]
        end, plain = follow_in_bf16(start, updates)
        return br.against_spacing(start, start + updates[0])[br.ROUNDED_AWAY], br.kept(start, end, plain)

    lost, kept = lost_and_kept(2**-8)
    assert lost > 0.6 and 0.95 < kept < 1.05
    lost, kept = lost_and_kept(2**-9)
    assert lost > 0.9 and kept < 0.7


def test_the_study_records_each_window_and_group_and_resumes(tmp_path):
    br.run_rounding("smoke", tmp_path)
    frame = rounding_records("smoke", tmp_path)
    # two groups, a record per window of 10 steps: 20 steps, and 40 at small steps
    assert set(frame[br.GROUP]) == set(br.GROUPS) and len(frame) == 2 * (2 + 4)
    assert frame[br.ROUNDED_AWAY].between(0, 1).all() and (frame[br.MOVED] > 0).all()
    assert frame[br.MOVEMENT_KEPT].between(-0.5, 1.5).all()  # a projection: about 1 kept, 0 frozen
    before = len(store.load(tmp_path / br.RECORDS))
    br.run_rounding("smoke", tmp_path)  # resumed: already recorded at this code
    assert len(store.load(tmp_path / br.RECORDS)) == before
    table = rounding_table(frame)
    assert list(table.index) == [(p, g) for p in ("tiny", "tiny-small-steps") for g in ("embeddings", "mlp")]
    assert rounding_words(table)[0].startswith("tiny: at step 20, plain bf16 would round away")
    assert rounding_words(table)[1].startswith("tiny-small-steps: at step 40,")  # its own last step: twice as long
    assert not any("nan" in line for line in rounding_words(table))
    assert "its weights keep at least" in rounding_words(table)[0]
    assert rounding_words(table.assign(**{"movement kept, least": float("nan")}))[0].endswith("updates")  # old


def test_nothing_measured_reads_as_not_measured(tmp_path):
    assert rounding_table(rounding_records("smoke", tmp_path)).empty
    assert rounding_words(pd.DataFrame())[0].startswith("not measured")


def test_the_control_at_small_steps_says_whether_the_benchmark_tells_the_two_apart():
    assert "cannot tell Split-SGD" in control_words(AccuracyJudgement(UNDECIDED, HOLDS, HOLDS))
    failed = control_words(AccuracyJudgement(HOLDS, FAILS, FAILS))
    assert "tells Split-SGD from plain bf16" in failed and "own learning rate" not in failed
    assert "own learning rate plain bf16 SGD kept" in control_words(AccuracyJudgement(HOLDS, HOLDS, FAILS))
    assert "nothing yet" in control_words(AccuracyJudgement(UNDECIDED, UNDECIDED))
