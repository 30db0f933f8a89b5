"""The benchmark of one run: time training steps, break them down per operator.

Timed span = one training step (forward, loss, backward, update), the span
facebookresearch/dlrm reports as ms/it; making the batch is timed beside it as input
time. After the timed steps a few more run under the profiler, whose `dlrm:*` scopes
and autograd node names give the per-operator breakdown (profiled steps are never
part of the timing). The gpu loop is measured by `measure.gpu.measure_training` instead:
blocks of many steps over batches already on the device, one event pair per block.
"""

import statistics
from collections.abc import Callable

from tqdm import tqdm  # a plain bar: no widget warning in notebooks

from dlrm_study.config import Config, Loop
from dlrm_study.measure.cpu import breakdown, timed_batch, timed_step
from dlrm_study.measure.prepared import Prepared, prepare, what_ran
from dlrm_study.measure.timing import peak_memory, reset_peak_memory, step_times
from dlrm_study.model.tables import SparseArch, make_sparse_arch
from dlrm_study.model.tables.base import counters
from dlrm_study.perfmodel import roofline
from dlrm_study.records import columns as col


def bench(
    cfg: Config,
    steps: int,
    warmup: int = 3,
    profile_steps: int = 2,
    progress: bool = True,
    limits: dict[str, float] | None = None,
    make_arch: Callable[..., SparseArch] = make_sparse_arch,
) -> dict[str, object]:
    """Build the config's run and measure it once (`measure_prepared`): the measured fields."""
    prepared = prepare(cfg, make_arch)
    try:
        return measure_prepared(prepared, steps, warmup, profile_steps, progress, limits)
    finally:
        prepared.close()


def measure_prepared(
    prepared: Prepared,
    steps: int,
    warmup: int = 3,
    profile_steps: int = 2,
    progress: bool = True,
    limits: dict[str, float] | None = None,
) -> dict[str, object]:
    """Warm the run up, time `steps` training steps, profile a few more: the measured fields.

    The fields say what ran (loop, sparse arch, precision, whether bf16 was native) and how
    long it took; `results.record` (through `measure.runner`) turns them into a record. With
    the machine's measured `limits` (`roofline.measure_limits`) they carry the roofline bound
    and the achieved fraction of it. A run measured again (the next repeat) warms up again.
    """
    cfg, run, batches = prepared.cfg, prepared.run, prepared.batches
    if cfg.train.loop == Loop.GPU:  # block timing over device-resident batches, the step captured
        from dlrm_study.measure import gpu  # it builds on this module

        fields = gpu.measure_training(prepared, steps, warmup, profile_steps)
        bound = roofline.bound_ms(cfg, limits) if limits else {}
        if bound:
            bound["roofline_fraction"] = bound[col.ROOFLINE_MS] / fields[col.MS_MEDIAN]
        return {**fields, **bound}
    reset_peak_memory(run.device)
    bar = tqdm(total=warmup + steps + profile_steps, desc=f"bench {cfg.name} {cfg.train.loop}", disable=not progress)
    step_ms, input_ms = [], []
    arch = run.model.sparse_arch
    for i in range(warmup + steps):
        if i == warmup:
            counters(arch)  # counters (a cache's hits) from here on only
        batch, input_time = timed_batch(batches, run)
        ms = timed_step(run, batch)
        if i >= warmup:
            step_ms.append(ms)
            input_ms.append(input_time * 1e3)
        bar.update()
    counts = counters(arch)
    operators = breakdown(run, batches, profile_steps, bar)
    bar.close()
    times = step_times(step_ms, cfg.train.batch_size)
    bound = roofline.bound_ms(cfg, limits) if limits else {}
    if bound:
        bound["roofline_fraction"] = bound[col.ROOFLINE_MS] / times[col.MS_MEDIAN]
        bound |= roofline.rates(cfg, limits)
    return {
        **what_ran(run),
        col.STEPS: steps,
        col.WARMUP: warmup,
        **times,
        col.INPUT_MS_MEDIAN: statistics.median(input_ms),
        **counts,
        **col.Breakdown(operators).fields(),
        **peak_memory(run.device),
        **bound,
    }
