"""A distributed run's life under torchrun: join the group and build this rank's share (`start`), read
whole batches, and save a single-process checkpoint from every rank's tables.

Every rank runs the same command; rank 0 alone prints and writes records and checkpoints
(`measure.distributed`). A failure on any rank (a dead or hung peer, a bad config) ends every rank
non-zero, and no record is written: a record is appended only after the last collective succeeded.
"""

import itertools
from collections.abc import Iterator
from pathlib import Path

from dlrm_study.config import Config
from dlrm_study.data import Batch, SyntheticData, make_data
from dlrm_study.distributed import hybrid
from dlrm_study.distributed.launch import EXIT_USAGE, init, launched_rank, refuse
from dlrm_study.errors import UsageError
from dlrm_study.train import checkpoint as ckpt
from dlrm_study.train.run import build


def start(cfg: Config | None, timeout_s: float, resume: Path | None = None, route: str = "own") -> hybrid.DistRun:
    """Join the group and build this rank's share (from a checkpoint when resuming)."""
    initial, step, losses = None, 0, []
    try:  # before joining: a missing or foreign file, or what the route cannot do, is a usage error
        if resume:
            cfg, step, losses, initial = load_checkpoint(resume)
        hybrid.check_route(cfg, route)
    except UsageError:
        if launched_rank() != 0:  # every rank reaches the same verdict: rank 0 says it
            raise SystemExit(EXIT_USAGE) from None
        raise
    world = init(cfg.train.device, timeout_s)
    try:
        if route == "torchrec":
            from dlrm_study.distributed import torchrec_route

            run = torchrec_route.build(cfg, world, initial)
        else:
            run = hybrid.build(cfg, world, initial)
    except UsageError as err:  # every rank reaches the same verdict on a config
        refuse(world, err)
    run.step, run.losses = step, list(losses)
    world.beat()  # built
    return run


def load_checkpoint(path: Path) -> tuple[Config, int, list[float], dict]:
    """A single-process checkpoint as (config, step, losses, what `hybrid.build` starts from)."""
    saved = ckpt.load(path)
    state = saved.model.state_dict()
    initial = {
        "tables": [w.clone() for w in saved.model.sparse_arch.tables()],
        "accumulators": saved.model.sparse_arch.accumulators(),
        "dense": {k: v for k, v in state.items() if not k.startswith("sparse_arch.")},
        "dense_optimizer": saved.dense_optimizer.state_dict(),
    }
    return saved.cfg, saved.step, list(saved.losses), initial


def training_batches(cfg: Config, start: int = 0) -> Iterator[Batch]:
    """The training batches from step `start` on, each of the whole global batch.

    The ranks' all-to-all sizes are fixed by the local batch (`train.batch_size` / ranks),
    but the Criteo reader ends every pass over its file with a short batch (the lines left
    over): that batch is dropped here, so a distributed pass trains on whole batches only
    (a single process trains on the short one too). Step s is then the s-th whole batch,
    not the reader's batch s, so a resumed run counts them from the start of the stream.
    """
    data = make_data(cfg)
    if isinstance(data, SyntheticData):  # every batch whole, and addressed by its index
        return data.batches(start=start)
    return itertools.islice(whole_batches(data.batches(), cfg.train.batch_size, cfg.data.path), start, None)


def whole_batches(batches: Iterator[Batch], size: int, path: str) -> Iterator[Batch]:
    """The batches of `size` samples; a pass without one (two short batches in a row) is an error."""
    dropped = False
    for batch in batches:
        if len(batch.labels) == size:
            dropped = False
            yield batch
        elif dropped:
            raise UsageError(f"{path}: fewer training lines than one batch of {size} after the held-out ones")
        else:
            dropped = True


def collective_error(err: Exception) -> str:
    """The first line of a failed collective's error, short: the watchdog's verdict follows it."""
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"a collective failed ({type(err).__name__}: {first[:120]})"


def save_checkpoint(run: hybrid.DistRun, path: Path) -> None:
    """A single-process checkpoint (any number of ranks, or one process, resumes it), on rank 0.

    It holds the optimizer state too: the tables' row-wise Adagrad accumulators, gathered by
    table like the tables, and the dense optimizer's (the same on every rank under DDP).
    """
    tables, sums = run.gather_tables(), run.gather_accumulators()
    if not run.world.is_main:
        return

    whole = build(Config.from_dict(run.cfg.to_dict()))  # the single-process layout, filled in
    whole.model.sparse_arch.set_tables(tables)
    if sums is not None:
        whole.model.sparse_arch.set_accumulators(sums)
    whole.model.load_state_dict(hybrid.dense_state(run), strict=False)
    whole.dense_optimizer.load_state_dict(run.dense_optimizer.state_dict())
    whole.step, whole.losses = run.step, run.losses
    ckpt.save(whole, path)
