"""The benchmark of one run: its device's timing (`measure.cpu`, `measure.gpu`) and the roofline bound.

The CPU loops are timed one step at a time and broken down per operator (`measure.cpu`); the gpu
loop in blocks of many steps over batches already on the device, one event pair per block
(`measure.gpu`). Either way the record says how far the step is from the roofline's bound.
"""

from collections.abc import Callable
from pathlib import Path

from dlrm_study.config import Config, Loop
from dlrm_study.config.variants import Variant
from dlrm_study.measure import cpu, gpu, runner
from dlrm_study.measure import limits as machine_limits
from dlrm_study.measure.prepared import Prepared, prepare
from dlrm_study.model.tables import SparseArch, make_sparse_arch
from dlrm_study.perfmodel import roofline
from dlrm_study.perfmodel.operator_bounds import BEATEN, beaten, operator_bounds
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


def measure_once(
    cfg: Config,
    steps: int,
    warmup: int,
    profile_steps: int,
    limits: dict[str, float] | None = None,
    make_arch: Callable[..., SparseArch] = make_sparse_arch,
) -> dict[str, object]:
    """One repeat's measured fields, built once (what a study that launched this process reads back)."""
    return {**bench(cfg, steps, warmup, profile_steps, False, limits, make_arch), col.BUILDS: "once"}


def bench_repeats(
    cfg: Config,
    repeats: int,
    steps: int,
    warmup: int,
    profile_steps: int,
    out: Path | None,
    study: str,
    limits: dict[str, float] | None = None,
    make_arch: Callable[..., SparseArch] = make_sparse_arch,
    progress: bool = True,
) -> list[dict[str, object]]:
    """`repeats` measurements of one build of `cfg` (each warmed up anew), recorded to `out` as they are made."""
    prepared = prepare(cfg, make_arch)

    def measure(task: runner.Task) -> dict[str, object]:
        fields = measure_prepared(prepared, steps, warmup, profile_steps, progress, limits)
        return {**fields, col.BUILDS: "once"}

    records: list[dict[str, object]] = []
    tasks = runner.schedule([(cfg.name, {Variant.of(cfg).name: cfg})], repeats, runner.machine_of)
    try:
        runner.run(tasks, measure, out, study, resume=False, record_errors=False, progress=False,
                   on_record=records.append)  # fmt: skip
    finally:
        prepared.close()
    return records


def measure_prepared(
    prepared: Prepared,
    steps: int,
    warmup: int = 3,
    profile_steps: int = 2,
    progress: bool = True,
    limits: dict[str, float] | None = None,
) -> dict[str, object]:
    """Warm the run up, time `steps` training steps, profile a few more: the measured fields.

    The CPU loops step one batch at a time (`measure.cpu`); the gpu loop is timed in blocks of steps
    over device-resident batches (`measure.gpu`). The fields say what ran (loop, sparse arch,
    precision, whether bf16 was native) and how long it took; `measure.runner` turns them into a
    record. With the machine's measured `limits` (`measure.limits`) they carry the roofline bound
    and the achieved fraction of it. A run measured again (the next repeat) warms up again.
    """
    cfg = prepared.cfg
    if cfg.train.loop == Loop.GPU:
        fields = gpu.measure_training(prepared, steps, warmup, profile_steps)
    else:  # the fused kernels at this machine's prefetch distances (the probes'), said in the record
        prefetch = machine_limits.use_prefetch(cfg, limits, prepared.run.model.sparse_arch)
        fields = {**cpu.measure_steps(prepared, steps, warmup, profile_steps, progress), **prefetch}
    fields = {**fields, **bound_fields(cfg, limits, fields[col.MS_MEDIAN])}
    if limits and cfg.train.loop != Loop.GPU:
        fields = within_bound(cfg, limits, fields)
    return fields


def within_bound(cfg: Config, limits: dict[str, float], fields: dict[str, object]) -> dict[str, object]:
    """A CPU record's `fields` bounded by limits none of its parts beat.

    Where a part (an operator, or the step) ran faster than its bound, the limits behind it are measured
    again now (`measure.limits.remeasured`; `limits` is updated in place, so later repeats use them too)
    and the bound computed anew. A part still faster than the new bound is flagged (`BEATEN`: the bound is
    invalid here, and tables say so, never a share over 100%).
    """
    fresh = machine_limits.remeasured(cfg, limits, fields)
    if fresh:
        limits.update(fresh)
        fields = {**fields, **bound_fields(cfg, limits, fields[col.MS_MEDIAN])}
    return {**fields, BEATEN: ",".join(beaten(fields))}


def bound_fields(cfg: Config, limits: dict[str, float] | None, ms: float) -> dict[str, float]:
    """The roofline's bound on a step of `cfg` and the share of it a step of `ms` achieved; on the CPU
    also the rates the bound used and its split by operator (none without measured limits)."""
    if not limits:
        return {}
    bound = roofline.bound_ms(cfg, limits)
    bound["roofline_fraction"] = bound[col.ROOFLINE_MS] / ms
    return bound if cfg.train.loop == Loop.GPU else bound | roofline.rates(cfg, limits) | operator_bounds(cfg, limits)
