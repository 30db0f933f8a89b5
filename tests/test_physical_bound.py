"""The physical bound (`perfmodel.physical`, `measure.physical`, `analysis.physical`): its arithmetic, its two
step bounds, the probes it is measured by, and a loop faster than a probe flagged rather than read as a share."""

import random
import time

import pandas as pd
import pytest
import torch

from dlrm_study import config, platform
from dlrm_study.analysis import physical as judged
from dlrm_study.cli.main import main
from dlrm_study.measure import physical as probes
from dlrm_study.perfmodel import physical
from dlrm_study.perfmodel.physical import Lines, Peaks
from dlrm_study.records import columns as col


def test_dlrm_benchmark_bound_by_hand():
    cfg = config.load("dlrm-benchmark", ["train.loop=optimized", "train.precision=bf16"])
    parts = physical.operator_ms(cfg, Peaks(probe=1000.0), Lines(gather_ms=20.0, update_ms=30.0))
    batch = 2048
    assert parts["bottom_mlp"] == pytest.approx(2 * batch * (512 * 512 + 512 * 64) / 1e12 * 1e3)
    assert parts["top_mlp"] == pytest.approx(2 * batch * (100 * 1024 + 1024 * 1024 + 1024 * 1024 + 1024) / 1e12 * 1e3)
    # backward: the input gradients of every layer but the first, the weight gradients of all, and two
    # thirds of the 36 pairs' work (9 features, 64 wide: 6 FLOPs a pair and element, a third forward)
    backward = 2 * batch * (2 * 512 * 64 + 2 * 100 * 1024 + 4 * 1024 * 1024 + 2 * 1024 + 512 * 512)
    assert parts["dense_backward"] == pytest.approx((backward + 4 * batch * 36 * 64) / 1e12 * 1e3)
    assert parts["interaction"] == pytest.approx(2 * batch * 36 * 64 / 1e12 * 1e3)
    assert (parts["embedding_forward"], parts["embedding_backward_update"]) == (20.0, 30.0)


def test_a_library_rate_above_the_probe_is_the_peak_charged():
    assert Peaks(probe=100.0, library=150.0).gflops == 150.0
    assert Peaks(probe=100.0, library=50.0).gflops == 100.0
    with pytest.raises(ValueError, match="bounds nothing"):
        physical.operator_ms(config.preset("tiny"), Peaks(0.0), Lines(1.0, 1.0))


def test_the_sequential_bound_is_never_below_the_overlapped_one():
    draw = random.Random(7)
    for _ in range(500):
        parts = {name: draw.choice([0.0, draw.expovariate(1.0)]) for name in physical.OPERATORS}
        steps = physical.step_bounds(parts)
        assert steps[physical.SEQUENTIAL] >= steps[physical.OVERLAPPED] >= 0
        assert steps[physical.SEQUENTIAL] == pytest.approx(sum(parts.values()))
    memory_only = dict.fromkeys(physical.OPERATORS, 0.0) | {"embedding_forward": 3.0, "embedding_backward_update": 4.0}
    assert physical.step_bounds(memory_only) == {physical.SEQUENTIAL: 7.0, physical.OVERLAPPED: 7.0}
    both = memory_only | {"top_mlp": 5.0}
    assert physical.step_bounds(both) == {physical.SEQUENTIAL: 12.0, physical.OVERLAPPED: 7.0}


def test_the_line_probes_walk_each_step_s_unique_rows_of_the_config_s_ids():
    uniform = config.load("tiny", ["data.id_distribution=uniform"])
    zipf = config.load("tiny", ["data.id_distribution=zipf"])
    starts = [0, *torch.tensor(uniform.model.table_rows).cumsum(0).tolist()]
    for cfg in (uniform, zipf):
        rows = probes.step_rows(cfg, steps=2)
        assert len(rows) == 2
        for step in rows:
            assert len(step) == len(set(step.tolist()))  # unique within a step
            for table in range(cfg.model.num_tables):  # each table's rows within its stretch of the stack
                mine = step[(step >= starts[table]) & (step < starts[table + 1])]
                assert len(mine) > 0
    ids = uniform.train.batch_size * uniform.model.num_tables * uniform.data.lookups_per_table
    # Zipf ids repeat far more than uniform ones: fewer unique rows to move
    assert len(probes.step_rows(zipf, 1)[0]) < len(probes.step_rows(uniform, 1)[0]) <= ids


def test_the_drawn_order_walks_the_same_rows_as_the_batch_first_names_them():
    assert probes.first_seen(torch.tensor([7, 3, 7, 9, 3, 1])).tolist() == [7, 3, 9, 1]
    cfg = config.load("tiny", ["data.id_distribution=zipf"])
    drawn, ordered = probes.step_rows(cfg, 1, "drawn")[0], probes.step_rows(cfg, 1, "sorted")[0]
    assert sorted(drawn.tolist()) == sorted(ordered.tolist()) and drawn.tolist() != ordered.tolist()
    first_table = probes.SyntheticData(cfg).batch(0).indices[0]
    assert drawn[: len(first_table.unique())].tolist() == list(dict.fromkeys(first_table.tolist()))
    with pytest.raises(ValueError, match="order"):
        probes.step_rows(cfg, 1, "reversed")


def test_every_order_comes_from_one_draw_of_each_batch(monkeypatch):
    cfg = config.load("tiny", ["data.id_distribution=zipf"])
    drawn_batches = []
    batch = probes.SyntheticData.batch
    monkeypatch.setattr(probes.SyntheticData, "batch", lambda self, i: drawn_batches.append(i) or batch(self, i))
    walks = probes.step_walks(cfg, 3)
    assert drawn_batches == [0, 1, 2]  # one draw per step, not one per order
    assert set(walks) == set(probes.ORDERS)
    for drawn, ordered in zip(walks["drawn"], walks["sorted"], strict=True):
        assert sorted(drawn.tolist()) == ordered.tolist()


def test_the_line_probe_keeps_the_fastest_order(monkeypatch):
    """A loop may walk its rows in any order: where the drawn order is faster than the sorted one, the bound is
    the drawn order's (a bound from sorted rows alone could be beaten by a loop walking its bags)."""
    cfg = config.load("tiny", ["train.batch_size=64"])
    drawn = torch.cat(probes.step_rows(cfg, 1, "drawn"))

    class Probes:  # the drawn walk 2x faster than the sorted one, every hint and distance alike
        @staticmethod
        def lines_gather(buffer, ids, *rest):
            time.sleep(0.002 if torch.equal(ids, drawn) else 0.004)

        lines_update = lines_gather

    monkeypatch.setattr(probes, "load", lambda: Probes)
    monkeypatch.setattr(probes.kernels, "load", lambda: None)
    monkeypatch.setattr(probes, "ROUNDS", 1)
    monkeypatch.setattr(probes.membench, "DISTANCES", (0,))
    monkeypatch.setattr(probes, "GATHER_HINTS", {"t0": 0})
    monkeypatch.setattr(probes, "UPDATE_HINTS", {"t0": 0})
    fields = probes.line_probes(cfg, threads=1, steps=1)
    assert (fields["gather_order"], fields["update_order"]) == ("drawn", "drawn")
    assert 1.5 < fields["gather_ms"] < 3.5


def test_the_peak_on_n_threads_is_the_best_of_any_count_up_to_n(monkeypatch):
    # Measured on an AMX core: one thread 2,313 GFLOP/s, two threads together 1,851. A loop on two threads may
    # keep one idle, so the peak charged at two must be the one thread's.
    rates = {("fma", 1): 300.0, ("fma", 2): 500.0, ("amx", 1): 2313.0, ("amx", 2): 1851.0}
    monkeypatch.setattr(probes, "probes_here", lambda precision: ["fma"] if precision == "fp32" else ["amx"])
    monkeypatch.setattr(probes, "peak_gflops", lambda probe, threads: rates[(probe, threads)])
    fields = probes.peaks(threads=2)
    assert (fields["peak_bf16_gflops"], fields["peak_bf16_probe"], fields["peak_bf16_threads"]) == (2313.0, "amx", 1)
    assert (fields["peak_fp32_gflops"], fields["peak_fp32_threads"]) == (500.0, 2)
    assert list(probes.thread_counts(3)) == [1, 2, 3]


@pytest.mark.slow
def test_the_probes_run_on_this_cpu():
    fields = probes.peaks(threads=1)
    assert fields["peak_fp32_gflops"] > 1.0
    assert fields["peak_fp32_probe"] in probes.probes_here("fp32")
    if platform.native_bf16():
        assert fields["peak_bf16_probe"] in probes.probes_here("bf16")
    cfg = config.load("tiny", ["train.batch_size=256"])
    lines = probes.line_probes(cfg, threads=1, steps=1)
    assert lines["gather_ms"] > 0 and lines["update_ms"] > 0
    assert lines["gather_hint"] in probes.GATHER_HINTS and lines["update_hint"] in probes.UPDATE_HINTS
    assert lines["update_lines_per_step"] >= lines["gather_lines_per_step"]  # the update moves the whole row


def bound_record(gather_ms: float = 4.0, update_ms: float = 4.0) -> dict[str, object]:
    cfg = config.preset("tiny")
    fields = physical.bound_fields(cfg, Peaks(probe=1e12), Lines(gather_ms, update_ms))  # compute: about nothing
    keys = {col.MACHINE: "m", col.CONFIG_NAME: "tiny", col.PRECISION: "fp32", col.THREADS: 2}
    return keys | fields | {col.TIMESTAMP: "2026-12-05T00:00:00"}


def bench_records(embedding_ms: list[float], variant: str = "optimized-fp32") -> pd.DataFrame:
    rows = []
    for repeat, ms in enumerate(embedding_ms):
        row = {col.MACHINE: "m", col.CONFIG_NAME: "tiny", col.VARIANT: variant, col.REPEAT: repeat}
        row |= {col.PRECISION: "fp32", col.THREADS: 2, col.NATIVE_BF16: False}
        for name in physical.OPERATORS:
            row[col.op_column(name)] = ms if name.startswith("embedding") else 1.0
        row[col.MS_MEDIAN] = 2 * ms + 4.0
        rows.append(row)
    return pd.DataFrame(rows)


def test_a_loop_within_the_bound_reads_its_share_and_the_step_target():
    text = judged.report(bench_records([4.4, 4.5, 4.6, 4.4, 4.5]), pd.DataFrame([bound_record()]))
    assert "faster than its physical bound" not in text
    assert "embedding_forward" in text and "89%" in text  # 4 ms of bound over about 4.5 ms
    assert "step (timed), in sequence" in text and "target >= 90%" in text
    assert "step (timed), overlapped" in text


def test_a_loop_faster_than_the_probe_is_flagged_not_read_as_a_share():
    text = judged.report(bench_records([3.9, 4.5, 4.6, 4.4, 4.5]), pd.DataFrame([bound_record()]))
    flagged = [line for line in text.splitlines() if "faster than its physical bound" in line]
    assert any("embedding_forward" in line and "in 1 of 5 repeats" in line for line in flagged)
    assert all("the probe fell short here" in line for line in flagged)
    shares = [float(s.rstrip("%")) for line in text.splitlines() for s in line.split() if s.endswith("%")]
    assert shares and max(shares) <= 100


def test_the_bound_read_is_the_fastest_of_the_records_at_as_many_threads_or_fewer():
    quiet = bound_record(gather_ms=4.0, update_ms=4.0)
    loaded = bound_record(gather_ms=6.0, update_ms=3.0) | {col.TIMESTAMP: "2026-12-06T00:00:00"}  # newer, gather slower
    one_thread = bound_record(gather_ms=3.5, update_ms=9.0) | {col.THREADS: 1}
    got = judged.tightest_bounds(pd.DataFrame([quiet, loaded, one_thread])).set_index(col.THREADS)
    forward, update = physical.op_column("embedding_forward"), physical.op_column("embedding_backward_update")
    assert (got.loc[2, forward], got.loc[2, update]) == (3.5, 3.0)  # one thread's gather, the loaded record's update
    assert got.loc[2, physical.SEQUENTIAL] == pytest.approx(
        sum(got.loc[2, physical.op_column(n)] for n in physical.OPERATORS)
    )
    assert got.loc[2, physical.OVERLAPPED] <= got.loc[2, physical.SEQUENTIAL]
    assert (got.loc[1, forward], got.loc[1, update]) == (3.5, 9.0)  # records of two threads do not bound one


def test_a_machine_without_a_bound_record_is_named():
    text = judged.report(bench_records([4.5] * 3), pd.DataFrame([bound_record() | {col.THREADS: 1}]))
    named = "m: no physical bound measured at its bench records' config, precision and threads (dlrm-study bound)"
    assert text == named
    newer = bound_record(gather_ms=1.0) | {col.TIMESTAMP: "2026-12-06T00:00:00"}
    frame = judged.with_bounds(bench_records([4.5]), pd.DataFrame([bound_record(), newer]))
    assert frame[physical.op_column("embedding_forward")].tolist() == [1.0]  # the newest bound counts


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--threads", "-1"], "train.threads"),
        (["--precision", "fp16"], "precision"),
        (["--config", "no-such-preset"], "no-such-preset"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, words, capsys, tmp_path):
    out = tmp_path / "bounds.csv"
    assert main(["bound", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err and err.startswith("dlrm-study: error:")
    assert not out.exists()
