"""A machine's measured limits, kept between runs: each is measured once per machine and software, then reused.

Why: `bench` and `compare` bound every run by the roofline, and measuring the limits again in every
process costs more than a short bench. The cache is one small JSON file (`path()`: the
`DLRM_STUDY_LIMITS_CACHE` variable, `off` for none, else `~/.cache/dlrm-study/limits.json`),
keyed by the machine's key, the thread count, torch's version and a hash of the code that
measures (`key`), so another machine, another torch or changed measuring code measures anew.
A quick measurement serves quick requests only; a full one serves both. Measured again (`dlrm-study
roofline` always measures), a limit keeps the higher rate: on a shared machine another job only
lowers a rate, and a limit is what the machine can do (a latency, `*_ns`, keeps the lower). A limit
that a loop beat is dropped (`forget`), so the next request measures it anew. A prefetch distance found by a
gather or update probe (`membench.ahead_key`) is no rate: it is kept, reused and dropped with its rate.
"""

import functools
import hashlib
import json
import os
from pathlib import Path

import torch

from dlrm_study import settings
from dlrm_study.measure import membench
from dlrm_study.model import kernels
from dlrm_study.records.machine import machine_key

MEASURING = ("measure/limits.py", "measure/membench.py")  # with the kernels' source: what measures


def path() -> Path | None:
    """Where the cache lives, None where it is switched off."""
    return settings.cache_path(settings.current().limits_cache, "limits.json")


def key(threads: int) -> str:
    """What limits measured here now are keyed by: machine, threads, torch, the measuring code."""
    return f"{machine_key()}|{threads}t|torch {torch.__version__}|code {code_hash()}"


@functools.cache
def code_hash() -> str:
    """A short hash of the code that measures: the measuring modules and the kernels' source."""
    package = Path(__file__).resolve().parents[1]
    sources = [package / name for name in MEASURING] + [kernels.SOURCE]
    return hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:12]


def load(threads: int, quick: bool) -> dict[str, float]:
    """The cached limits that serve a request (a quick one takes full measurements too)."""
    entries = read().get(key(threads), {})
    return {name: float(e["value"]) for name, e in entries.items() if valid(e) and (quick or not e["quick"])}


def valid(entry: object) -> bool:
    """An entry as `store` writes it (a hand-edited or truncated one is measured again)."""
    return isinstance(entry, dict) and isinstance(entry.get("value"), float) and isinstance(entry.get("quick"), bool)


def store(threads: int, quick: bool, limits: dict[str, float]) -> None:
    """Add measured limits: a full measurement replaces a quick one (never the reverse), a higher rate a lower;
    a prefetch distance (`membench.ahead_key`) is kept with the rate it was found with, never apart from it."""
    where = path()
    if where is None or not limits:
        return
    cache = read()
    entries = cache.setdefault(key(threads), {})
    kept = set()
    for name in sorted(limits, key=lambda n: membench.rate_key(n) is not None):  # rates before their distances
        value, old, rate = limits[name], entries.get(name), membench.rate_key(name)
        if rate is not None:
            replaces = rate in kept or not valid(old)
        else:
            replaces = old["quick"] == quick and better(name, value, old["value"]) if valid(old) else True
            replaces = replaces or (old["quick"] and not quick)
        if replaces:
            entries[name] = {"value": float(value), "quick": quick}
            kept.add(name)
    write(cache)


def merge(now: dict[str, float], cached: dict[str, float]) -> dict[str, float]:
    """The better of each limit measured now and cached (`better`), each prefetch distance the one found with
    the rate kept."""
    merged = dict(now)
    for name, value in cached.items():
        if membench.rate_key(name) is None and (name not in now or better(name, value, now[name])):
            merged[name] = value
    for name, value in cached.items():
        rate = membench.rate_key(name)
        if rate is not None and (name not in now or (rate in cached and merged.get(rate) == cached[rate])):
            merged[name] = value
    return merged


def better(name: str, value: float, old: float) -> bool:
    """Whether `value` is the better limit: a higher rate, or a lower latency (`*_ns`)."""
    return value < old if name.endswith("_ns") else value > old


def forget(threads: int, names: list[str]) -> None:
    """Drop these cached limits (a loop beat a bound made of them): the next request measures them again."""
    cache = read()
    entries = cache.get(key(threads), {})
    stale = set(names) | {name for name in entries if membench.rate_key(name) in names}  # with their distances
    dropped = [name for name in sorted(stale) if entries.pop(name, None) is not None]
    if dropped:
        write(cache)


def write(cache: dict[str, dict]) -> None:
    """Replace the cache file with `cache` (nothing where the cache is off)."""
    where = path()
    if where is None:
        return
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        tmp = where.with_name(f".{where.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache, indent=1, sort_keys=True))
        os.replace(tmp, where)  # readers see the old file or the new one, never half of one
    except OSError:
        pass  # a cache that cannot be written only costs a measurement next time


def read() -> dict[str, dict]:
    """The whole cache; empty where there is none or it is not one (then it is rewritten)."""
    where = path()
    if where is None:
        return {}
    try:
        cache = json.loads(where.read_text())
    except (OSError, ValueError):
        return {}
    return cache if isinstance(cache, dict) and all(isinstance(v, dict) for v in cache.values()) else {}
