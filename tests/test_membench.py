"""The roofline's memory microbenchmark and the limits cache: sane rates, sizes from the tables, measured once."""

import json
import math

import pytest
import torch

from dlrm_study import config
from dlrm_study.measure import limits as machine_limits
from dlrm_study.measure import limits_cache, membench
from dlrm_study.model import kernels
from dlrm_study.perfmodel import roofline
from dlrm_study.perfmodel.roofline import Access

SMALL = [Access("gather", 32, 64, 50_000), Access("gather", 64, 64, 50_000), Access("update", 64, 64, 50_000)]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh limits cache, and no measurements remembered by this process."""
    monkeypatch.setenv(limits_cache.VARIABLE, str(tmp_path / "limits.json"))
    monkeypatch.setattr(machine_limits, "_measured", {})
    return tmp_path / "limits.json"


def sane(limits: dict[str, float]) -> bool:
    return all(math.isfinite(v) and 0 < v < 100_000 for v in limits.values())


@pytest.mark.parametrize("path", ["cpp", "torch"])
def test_rates_are_sane_on_either_path(path, monkeypatch):
    if path == "torch":
        monkeypatch.setattr(kernels, "load", lambda: None)
    elif kernels.load() is None:
        pytest.skip("no C++ kernels here")
    limits = membench.measure(SMALL, ids=membench.MIN_IDS, repeats=2)
    assert set(limits) == {a.key for a in SMALL} and sane(limits)


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
    assert calls == [membench.MAX_IDS] * 3
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

    monkeypatch.setattr(machine_limits, "_measured", {})  # a new process: only the file remembers
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
    monkeypatch.setenv(limits_cache.VARIABLE, "off")
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
