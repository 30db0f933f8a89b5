"""The roofline bound split by operator, and the table of each operator's time against it (notebook 02)."""

import pandas as pd
import pytest

from dlrm_study import config
from dlrm_study.analysis import operators
from dlrm_study.measure.bench import bench
from dlrm_study.perfmodel import roofline
from dlrm_study.perfmodel.operator_bounds import BEATEN, BOUNDED, beaten, operator_bounds
from dlrm_study.records import columns as col


def limits(cfg: config.Config) -> dict[str, float]:
    """Every GEMM at 100 GFLOP/s, gathers at 4 GB/s, updates at 2 GB/s."""
    fake = {"gemm_fp32_gflops": 100.0}
    for access in roofline.accesses(cfg).values():
        fake[access.key] = 4.0 if access.kind == "gather" else 2.0
    for layer in roofline.layer_shapes(cfg):
        for gemm_pass in roofline.GEMM_PASSES:
            fake[roofline.layer_key("fp32", layer, gemm_pass)] = 100.0
    return fake


@pytest.mark.parametrize("preset", ["dlrm-benchmark", "tiny", "mlperf-scaled"])
def test_operator_bounds_add_up_to_the_bound(preset):
    cfg = config.load(preset, ["train.loop=optimized"])
    parts, whole = operator_bounds(cfg, limits(cfg)), roofline.bound_ms(cfg, limits(cfg))
    assert set(parts) == {col.bound_column(name) for name in BOUNDED}
    assert sum(parts.values()) == pytest.approx(whole["roofline_ms"])
    mlp = sum(parts[col.bound_column(n)] for n in ("bottom_mlp", "interaction", "top_mlp", "dense_backward"))
    assert mlp == pytest.approx(whole["roofline_mlp_ms"])


def test_dlrm_benchmark_operator_bounds_by_hand():
    cfg = config.preset("dlrm-benchmark")
    parts = operator_bounds(cfg, limits(cfg))
    # bottom 512-512-64 forward at 100 GFLOP/s, batch 2048
    assert parts[col.bound_column("bottom_mlp")] == pytest.approx(2 * 2048 * (512 * 512 + 512 * 64) / 100e9 * 1e3)
    ids = 2048 * 8 * 100
    assert parts[col.bound_column("embedding_forward")] == pytest.approx(ids * 256 / 4e9 * 1e3)
    assert parts[col.bound_column("embedding_backward_update")] == pytest.approx(ids * 512 / 2e9 * 1e3)


def test_bench_records_carry_operator_bounds(tiny):
    tiny.train.loop = "optimized"
    fields = bench(tiny, steps=2, warmup=1, profile_steps=1, progress=False, limits=limits(tiny))
    assert all(fields[col.bound_column(name)] > 0 for name in BOUNDED)
    assert isinstance(fields[BEATEN], str)  # the parts faster than their bound, "" for none


def records(embedding_ms: list[float], mlp_ms: float = 10.0) -> pd.DataFrame:
    rows = []
    for repeat, ms in enumerate(embedding_ms):
        row = {col.MACHINE: "m", col.CONFIG_NAME: "c", col.VARIANT: "v", col.REPEAT: repeat}
        for name in BOUNDED:
            row[col.op_column(name)] = ms if name.startswith("embedding") else mlp_ms / 4
            row[col.bound_column(name)] = 4.0 if name.startswith("embedding") else 2.0
        row[col.MS_MEDIAN], row[col.ROOFLINE_MS] = 2 * ms + mlp_ms, 16.0
        rows.append(row)
    return pd.DataFrame(rows)


def test_table_has_each_operator_both_halves_and_the_step():
    frame = operators.table(records([4.4, 4.5, 4.6, 4.4, 4.5]))
    assert list(frame["part"]) == [*BOUNDED, "embeddings", "MLPs", "step (timed)"]
    halves = frame.set_index("part")
    assert halves.loc["embeddings", "bound_ms"] == 8.0 and halves.loc["embeddings", "ms"] == 9.0
    assert halves.loc["MLPs", "of_bound"] == pytest.approx(0.8)  # 8 ms of bound in 10 ms
    text = operators.report(records([4.4, 4.5, 4.6, 4.4, 4.5]))
    assert "embeddings" in text and "target >= 85%: meets" in text and "target >= 85%: misses" in text


def test_bf16_emulated_is_shown_not_judged():
    """The 85% target is of bf16 hardware: a machine that emulates bf16 gets its table, without a verdict."""
    emulated = records([4.4, 4.5, 4.6, 4.4, 4.5]).assign(**{col.PRECISION: "bf16", col.NATIVE_BF16: False})
    text = operators.report(emulated)
    assert "target >=" not in text and text.count("bf16 emulated here: not judged") == 2
    native = emulated.assign(**{col.NATIVE_BF16: True})
    assert "target >= 85%: meets" in operators.report(native)


def test_table_needs_both_breakdown_and_bounds():
    plain = records([4.0]).drop(columns=[col.bound_column("interaction")])
    assert operators.table(plain).empty and "no records carry" in operators.report(plain)


def test_an_operator_faster_than_its_bound_is_called_out():
    """A bound that an operator beats is no limit of the machine: the table says so instead of printing >100%."""
    text = operators.report(records([3.0, 3.1, 3.2, 3.0, 3.1]))  # embeddings in ~3 ms against a 4 ms bound
    beaten = [line for line in text.splitlines() if "faster than its bound" in line]
    assert beaten and all(line.split()[0].startswith("embedding") for line in beaten)
    assert "faster than its bound" not in operators.report(records([4.4, 4.5, 4.6, 4.4, 4.5]))


def test_one_repeat_faster_than_its_bound_invalidates_it_and_no_share_tops_100_percent():
    """One repeat of five beat the 4 ms bound: "bound invalid here", no share, no verdict. Fails before: the
    share was printed (its interval's low end was under 100%) and the half was judged."""
    frame = operators.table(records([3.9, 4.5, 4.6, 4.4, 4.5])).set_index("part")
    assert frame.loc["embedding_forward", "beaten"] == 1 and frame.loc["embeddings", "beaten"] == 1
    assert frame["of_bound"].isna()["embedding_forward"] and not (frame["of_bound"] > 1).any()
    text = operators.report(records([3.9, 4.5, 4.6, 4.4, 4.5]))
    lines = [line for line in text.splitlines() if operators.INVALID in line]
    assert [line.split()[0] for line in lines] == ["embedding_forward", "embedding_backward_update", "embeddings"]
    assert all("1 of 5 repeats" in line and "target" not in line for line in lines)


def test_records_of_limits_since_re_measured_are_left_out_and_counted():
    """A loop beat the cached limits, so they were measured again: the repeat measured against the old bound is
    not this machine's any more, and the table judges the repeats of the newest limits alone. Fails before:
    the old repeat made every part "bound invalid here"."""
    old = records([3.0]).assign(roofline_gather_fp32_gbps=2.0, **{col.TIMESTAMP: "2026-12-05T01:00:00"})
    new = records([4.4, 4.5, 4.6, 4.4, 4.5]).assign(roofline_gather_fp32_gbps=3.0)
    new[col.TIMESTAMP] = [f"2026-12-05T02:0{i}:00" for i in range(5)]
    frame = operators.table(pd.concat([old, new], ignore_index=True)).set_index("part")
    assert frame["beaten"].sum() == 0 and frame.loc["embeddings", "n"] == 5
    text = operators.report(pd.concat([old, new], ignore_index=True))
    assert operators.INVALID not in text and "m: 1 records left out, measured against limits since re-measured" in text
    again = new.assign(roofline_gather_fp32_gbps=2.0)  # the newest record decides, whichever limits it carries
    assert operators.table(pd.concat([again, old], ignore_index=True)).set_index("part").loc["embeddings", "n"] == 6


def test_beaten_names_each_part_faster_than_its_bound():
    fields = {col.op_column("interaction"): 0.5, col.bound_column("interaction"): 1.0,
              col.op_column("top_mlp"): 2.0, col.bound_column("top_mlp"): 1.0,
              col.MS_MEDIAN: 9.0, col.ROOFLINE_MS: 10.0}  # fmt: skip
    assert beaten(fields) == ["interaction", "step"]
    assert beaten({col.MS_MEDIAN: 9.0}) == []  # no bound: nothing beaten


def test_a_row_reads_its_newest_invocation_alone():
    """Two invocations of one code measured one loop days apart: the row is the newest invocation's, the other's
    records counted under the table, so the physical bound's table and the roofline's print one step time (issue 69:
    463.05 and 307.84 ms for one key). Fails before: the two invocations' repeats were pooled."""
    earlier = records([9.0, 9.1, 9.2]).assign(**{col.INVOCATION: "first", col.TIMESTAMP: "2026-12-04T01:00:00"})
    newest = records([4.4, 4.5, 4.6]).assign(**{col.INVOCATION: "second"})
    newest[col.TIMESTAMP] = [f"2026-12-05T02:0{i}:00" for i in range(3)]
    both = pd.concat([earlier, newest], ignore_index=True)
    frame = operators.table(both).set_index("part")
    assert frame.loc["step (timed)", "n"] == 3 and frame.loc["step (timed)", "ms"] == pytest.approx(19.0)
    assert f"m: 3 records left out, {operators.EARLIER_INVOCATION}" in operators.report(both)
