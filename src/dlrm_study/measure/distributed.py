"""`dlrm-study train --distributed` and `dlrm-study bench --distributed` under torchrun: the timed steps, their
phases, the same steps without the network, and the collectives alone.

Every rank runs the same command; rank 0 alone prints and writes records. A failure on any rank (a
dead or hung peer, a bad config) ends every rank non-zero, and no record is written: a record is
appended only after the last collective succeeded.
"""

import json
import statistics
import time
from pathlib import Path

import torch
import torch.distributed as dist

from dlrm_study.config import Config
from dlrm_study.distributed import hybrid
from dlrm_study.distributed.launch import fail, inject_fault, refuse, shutdown
from dlrm_study.distributed.run import collective_error, save_checkpoint, start, training_batches
from dlrm_study.errors import UsageError
from dlrm_study.measure import runner, settle
from dlrm_study.measure.timing import elapsed_ms
from dlrm_study.records import columns as col
from dlrm_study.records import store
from dlrm_study.records.record import make_record

CPU = torch.device("cpu")  # the ranks are CPU processes (see launch.init)


PHASES = ("lookup", "forward", "backward", "update", "loss_allreduce")


def train_main(
    cfg: Config,
    steps: int,
    out: Path,
    timeout_s: float,
    checkpoint: Path | None = None,
    resume: Path | None = None,
    route: str = "own",
    log_every: int = 50,
) -> None:
    run = start(cfg, timeout_s, resume, route)
    world, cfg = run.world, run.cfg
    try:
        batches = training_batches(cfg, run.step)
        begin, first = time.perf_counter(), run.step
        while run.step < steps:
            inject_fault(world.rank, run.step)
            loss = run.train_step(next(batches))
            run.losses.append(loss)
            if world.is_main and (run.step % log_every == 0 or run.step == steps):
                print(f"step {run.step}/{steps}  loss {loss:.4f}", flush=True)
        seconds = time.perf_counter() - begin
        if checkpoint:
            save_checkpoint(run, checkpoint)
        dist.barrier()
    except UsageError as err:  # bad data (a Criteo file too short, a malformed line): every rank reads the same
        refuse(world, err)
    except Exception as err:  # a collective failed: a peer died or hung
        fail(world, collective_error(err))
    if world.is_main:
        rate = col.samples_per_s((run.step - first) * cfg.train.batch_size, seconds)
        fields = {
            col.LOOP: cfg.train.loop,
            col.ROUTE: route,
            col.WORLD_SIZE: world.size,
            col.STEPS: run.step,
            col.FINAL_LOSS: run.losses[-1] if run.losses else float("nan"),
            col.SAMPLES_PER_S: rate,
            col.ERROR: "",
        }
        store.append(out, make_record("train-distributed", fields, cfg))
        print(
            f"trained {run.step - first} steps on {world.size} ranks, {rate:,.0f} samples/s; record appended to {out}"
        )
    shutdown(world)


def bench_main(
    cfg: Config,
    steps: int,
    warmup: int,
    repeats: int,
    out: Path,
    timeout_s: float,
    study: str,
    fields_json: Path | None = None,
) -> None:
    """Repeats of timed steps through `measure.runner` (rank 0 writes the records).

    With `fields_json`, one repeat whose fields rank 0 writes there as JSON instead: a study
    that launched this process group makes the record (`studies.scaling`).
    """
    run = start(cfg, timeout_s)
    world = run.world
    variant = f"{world.size} rank" + ("s" if world.size > 1 else "")
    try:
        if fields_json:
            fields = measure_once(run, steps, warmup)
            if world.is_main:
                fields_json.write_text(json.dumps(fields))
        else:
            tasks = runner.schedule([(cfg.name, {variant: cfg})], repeats, runner.machine_of)
            runner.run(
                tasks,
                lambda _: {**measure_once(run, steps, warmup), col.BUILDS: "once"},
                out,
                study,
                resume=False,
                record_errors=False,
                emit=world.is_main,
                progress=False,
                on_record=say,
            )
    except UsageError as err:  # bad data, read alike by every rank
        refuse(world, err)
    except Exception as err:
        fail(world, collective_error(err))
    shutdown(world)


def say(record: dict[str, object]) -> None:
    print(
        f"repeat {record[col.REPEAT]}, {record[col.WORLD_SIZE]} ranks: {record[col.MS_MEDIAN]:.1f} ms/step "
        f"({record[col.SAMPLES_PER_S]:,.0f} samples/s), compute alone {record[col.COMPUTE_MS_MEDIAN]:.1f} ms, "
        f"exposed communication {record['exposed_comm_ms']:.1f} ms",
        flush=True,
    )


def measure_once(run: hybrid.DistRun, steps: int, warmup: int) -> dict[str, object]:
    """Timed steps with their phases, the same steps without the network, then the network alone."""
    world, arch, cfg = run.world, run.dlrm.sparse_arch, run.cfg
    batches = training_batches(cfg)
    warmed = warm_up_together(run, batches, warmup)
    arch.wait_s = arch.ex.backward_s = 0.0
    phases: dict[str, float] = {}
    step_ms = timed_steps(run, batches, steps, phases)
    wait, exchange_back = arch.wait_s, arch.ex.backward_s
    arch.exchange = False  # compute alone: the exchange done locally, no dense allreduce
    with run.model.no_sync():
        timed_steps(run, batches, warmup)
        compute_ms = timed_steps(run, batches, steps)
    arch.exchange = True
    comm = communication_alone(run)
    # Per-step medians can differ by rank; the slowest rank sets the pace.
    summary = torch.tensor([statistics.median(step_ms), statistics.median(compute_ms)])
    dist.all_reduce(summary, op=dist.ReduceOp.MAX)
    step, compute = summary.tolist()
    return {
        col.LOOP: cfg.train.loop,
        col.ROUTE: "own",
        col.SPARSE_ARCH: arch.local.name,
        col.PRECISION: cfg.train.precision,
        col.DEVICE: "cpu",
        col.WORLD_SIZE: world.size,
        col.THREADS: torch.get_num_threads(),
        "threads_per_rank": torch.get_num_threads(),
        col.BATCH_SIZE: cfg.train.batch_size,
        "local_batch": run.local_batch,
        col.STEPS: steps,
        col.WARMUP: warmed,
        col.MS_MEDIAN: step,
        col.MS_P10: col.quantile(step_ms, 0.1),
        col.MS_P90: col.quantile(step_ms, 0.9),
        col.SAMPLES_PER_S: col.samples_per_s(cfg.train.batch_size, step / 1e3),
        col.COMPUTE_MS_MEDIAN: compute,
        "exposed_comm_ms": max(0.0, step - compute),
        "exchange_wait_ms": 1e3 * wait / steps,
        "exchange_backward_ms": 1e3 * exchange_back / steps,
        **{f"phase_{name}_ms": 1e3 * phases.get(name, 0.0) / steps for name in PHASES},
        **comm,
    }


def warm_up_together(run: hybrid.DistRun, batches, least: int) -> int:
    """Untimed steps until the slowest rank's step time settles (`settle.warm_up`): every rank sees the same
    slowest time, so all make the same number of steps and their collectives stay matched."""

    def slowest() -> float:
        ms = torch.tensor(timed_steps(run, batches, 1))
        dist.all_reduce(ms, op=dist.ReduceOp.MAX)
        return float(ms.item())

    return settle.warm_up(slowest, least)


def timed_steps(run: hybrid.DistRun, batches, count: int, phases: dict[str, float] | None = None) -> list[float]:
    """Milliseconds of each of `count` training steps."""
    out = []
    for _ in range(count):
        batch = next(batches)
        out.append(elapsed_ms(lambda batch=batch: run.train_step(batch, phases), CPU))
    return out


def communication_alone(run: hybrid.DistRun, repeats: int = 10) -> dict[str, float]:
    """The step's collectives on their own: forward all-to-all, dense allreduce (bytes and ms)."""
    ex = run.dlrm.sparse_arch.ex
    send, receive = ex.counts()
    source, target = torch.randn(sum(send)), torch.empty(sum(receive))
    dense = torch.zeros(sum(p.numel() for p in run.dlrm.dense_parameters()))
    alltoall = [
        elapsed_ms(lambda: dist.all_to_all_single(target, source, receive, send, ex.group), CPU) for _ in range(repeats)
    ]
    allreduce = [elapsed_ms(lambda: dist.all_reduce(dense), CPU) for _ in range(repeats)]
    return {
        "comm_alltoall_ms": statistics.median(alltoall),
        "comm_alltoall_bytes": 4 * (sum(send) - send[ex.rank]),  # what leaves this rank
        "comm_allreduce_ms": statistics.median(allreduce),
        "comm_allreduce_bytes": 4 * dense.numel(),
    }
