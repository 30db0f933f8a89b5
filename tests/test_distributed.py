"""Hybrid parallelism under torchrun (2 gloo ranks on the CPU): equivalence, checkpoints, faults."""

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from tests.conftest import CRITEO_SAMPLE, ROOT

from dlrm_study import config
from dlrm_study.data import make_data
from dlrm_study.distributed.hybrid import table_owners
from dlrm_study.errors import UsageError
from dlrm_study.perfmodel import scaling as perf_model
from dlrm_study.records import store
from dlrm_study.train import build, train
from dlrm_study.train import checkpoint as ckpt

# Five tables over two ranks (uneven), repeated ids in bags of 6.
SHAPE = [
    "data.pooling=fixed",
    "data.lookups_per_table=6",
    "model.table_rows=50-70-30-90-40",
    "train.batch_size=32",
]


def torchrun(*args: str, ranks: int = 2, env: dict | None = None) -> subprocess.CompletedProcess:
    """`torchrun --standalone --nproc_per_node RANKS -m dlrm_study ARGS` with one thread per rank."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}"]
    command += ["-m", "dlrm_study", *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src"), **(env or {})}
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)  # a hang guard


def sets(*overrides: str) -> list[str]:
    return [item for o in [*SHAPE, *overrides] for item in ("--set", o)]


def single_process(steps: int, *overrides: str):
    cfg = config.load("tiny", [*SHAPE, *overrides])
    run = build(cfg)
    train(run, make_data(cfg).batches(), steps)
    return run


def assert_same(a, b, atol: float = 1e-5) -> None:
    assert a.step == b.step
    assert a.losses == pytest.approx(b.losses, abs=atol)
    for x, y in zip(a.model.sparse_arch.tables(), b.model.sparse_arch.tables(), strict=True):
        torch.testing.assert_close(x, y, rtol=0, atol=atol)
    for x, y in zip(a.model.dense_parameters(), b.model.dense_parameters(), strict=True):
        torch.testing.assert_close(x.detach(), y.detach(), rtol=0, atol=atol)
    assert_same_tensors(a.model.sparse_arch.accumulators(), b.model.sparse_arch.accumulators(), atol)


def assert_same_tensors(a: list[torch.Tensor] | None, b: list[torch.Tensor] | None, atol: float = 1e-5) -> None:
    assert (a is None) == (b is None)
    for x, y in zip(a or [], b or [], strict=True):
        torch.testing.assert_close(x, y, rtol=0, atol=atol)


@pytest.mark.slow
@pytest.mark.parametrize(
    "route, loop",
    [("own", "reference"), ("own", "optimized"), ("torchrec", "reference")],
    ids=["own", "own-fused", "torchrec"],
)
def test_two_ranks_train_what_one_process_trains(tmp_path, route, loop):
    where = ["--checkpoint", str(tmp_path / "c.pt"), "--out", str(tmp_path / "t.csv")]
    done = torchrun("train", "--distributed", "--route", route, *sets(f"train.loop={loop}"), "--steps", "5", *where)
    assert done.returncode == 0, done.stderr[-3000:]
    assert_same(ckpt.load(tmp_path / "c.pt"), single_process(5, f"train.loop={loop}"))
    record = store.load(tmp_path / "t.csv").iloc[0]
    assert record["world_size"] == 2 and record["route"] == route


@pytest.mark.slow
def test_a_distributed_checkpoint_resumes_on_one_rank_or_two(tmp_path):
    out = ["--out", str(tmp_path / "t.csv")]
    done = torchrun("train", "--distributed", *sets(), "--steps", "3", "--checkpoint", str(tmp_path / "at3.pt"), *out)
    assert done.returncode == 0, done.stderr[-3000:]
    straight = single_process(5)
    one = ckpt.load(tmp_path / "at3.pt")  # one process
    train(one, make_data(one.cfg).batches(start=3), 5)
    assert_same(one, straight)
    resume = ["--resume", str(tmp_path / "at3.pt"), "--checkpoint", str(tmp_path / "at5.pt")]
    done = torchrun("train", "--distributed", *resume, "--steps", "5", *out)
    assert done.returncode == 0, done.stderr[-3000:]
    assert_same(ckpt.load(tmp_path / "at5.pt"), straight)


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["reference", "optimized"])
def test_a_rowwise_adagrad_checkpoint_resumes_exactly(tmp_path, loop):
    """Its accumulators travel with the tables: 2 steps, then 2 resumed, equal 4 straight (on 2 ranks or 1)."""
    adagrad = sets(f"train.loop={loop}", "train.optimizer=rowwise_adagrad")
    out = ["--out", str(tmp_path / "t.csv")]
    for steps, name in (("4", "straight.pt"), ("2", "at2.pt")):
        where = ["--checkpoint", str(tmp_path / name), *out]
        done = torchrun("train", "--distributed", *adagrad, "--steps", steps, *where)
        assert done.returncode == 0, done.stderr[-3000:]
    resume = ["--resume", str(tmp_path / "at2.pt"), "--checkpoint", str(tmp_path / "resumed.pt")]
    done = torchrun("train", "--distributed", *resume, "--steps", "4", *out)
    assert done.returncode == 0, done.stderr[-3000:]
    straight = ckpt.load(tmp_path / "straight.pt")
    assert straight.model.sparse_arch.accumulators() is not None
    assert_same(ckpt.load(tmp_path / "resumed.pt"), straight, atol=1e-7)  # the same arithmetic: no drift
    assert_same(straight, single_process(4, f"train.loop={loop}", "train.optimizer=rowwise_adagrad"))
    one = ckpt.load(tmp_path / "at2.pt")  # one process resumes it too
    train(one, make_data(one.cfg).batches(start=2), 4)
    assert_same(one, straight)


def test_the_torchrec_route_refuses_rowwise_adagrad_before_it_starts(tmp_path, capsys):
    """It trains its tables with fused SGD only: nothing to checkpoint for Adagrad, so refused up front."""
    from dlrm_study.cli.main import main

    out = tmp_path / "t.csv"
    args = ["--set", "train.optimizer=rowwise_adagrad", "--checkpoint", str(tmp_path / "c.pt"), "--out", str(out)]
    assert main(["train", "--distributed", "--route", "torchrec", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["dlrm-study: error: --route torchrec trains the tables with SGD only (train.optimizer=sgd)"]
    assert not out.exists()


def criteo_file(tmp_path: Path, lines: int) -> Path:
    """The first `lines` lines of the Criteo sample."""
    path = tmp_path / "criteo.tsv"
    path.write_text("".join(CRITEO_SAMPLE.read_text().splitlines(keepends=True)[:lines]))
    return path


# The Criteo shape (13 dense features, 26 tables), small: batches of 32, the first one held out.
CRITEO = ["--config", "kaggle", "--set", "model.table_rows=26x1000", "--set", "train.batch_size=32"]
CRITEO += ["--set", "train.eval_batches=1"]


def test_distributed_batches_drop_the_short_one_and_resume_where_they_left_off(tmp_path):
    from dlrm_study.distributed.run import training_batches

    cfg = config.load("kaggle", ["model.table_rows=26x1000", "train.batch_size=32", "train.eval_batches=1"])
    cfg.data.source, cfg.data.path = "criteo", str(criteo_file(tmp_path, 150))  # 1 held out, 3 whole, 22 left
    dense = [b.dense for b in itertools.islice(training_batches(cfg), 7)]  # over two passes and more
    assert [len(x) for x in dense] == [32] * 7
    torch.testing.assert_close(dense[3], dense[0])  # the second pass: the short batch dropped between
    for start in (2, 3, 5):  # a resumed run trains on the batches it would have had
        torch.testing.assert_close(next(training_batches(cfg, start)).dense, dense[start])
    cfg.data.path = str(criteo_file(tmp_path, 50))  # no whole training batch: refused, not an endless loop
    with pytest.raises(UsageError, match="fewer training lines than one batch of 32"):
        next(training_batches(cfg))


@pytest.mark.slow
def test_a_distributed_run_over_a_criteo_file_passes_it_cleanly(tmp_path):
    """150 lines in batches of 32: each pass ends with a short batch, which the ranks cannot split evenly."""
    out = tmp_path / "t.csv"
    data = ["--data", str(criteo_file(tmp_path, 150)), "--out", str(out), "--timeout-s", "30"]
    done = torchrun("train", "--distributed", *CRITEO, *data, "--steps", "8")  # 3 whole batches a pass
    assert done.returncode == 0, done.stderr[-3000:]
    record = store.load(out).iloc[0]
    assert record["steps"] == 8 and record["world_size"] == 2


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["kill", "hang"])
def test_a_dead_or_hung_rank_ends_the_run_naming_it(tmp_path, kind):
    out = tmp_path / "t.csv"
    fault = {"DLRM_STUDY_FAULT": f"1:3:{kind}"}  # rank 1 dies or hangs before step 4
    # Ends on its own (torchrun's 300 s guard is against a hang only: no deadline a busy machine could miss).
    done = torchrun("train", "--distributed", "--steps", "50", "--timeout-s", "5", "--out", str(out), env=fault)
    assert done.returncode != 0
    # Rank 0 says why it stopped (a failed collective, its watchdog, or torchrun stopping it after
    # rank 1 exited: which comes first is a race) and names rank 1 either way.
    said = [line for line in done.stderr.splitlines() if line.startswith("dlrm-study: rank 0:")]
    assert said and "rank 1 fell behind (dead or hung)" in said[-1], done.stderr[-3000:]
    assert not out.exists()  # nothing recorded as a success


def test_gpu_ranks_are_refused_plainly():
    from dlrm_study.distributed.hybrid import check_config
    from dlrm_study.distributed.launch import World
    from dlrm_study.errors import UsageError

    with pytest.raises(UsageError, match="built for CPU ranks"):
        check_config(config.load("tiny", ["train.device=cuda"]), World(0, 2))


def test_distributed_outside_torchrun_is_a_usage_error(capsys):
    from dlrm_study.cli.main import main

    assert main(["train", "--distributed", "--steps", "2"]) == 2
    assert "runs under torchrun" in capsys.readouterr().err


def test_table_owners_balance_rows():
    assert table_owners([100, 10, 10, 90], 2) == [0, 1, 0, 1]  # 110 rows on rank 0, 100 on rank 1
    assert table_owners([5] * 4, 2) == [0, 1, 0, 1]
    loads = [0, 0, 0]
    rows = config.preset("kaggle").model.table_rows
    for rows_, rank in zip(rows, table_owners(rows, 3), strict=True):
        loads[rank] += rows_
    assert max(loads) <= sum(rows) / 3 + max(rows)  # greedy's bound: a fair share plus one table


@pytest.mark.slow
def test_remote_tables_train_what_local_tables_train(tmp_path):
    """One trainer and one parameter server (torch.distributed.rpc) against one process."""
    where = ["--checkpoint", str(tmp_path / "c.pt"), "--out", str(tmp_path / "t.csv")]
    done = torchrun("train", "--remote-tables", *sets("train.loop=optimized"), "--steps", "5", *where)
    assert done.returncode == 0, done.stderr[-3000:]
    saved = torch.load(tmp_path / "c.pt", weights_only=True)
    local = single_process(5, "train.loop=optimized")
    assert saved["losses"] == pytest.approx(local.losses, abs=1e-5)
    remote_tables = saved["model"]["sparse_arch._extra_state"]["tables"]
    for x, y in zip(remote_tables, local.model.sparse_arch.tables(), strict=True):
        torch.testing.assert_close(x, y, rtol=0, atol=1e-5)
    for key, value in local.model.state_dict().items():
        if not key.startswith("sparse_arch."):
            torch.testing.assert_close(saved["model"][key], value, rtol=0, atol=1e-5)
    assert store.load(tmp_path / "t.csv").iloc[0]["loop"] == "optimized"


def fake_records(cal, points) -> pd.DataFrame:
    """Records as the scaling study writes them, with the compute times the model itself predicts."""
    rows = []
    for world, batch, lookups in points:
        record = {**config.load("tiny", ["model.table_rows=8x100"]).flat(), "world_size": world, "batch_size": batch}
        record["data.lookups_per_table"] = lookups
        shape = perf_model.Shape.of(record)
        times = perf_model.step_ms(cal, shape, world, perf_model.OMNI_PATH_100G)
        record["compute_ms_median"], record["ms_median"] = times["compute_ms"], times["step_ms"]
        rows.append(record)
    return pd.DataFrame(rows)


def test_the_model_recovers_its_rates_from_single_rank_points():
    truth = perf_model.Calibration(overhead_ms=2.0, dense_ms_per_sample=0.01, sparse_ms_per_lookup=0.0005)
    records = fake_records(truth, [(1, 1024, 20), (1, 512, 20), (1, 1024, 40)])
    fitted = perf_model.fit(records)
    for got, want in zip(vars(fitted).values(), vars(truth).values(), strict=True):
        assert got == pytest.approx(want, rel=1e-6)
    checked = perf_model.check(fitted, fake_records(truth, [(2, 1024, 20)]), perf_model.OMNI_PATH_100G)
    assert checked["compute_error"].abs().max() < 1e-9 and checked["step_error"].abs().max() < 1e-9


def test_projection_with_a_free_network_and_dense_work_only_scales_perfectly():
    free = perf_model.Network("free", bandwidth_gbps=float("inf"), latency_us=0.0)
    dense_only = perf_model.Calibration(0.0, 0.01, 0.0)
    shape = perf_model.Shape(batch=1024, tables=8, lookups=20, dim=16, dense_params=10_000)
    projection = perf_model.project(dense_only, shape, free, [1, 2, 8, 64], per_rank_batch=512)
    assert projection["efficiency"].to_numpy() == pytest.approx(1.0)
    # Sparse work placed whole per table: beyond 8 ranks the busiest rank keeps a whole table.
    sparse_only = perf_model.Calibration(0.0, 0.0, 0.001)
    strong = perf_model.project(sparse_only, shape, free, [8, 64], per_rank_batch=512).query("mode == 'strong'")
    assert strong["step_ms"].iloc[0] == pytest.approx(strong["step_ms"].iloc[1])


def test_the_link_is_recovered_from_the_collectives_timed_alone():
    truth = perf_model.Network("truth", bandwidth_gbps=2.0, latency_us=50.0)  # 2e6 bytes per ms, 0.05 ms
    a2a_bytes, ar_bytes = 300_000, 10_000_000
    records = pd.DataFrame([{
        "world_size": 2, "comm_alltoall_bytes": a2a_bytes, "comm_allreduce_bytes": ar_bytes,
        "comm_alltoall_ms": 0.05 + a2a_bytes / 2e6, "comm_allreduce_ms": 2 * 0.05 + ar_bytes / 2e6,
    }])  # fmt: skip
    fitted = perf_model.fit_network(records)
    assert fitted.bandwidth_gbps == pytest.approx(truth.bandwidth_gbps) and fitted.latency_us == pytest.approx(50.0)


def test_weak_scaling_keeps_the_batch_per_rank_as_measured():
    shape = perf_model.Shape(batch=1024, tables=8, lookups=20, dim=16, dense_params=10_000)
    weak = perf_model.project(perf_model.Calibration(1.0, 0.01, 0.0), shape, perf_model.OMNI_PATH_100G, [1, 2], 512)
    assert list(weak.query("mode == 'weak'")["batch"]) == [512, 1024]  # 2 ranks: the measured point's batch


def test_communication_terms_follow_the_stated_formulas():
    net = perf_model.Network("test", bandwidth_gbps=1.0, latency_us=10.0)  # 1e6 bytes per ms
    shape = perf_model.Shape(batch=1000, tables=4, lookups=1, dim=10, dense_params=1_000_000)
    times = perf_model.step_ms(perf_model.Calibration(0, 0, 0), shape, 2, net)
    pooled = 500 * 2 * 10 * 4  # B/W samples x ceil(T/W) tables x D x 4 bytes, to the one other rank
    assert times["alltoall_ms"] == pytest.approx(2 * (0.01 + pooled / 1e6))
    assert times["allreduce_ms"] == pytest.approx(2 * 0.01 + 2 * 0.5 * 4e6 / 1e6)


@pytest.mark.slow
def test_remote_tables_resume_rowwise_adagrad_exactly(tmp_path):
    """The servers' accumulators are in the checkpoint: 2 steps, then 2 resumed, equal 4 in one process."""
    adagrad = sets("train.loop=optimized", "train.optimizer=rowwise_adagrad")
    out = ["--out", str(tmp_path / "t.csv"), "--no-progress"]
    where = ["--checkpoint", str(tmp_path / "at2.pt"), *out]
    done = torchrun("train", "--remote-tables", *adagrad, "--steps", "2", *where)
    assert done.returncode == 0, done.stderr[-3000:]
    resume = ["--resume", str(tmp_path / "at2.pt"), "--checkpoint", str(tmp_path / "at4.pt")]
    done = torchrun("train", "--remote-tables", *resume, "--steps", "4", *out)
    assert done.returncode == 0, done.stderr[-3000:]
    saved = torch.load(tmp_path / "at4.pt", weights_only=True)
    straight = single_process(4, "train.loop=optimized", "train.optimizer=rowwise_adagrad")
    assert saved["losses"] == pytest.approx(straight.losses, abs=1e-5)
    remote = saved["model"]["sparse_arch._extra_state"]
    assert_same_tensors(remote["tables"], straight.model.sparse_arch.tables())
    assert_same_tensors(remote["accumulators"], straight.model.sparse_arch.accumulators())


@pytest.mark.slow
def test_a_hung_parameter_server_fails_the_trainer_naming_it(tmp_path):
    out = tmp_path / "t.csv"
    hang = {"DLRM_STUDY_FAULT": "1:3:hang"}  # the server (rank 1) hangs in step 3's update
    args = ["train", "--remote-tables", *sets("train.loop=optimized"), "--steps", "20", "--timeout-s", "5"]
    done = torchrun(*args, "--out", str(out), env=hang)
    assert done.returncode != 0
    said = [line for line in done.stderr.splitlines() if line.startswith("dlrm-study: parameter server")]
    assert said and "'ps1' (tables [0, 1, 2, 3, 4])" in said[0] and "timeout" in said[0], done.stderr[-3000:]
    assert not out.exists()
