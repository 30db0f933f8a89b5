"""The roofline's memory microbenchmark and the limits cache: sane rates, sizes from the tables, measured once."""

import json
import math
import types

import pytest
import torch

from dlrm_study import config, settings
from dlrm_study.errors import UsageError
from dlrm_study.measure import context, limits_cache, membench
from dlrm_study.measure import limits as machine_limits
from dlrm_study.measure.bench import bound_fields, within_bound
from dlrm_study.model import kernels
from dlrm_study.perfmodel import roofline
from dlrm_study.perfmodel.operator_bounds import BEATEN
from dlrm_study.perfmodel.roofline import Access
from dlrm_study.records import columns as col

SMALL = [Access("gather", 32, 64, 50_000), Access("gather", 64, 64, 50_000), Access("update", 64, 64, 50_000)]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh limits cache, and no measurements remembered by this process."""
    monkeypatch.setenv(settings.LIMITS_CACHE, str(tmp_path / "limits.json"))
    monkeypatch.setattr(context, "_PROCESS", context.RunContext())
    monkeypatch.setattr(machine_limits, "load_beside_me", lambda: 0.0)  # a quiet machine (see the load tests)
    return tmp_path / "limits.json"


def sane(limits: dict[str, float]) -> bool:
    """Rates and latencies finite and positive; prefetch distances (0: none best) among those searched."""
    distances = {k: v for k, v in limits.items() if membench.rate_key(k) is not None}
    rest = [v for k, v in limits.items() if k not in distances]
    searched = set(distances.values()) <= set(membench.DISTANCES)
    return all(math.isfinite(v) and 0 < v < 100_000 for v in rest) and searched


@pytest.mark.parametrize("path", ["cpp", "torch"])
def test_rates_are_sane_on_either_path(path, monkeypatch):
    if path == "torch":
        monkeypatch.setattr(kernels, "load", lambda: None)
    elif kernels.load() is None:
        pytest.skip("no C++ kernels here")
    limits = membench.measure(SMALL, ids=membench.MIN_IDS, repeats=2)
    latencies = {a.latency_key for a in SMALL if a.kind == "gather"} if path == "cpp" else set()
    distances = {membench.ahead_key(a) for a in SMALL} if path == "cpp" else set()  # C++ probes only
    assert set(limits) == {a.key for a in SMALL} | latencies | distances and sane(limits)


def test_buffer_is_the_tables_size_and_ids_are_bounded(monkeypatch):
    """Sized from what the bound needs (the tables), never from the cache size a VM reports."""
    sizes, calls = [], []
    real_empty = membench.hugepages.empty
    monkeypatch.setattr(membench.hugepages, "empty", lambda n, dtype: sizes.append(n * 4) or real_empty(n, dtype=dtype))
    real_calls = membench.calls
    monkeypatch.setattr(membench, "calls", lambda buffer, ids, a: calls.append(len(ids)) or real_calls(buffer, ids, a))
    tiny = config.load("tiny", ["train.loop=optimized", "train.precision=bf16"])
    membench.measure(roofline.needs(tiny)["accesses"], ids=10**9, repeats=1)
    assert sizes == [4000 * 32]  # 4 tables of 1,000 rows of 8 fp32 words (or [hi | lo] bf16 halves)
    assert calls == [membench.MAX_IDS] * 4  # gather fp32 and bf16, update, the interaction's stream
    membench.measure([Access("update", 64, 64, 10**12)], ids=1, repeats=1, max_bytes=2**20)
    assert sizes[-1] == 2**20 and calls[-1] == membench.MIN_IDS  # tables past the memory: as much as fits


def test_roofline_never_takes_a_scatter_path(cache, monkeypatch):
    """index_add_ on small bf16 rows copies the whole table per call (the AMX VM's 15 minutes): not used."""

    def refuse(*args, **kwargs):
        raise AssertionError("index_add_ in the roofline")

    monkeypatch.setattr(torch.Tensor, "index_add_", refuse)
    for kernel_path in ("cpp", "torch"):
        if kernel_path == "torch":
            monkeypatch.setattr(kernels, "load", lambda: None)
        tiny = config.load("tiny", ["train.loop=optimized", "train.precision=bf16"])
        assert sane(membench.measure(roofline.needs(tiny)["accesses"], ids=membench.MIN_IDS, repeats=1))


def test_limits_are_measured_once_then_read_from_the_cache(cache, monkeypatch):
    tiny = config.load("tiny", ["train.loop=optimized", "train.precision=bf16"])
    first = machine_limits.measure_limits(quick=True, **roofline.needs(tiny))
    assert cache.is_file() and sane(first)

    def measured(*args):
        if args and args[0]:
            raise AssertionError(f"measured again: {args[0]}")
        return {}

    monkeypatch.setattr(context, "_PROCESS", context.RunContext())  # a new process: only the file remembers
    monkeypatch.setattr(membench, "measure", measured)
    monkeypatch.setattr(machine_limits, "gemm_limits", measured)
    monkeypatch.setattr(machine_limits, "layer_gemm_limits", measured)
    assert machine_limits.measure_limits(quick=True, **roofline.needs(tiny)) == first
    with pytest.raises(AssertionError, match="measured again"):  # a quick measurement does not serve a full one
        machine_limits.measure_limits(quick=False, **roofline.needs(tiny))
    monkeypatch.setattr(limits_cache, "key", lambda threads: "another machine")
    with pytest.raises(AssertionError, match="measured again"):
        machine_limits.measure_limits(quick=True, **roofline.needs(tiny))


def test_cache_key_names_machine_threads_torch_and_code():
    key = limits_cache.key(3)
    assert key.startswith(limits_cache.machine_key() + "|3t|torch ") and "|code " in key


def test_a_full_measurement_replaces_a_quick_one_never_the_reverse(cache):
    limits_cache.store(2, True, {"x": 1.0})
    assert limits_cache.load(2, True) == {"x": 1.0} and limits_cache.load(2, False) == {}
    limits_cache.store(2, False, {"x": 2.0})
    limits_cache.store(2, True, {"x": 3.0})
    assert limits_cache.load(2, True) == limits_cache.load(2, False) == {"x": 2.0}


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '{"k": {"x": {"value": "fast", "quick": true}}}'])
def test_a_broken_cache_is_measured_again(cache, monkeypatch, text):
    cache.write_text(text)
    monkeypatch.setattr(limits_cache, "key", lambda threads: "k")
    assert limits_cache.load(2, True) == {}
    limits_cache.store(2, True, {"x": 1.0})
    assert json.loads(cache.read_text())["k"]["x"] == {"value": 1.0, "quick": True}


def test_the_cache_can_be_switched_off(monkeypatch):
    monkeypatch.setenv(settings.LIMITS_CACHE, "off")
    limits_cache.store(2, True, {"x": 1.0})
    assert limits_cache.path() is None and limits_cache.load(2, True) == {}


def test_roofline_measures_anew_and_the_cache_keeps_the_higher_rate(cache, monkeypatch):
    tiny = config.load("tiny", ["train.loop=optimized"])
    key = roofline.accesses(tiny)["update"].key
    rates = iter([1.0, 5.0, 2.0])
    monkeypatch.setattr(
        membench, "measure", lambda accesses, *a: {x.key: next(rates) for x in accesses if x.key == key}
    )
    limits = [machine_limits.measure_limits(quick=True, accesses=[roofline.accesses(tiny)["update"]], fresh=True)[key]]
    limits += [machine_limits.measure_limits(quick=True, accesses=[roofline.accesses(tiny)["update"]], fresh=True)[key]]
    limits += [machine_limits.measure_limits(quick=True, accesses=[roofline.accesses(tiny)["update"]], fresh=True)[key]]
    assert limits == [1.0, 5.0, 5.0] and limits_cache.load(torch.get_num_threads(), True)[key] == 5.0


CPP = kernels.load()
needs_cpp = pytest.mark.skipif(CPP is None, reason="no C++ kernels here")


@needs_cpp
@pytest.mark.parametrize("ahead", [0, 3, 128])
def test_gather_probe_reads_every_word_of_each_row_independently(ahead):
    """No bag, no accumulator in memory: the checksum is every read word of every row, any row size (14 words:
    a tail past the 8 register lanes), any distance in rows. Fails before: the old probe took a bag size."""
    buffer = torch.randint(0, 100, (64 * 40,), dtype=torch.int32, generator=torch.Generator().manual_seed(1))
    ids = torch.tensor([3, 7, 3, 0, 39, 12, 5])
    rows = buffer.view(40, 64)[:, :14]
    assert CPP.membench_gather(buffer, ids, 256, 56, ahead) == int(rows[ids].sum())


@needs_cpp
def test_update_probe_reads_modifies_and_writes_each_row():
    buffer = torch.zeros(16 * 10, dtype=torch.int32)
    CPP.membench_update(buffer, torch.tensor([2, 5, 9]), 64, 32, 8)
    want = torch.zeros(10, 16, dtype=torch.int32)
    want[[2, 5, 9], :8] = torch.arange(8, dtype=torch.int32) | 1  # one add per word of the 32 bytes touched
    assert torch.equal(buffer.view(10, 16), want)


@needs_cpp
def test_stream_and_chase_probes():
    buffer = torch.ones(4096, dtype=torch.int32)
    assert CPP.membench_stream(buffer, 1024 * 4) == 1024  # the first 4 KiB, every word once
    order = torch.randperm(50)
    following = torch.empty(50, dtype=torch.int64)
    following[order] = order.roll(-1)
    assert 0 < CPP.membench_chase(buffer, following, 64, 500) < 1e6  # ns per dependent hop


def test_a_loaded_machine_measures_but_keeps_nothing(cache, monkeypatch, capsys):
    """Limits are a quiet machine's: measured under load, they serve this process, are never cached, one line
    says so; quiet again, they are kept. Fails before: every measurement was cached."""
    key = SMALL[2].key
    monkeypatch.setattr(membench, "measure", lambda accesses, *a: {x.key: 1.0 for x in accesses})
    monkeypatch.setattr(
        machine_limits, "gemm_limits", lambda r: {f"gemm_{n}_gflops": 9.0 for n in machine_limits.gemm_dtypes()}
    )
    monkeypatch.setenv(settings.LOAD_MAX, "1")
    monkeypatch.setattr(machine_limits, "load_beside_me", lambda: 3.0)
    assert machine_limits.measure_limits(quick=True, accesses=[SMALL[2]])[key] == 1.0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "loaded" in err[0] and "not kept" in err[0] and not cache.exists()
    monkeypatch.setattr(context, "_PROCESS", context.RunContext())
    monkeypatch.setattr(machine_limits, "load_beside_me", lambda: 0.5)
    machine_limits.measure_limits(quick=True, accesses=[SMALL[2]])
    assert limits_cache.load(torch.get_num_threads(), True)[key] == 1.0


@pytest.mark.parametrize("text", ["-1", "lots"])
def test_a_bad_load_allowance_is_refused_in_one_line(monkeypatch, text):
    monkeypatch.setenv(settings.LOAD_MAX, text)
    with pytest.raises(UsageError, match=settings.LOAD_MAX):
        machine_limits.load_max()


def test_a_bound_a_loop_beats_is_measured_again_before_its_record(cache, monkeypatch, capsys):
    """A record faster than its bound has the limits behind that part measured again at once (only them), is
    bounded by the new ones, and is flagged only if it still beats them; later repeats get the new limits.
    Fails before: the record was written against the beaten bound, its limits measured again only later."""
    tiny = config.load("tiny", ["train.loop=optimized"])
    gather = roofline.accesses(tiny)["gather_fp32"]
    rate, measured = {"gbps": 1.0}, []

    def measure(accesses, *args):
        measured.extend([sorted(a.key for a in accesses)] if accesses else [])
        return {a.key: rate["gbps"] for a in accesses}

    def layers(shapes, repeats):
        dtypes, passes = machine_limits.gemm_dtypes(), roofline.GEMM_PASSES
        return {roofline.layer_key(p, s, g): 9.0 for p in dtypes for s in shapes for g in passes}

    monkeypatch.setattr(membench, "measure", measure)
    monkeypatch.setattr(machine_limits, "layer_gemm_limits", layers)
    monkeypatch.setattr(
        machine_limits, "gemm_limits", lambda r: {f"gemm_{n}_gflops": 9.0 for n in machine_limits.gemm_dtypes()}
    )
    limits = machine_limits.measure_limits(quick=True, **roofline.needs(tiny))
    assert isinstance(limits, machine_limits.Limits) and limits.quick and len(measured) == 1
    forward = "embedding_forward"
    fields = {col.MS_MEDIAN: 1e6, **bound_fields(tiny, limits, 1e6)}  # a record as `bench` makes it
    slow_bound = fields[col.bound_column(forward)]
    fields[col.op_column(forward)] = slow_bound / 2  # twice as fast as the bound allows

    rate["gbps"] = 1000.0  # the machine measured again: the loop no longer beats its bound
    bounded = within_bound(tiny, limits, dict(fields))
    assert measured[1:] == [[gather.key]]  # only the beaten part's limits, once
    assert bounded[BEATEN] == "" and bounded[col.bound_column(forward)] < slow_bound / 2
    assert limits[gather.key] == 1000.0  # in place: the next repeat is bounded by them too
    assert "measured again before the record is written" in capsys.readouterr().err

    fields = {**bounded, col.op_column(forward): bounded[col.bound_column(forward)] / 2}  # faster than that too
    again = within_bound(tiny, limits, fields)
    assert measured[2:] == [[gather.key]] and again[BEATEN] == forward  # still faster: flagged

    by_hand = dict(limits)  # limits given by hand: nothing of this machine to measure again, only flagged
    assert within_bound(tiny, by_hand, fields)[BEATEN] == forward and len(measured) == 3
    assert machine_limits.remeasured(tiny, limits, {col.MS_MEDIAN: 5.0, col.ROOFLINE_MS: 4.0}) == {}


def test_the_cache_keeps_the_lower_latency():
    assert limits_cache.better("chase_64B_9rows_ns", 80.0, 90.0) and not limits_cache.better("x_gbps", 80.0, 90.0)


def test_ids_are_drawn_table_by_table_as_the_loops_walk_them():
    """An equal share of the ids per table, uniform within it, in table order: while a table is walked, its rows
    are the footprint, not all tables'. Fails before: ids were uniform over all rows at once."""
    access = Access("gather", 64, 64, 600, (100, 200, 300))
    ids = membench.draw(access, 3000, 64 * 600, torch.Generator().manual_seed(0))
    first, second, third = ids.split(1000)
    assert first.max() < 100 and second.min() >= 100 and second.max() < 300 and 300 <= third.min() < third.max() < 600
    halved = membench.draw(access, 3000, 64 * 300, torch.Generator().manual_seed(0))  # half the rows fit: each halved
    assert halved.split(1000)[2].max() < 300 and halved.split(1000)[2].min() >= 150


@needs_cpp
@pytest.mark.parametrize("read", [256, 128])
def test_the_fused_forward_is_timed_beside_the_probes(read):
    """The limit is never below a loop the study runs: the fused forward over the same rows is one of the timed
    calls, on normal floats (bf16 1.0 halves), in fp32 rows or the upper halves of [hi | lo] rows."""
    access = Access("gather", read, 256, 1000)
    buffer = torch.full((64 * 1000,), membench.ONES, dtype=torch.int32)
    fns = membench.calls(buffer, torch.randint(0, 1000, (250,)), access)
    assert len(fns) == len(membench.DISTANCES) + 1
    pooled = fns[-1]()
    assert pooled.shape == (3, 1, read // 4 if read == 256 else read // 2) and torch.isfinite(pooled).all()
    if read == 128:
        assert pooled[0, 0, 0] == membench.BAG  # bf16 1.0 summed over a bag


def test_the_best_distance_is_the_fastest_probes_not_the_fused_forwards():
    """The kernels run the distance of the fastest probe; the fused forward timed after the probes is no probe."""
    probes = [3.0] * len(membench.DISTANCES)
    probes[2] = 1.0
    assert membench.best_distance([*probes, 0.5]) == membench.DISTANCES[2]


def test_a_prefetch_distance_is_kept_and_dropped_with_its_rate(cache):
    """A distance is no rate: the cache keeps the one found with the rate it keeps, and drops it with that rate.
    Fails before: a distance was kept as if higher were better, beside a rate found at another distance."""
    access = SMALL[0]
    rate, ahead = access.key, membench.ahead_key(access)
    assert membench.rate_key(ahead) == rate and membench.rate_key(rate) is None
    threads = torch.get_num_threads()
    for measured in ({rate: 5.0, ahead: 16.0}, {rate: 3.0, ahead: 64.0}):  # the slower rate's distance: not kept
        limits_cache.store(threads, True, measured)
    assert limits_cache.load(threads, True) == {rate: 5.0, ahead: 16.0}
    limits_cache.store(threads, True, {rate: 7.0, ahead: 2.0})
    assert limits_cache.load(threads, True) == {rate: 7.0, ahead: 2.0}
    assert limits_cache.merge({rate: 6.0, ahead: 64.0}, {rate: 7.0, ahead: 2.0}) == {rate: 7.0, ahead: 2.0}
    assert limits_cache.merge({rate: 8.0, ahead: 64.0}, {rate: 7.0, ahead: 2.0}) == {rate: 8.0, ahead: 64.0}
    limits_cache.forget(threads, [rate])
    assert limits_cache.load(threads, True) == {}


@needs_cpp
def test_the_kernels_run_the_distance_the_probes_found_and_records_say_it():
    """`use_prefetch` sets the fused kernels' distances to the probes' for the config's rows (the precision's
    gather, the update) and says which ran; the kernels' default where no probe ran; nothing for other kernels."""
    previous = CPP.set_prefetch_rows(-1, -1)
    try:
        for precision in ("fp32", "bf16"):
            cfg = config.load("tiny", ["train.loop=optimized", f"train.precision={precision}"])
            rows = roofline.accesses(cfg)
            gather, update = rows[f"gather_{precision}"], rows["update"]
            found = {membench.ahead_key(gather): 4.0, membench.ahead_key(update): 9.0}
            other = {membench.ahead_key(rows["gather_bf16" if precision == "fp32" else "gather_fp32"]): 7.0}
            fields = machine_limits.use_prefetch(cfg, found | other, types.SimpleNamespace(kernel_path="cpp"))
            assert CPP.prefetch_rows(gather.read, update.read) == [4, 9]
            assert fields == {machine_limits.PREFETCH_GATHER: 4, machine_limits.PREFETCH_UPDATE: 9,
                              machine_limits.PREFETCH_FROM: "probe"}  # fmt: skip
        fields = machine_limits.use_prefetch(cfg, None, types.SimpleNamespace(kernel_path="cpp"))
        CPP.set_prefetch_rows(-1, -1)
        default = CPP.prefetch_rows(gather.read, update.read)
        assert fields[machine_limits.PREFETCH_FROM] == "default"
        assert [fields[machine_limits.PREFETCH_GATHER], fields[machine_limits.PREFETCH_UPDATE]] == default
        assert machine_limits.use_prefetch(cfg, found, types.SimpleNamespace(kernel_path="torch")) == {}
    finally:
        CPP.set_prefetch_rows(*previous)


@needs_cpp
def test_cpu_records_say_the_prefetch_distance_the_kernels_ran(tiny):
    """A record of the C++ kernels says the distances they ran (the default here: no limits measured); a loop
    without them says none. Fails before: the distance was nowhere in the record."""
    from dlrm_study.measure.bench import bench

    tiny.train.loop = config.Loop.OPTIMIZED
    record = bench(tiny, steps=1, warmup=0, profile_steps=0, progress=False)
    assert record[machine_limits.PREFETCH_FROM] == "default" and record[machine_limits.PREFETCH_GATHER] > 0
    tiny.train.loop = config.Loop.REFERENCE
    assert machine_limits.PREFETCH_FROM not in bench(tiny, steps=1, warmup=0, profile_steps=0, progress=False)


@needs_cpp
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_fused_gather_is_checked_against_embedding_bag_paired(precision, monkeypatch):
    """The paired check times the fused forward and torch's EmbeddingBag on the same rows and bags, in turn in
    every round (the order alternating), and reports medians and the median ratio, one per round."""
    calls = []
    real_bag = membench.F.embedding_bag
    monkeypatch.setattr(membench.F, "embedding_bag", lambda *a, **k: calls.append("bag") or real_bag(*a, **k))
    real_fused = CPP.forward_bf16 if precision == "bf16" else CPP.forward_fp32

    class Spy:  # the kernels, with the forward counted
        def __getattr__(self, name):
            return getattr(CPP, name)

    spy = Spy()
    setattr(spy, f"forward_{precision}", lambda *a: calls.append("fused") or real_fused(*a))
    monkeypatch.setattr(kernels, "load", lambda: spy)
    cfg = config.load("tiny", ["train.loop=optimized", f"train.precision={precision}"])
    previous = CPP.set_prefetch_rows(-1, -1)
    try:
        paired = machine_limits.versus_embedding_bag(cfg, None, quick=True)
    finally:
        CPP.set_prefetch_rows(*previous)
    assert paired[machine_limits.PAIRED_ROUNDS] == membench.PAIRED_ROUNDS
    assert paired[machine_limits.PAIRED_FUSED_MS] > 0 and paired[machine_limits.PAIRED_BAG_MS] > 0
    assert paired[machine_limits.PAIRED_SPEEDUP] > 0 and "paired" in machine_limits.paired_line(paired)
    per_call = len(calls) // (2 * membench.PAIRED_ROUNDS)  # calls of each kernel in a round
    rounds = [calls[i : i + 2 * per_call] for i in range(0, len(calls), 2 * per_call)]
    assert per_call > 1 and len(calls) == 2 * per_call * membench.PAIRED_ROUNDS
    assert [r[0] for r in rounds] == ["fused", "bag"] * (membench.PAIRED_ROUNDS // 2) + ["fused"]
    assert all(sorted(r) == sorted(["fused", "bag"] * per_call) for r in rounds)


def test_the_paired_check_needs_the_cpp_kernels(monkeypatch):
    monkeypatch.setattr(kernels, "load", lambda: None)
    assert machine_limits.versus_embedding_bag(config.load("tiny", ["train.loop=optimized"]), None) == {}
