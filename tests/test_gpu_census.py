"""The GPU records counted and their samples/s read by one rule (`analysis.gpu_loop`), wherever a page prints them."""

import pandas as pd

from dlrm_study.analysis import gpu_loop
from dlrm_study.records import columns as col
from dlrm_study.report import quantities

NEW = "intel-xeon-f6m207s2/avx512f+avx512_bf16+amx_bf16/16cpu/nvidia-h200"
OLD = "intel-xeon/avx512f+avx512_bf16+amx_bf16/16cpu/nvidia-h200"


def row(machine: str, variant: str, capture: str, repeat: int, rate: float, day: str, commit: str) -> dict:
    return {
        col.MACHINE: machine, col.LOOP: "gpu", col.CAPTURE: capture, col.VARIANT: variant, col.REPEAT: repeat,
        col.RUN_ID: f"{machine}-run", col.THREADS: 16, col.PROTOCOL: 1, col.SAMPLES_PER_S: rate, col.ERROR: None,
        col.TIMESTAMP: f"{day}T01:0{repeat}:00", col.GIT_COMMIT: commit, col.DEVICE: "cuda",
    }  # fmt: skip


def records() -> pd.DataFrame:
    new = [row(NEW, "gpu-hbm", "graph", r, 100.0 + r, "2026-12-04", "5354afd") for r in range(3)]
    new += [
        row(NEW, v, "eager", r, 50.0, "2026-12-04", "5354afd") for v in ("gpu-host", "gpu-cached") for r in range(3)
    ]
    old = [row(OLD, "gpu-hbm", None, r, rate, "2026-12-01", "577ad01") for r, rate in enumerate([900.0, 10.0, 30.0])]
    return pd.DataFrame(new + old)


def test_a_gpu_point_s_rate_is_the_median_of_its_repeats_warm_up_out() -> None:
    """Protocol 1's repeat 0 is a warm-up: the median of the other two (issue 69: 431,332 of 3 repeats on the README,
    403,801 of 2 on docs/results.md, for one point)."""
    kept = gpu_loop.repeats(records())
    old = kept[kept[col.MACHINE] == OLD]
    assert list(old[col.REPEAT]) == [1, 2] and gpu_loop.rate(old) == 20.0


def test_the_census_counts_each_machine_s_records_as_they_ran() -> None:
    """Per machine: its records, dates and commits, the old loop's, the captured graph's and the eager ones (issue
    69: '36 of 36 captured (one CUDA graph)' while 10 host and cached records ran eager)."""
    kept = gpu_loop.repeats(records())
    new = gpu_loop.census(kept[kept[col.MACHINE] == NEW])
    assert (new.records, new.old, new.graph, new.eager) == (6, 0, 2, {"gpu-cached": 2, "gpu-host": 2})
    said = gpu_loop.census_said(new, NEW)
    assert (
        "6 GPU records, measured 2026-12-04 at commit 5354afd" in said
        and "4 records of the captured loop run eager" in said
    )
    old = gpu_loop.census(kept[kept[col.MACHINE] == OLD])
    assert (old.records, old.old, old.graph) == (2, 2, 0)
    page = "\n".join(gpu_loop.census_said(c, m) for c, m in ((new, NEW), (old, OLD)))
    counted = {s.label[-1]: s.value for s in quantities.gpu_record_counts(page, "page")}
    assert counted == {"GPU records, every machine's": "8", "GPU records of the old GPU loop, every machine's": "2"}


def test_a_title_says_whether_all_or_some_gpu_records_are_the_old_loops() -> None:
    from dlrm_study.analysis import gpu_loop

    old = pd.DataFrame({"loop": ["gpu", "gpu"], "capture": [None, None]})
    mixed = pd.DataFrame({"loop": ["gpu", "gpu", "reference"], "capture": [None, "graph", None]})
    new = pd.DataFrame({"loop": ["gpu"], "capture": ["eager"]})
    assert gpu_loop.label(old) == f" ({gpu_loop.OLD_LOOP})"
    assert gpu_loop.label(mixed) == f" ({gpu_loop.MIXED})"
    assert gpu_loop.label(new) == ""
