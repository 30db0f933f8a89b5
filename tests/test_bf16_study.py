import math

import pandas as pd
import pytest

from dlrm_study.analysis import bf16
from dlrm_study.records.columns import OPERATORS


def record(machine: str, variant: str, repeat: int, speed: float, ops: dict[str, float], **extra) -> dict:
    """One clean record: its operators sum to its median step, steps evenly timed."""
    ms = sum(ops.values()) / speed
    return {"machine": machine, "study": "cpu-loops-quick", "config_name": "p", "variant": variant, "repeat": repeat,
            "config_hash": variant, "samples_per_s": 1000 / ms, "ms_median": ms, "ms_p10": ms, "ms_p90": ms,
            **{f"op_{name}_ms": ops.get(name, 0.0) / speed for name in OPERATORS}, **extra}  # fmt: skip


FP32 = {"top_mlp": 40.0, "dense_backward": 80.0, "embedding_forward": 40.0, "other": 2.0}


def test_operator_ratios_pair_within_repeats_per_machine() -> None:
    """A machine whose bf16 GEMMs are 1.5x slower and whose gather is 2x faster, in repeats that
    drift (the machine ran 20% faster in repeat 1): each operator's ratio is exact."""
    slower_gemms = {"top_mlp": 60.0, "dense_backward": 120.0, "embedding_forward": 20.0, "other": 2.0}
    rates = {"roofline_gemm_fp32_gflops": 150.0, "roofline_gemm_bf16_gflops": 100.0,
             "roofline_gather_fp32_gbps": 4.0, "roofline_gather_bf16_gbps": 3.0}  # fmt: skip
    records = []
    for repeat, speed in enumerate([1.0, 1.2, 1.0]):
        records += [record("xeon", "optimized-fp32", repeat, speed, FP32, **rates),
                    record("xeon", "optimized-bf16", repeat, speed, slower_gemms, **rates),
                    record("zen4", "optimized-fp32", repeat, speed, FP32),
                    record("zen4", "optimized-bf16", repeat, speed, FP32),
                    record("zen4", "reference", repeat, speed, FP32)]  # fmt: skip
    table = bf16.bf16_vs_fp32(pd.DataFrame(records)).set_index(["machine", "quantity"])
    xeon = table.loc["xeon"]
    assert xeon.loc["top_mlp", "center"] == pytest.approx(1.5) and xeon.loc["top_mlp", "n"] == 3
    assert xeon.loc["top_mlp", "low"] == pytest.approx(1.5) and xeon.loc["top_mlp", "high"] == pytest.approx(1.5)
    assert xeon.loc["embedding_forward", "center"] == pytest.approx(0.5)
    assert xeon.loc["samples/s", "center"] == pytest.approx(sum(FP32.values()) / sum(slower_gemms.values()))
    assert xeon.loc["GEMM rate (roofline)", "center"] == pytest.approx(100 / 150)
    assert xeon.loc["gather bytes/s (roofline)", "center"] == pytest.approx(3 / 4)
    assert math.isnan(xeon.loc["GEMM rate (roofline)", "low"])  # one measurement per run: no interval
    zen4 = table.loc["zen4"]
    assert zen4.loc["samples/s", "center"] == pytest.approx(1.0)
    assert "GEMM rate (roofline)" not in zen4.index  # its records carry no roofline rates
    shown = bf16.explain(table.loc["xeon"].reset_index())
    assert shown.loc["top_mlp", "bf16 / fp32"] == "1.50x [1.50, 1.50]" and shown.loc["top_mlp", "pairs"] == 3


def test_flagged_breakdowns_count_and_no_pair_is_no_row() -> None:
    records = [record("m", "optimized-fp32", 0, 1.0, FP32), record("m", "optimized-bf16", 0, 1.0, FP32)]
    records[1]["op_other_ms"] = 500.0  # the profiled operators no longer sum to the timed step: flagged
    table = bf16.bf16_vs_fp32(pd.DataFrame(records)).set_index("quantity")
    assert table.loc["other", "center"] == pytest.approx(500.0 / FP32["other"])  # every repeat counts, flagged too
    alone = bf16.bf16_vs_fp32(pd.DataFrame([records[0]]))
    assert alone.empty and bf16.summary(alone).empty and not list(bf16.breakdowns(alone))


def test_summary_and_breakdowns_per_run(tmp_path) -> None:
    rates = {"roofline_gemm_fp32_gflops": 150.0, "roofline_gemm_bf16_gflops": 300.0,
             "roofline_gather_fp32_gbps": 4.0, "roofline_gather_bf16_gbps": 4.0}  # fmt: skip
    faster = {"top_mlp": 20.0, "dense_backward": 40.0, "embedding_forward": 20.0, "other": 2.0}
    records = [record("zen4", "optimized-fp32", r, 1.0, FP32, **rates) for r in range(2)]
    records += [record("zen4", "optimized-bf16", r, 1.0, faster, **rates) for r in range(2)]
    records += [record("old", v, 0, 1.0, FP32) | {f"op_{n}_ms": None for n in OPERATORS}
                for v in ("optimized-fp32", "optimized-bf16")]  # fmt: skip
    # protocol 2: both repeats timed after settling (`stored_records` reads the verdict's selection, which leaves out
    # protocol 1's repeat 0 as a warm-up)
    pd.DataFrame([r | {"protocol": 2} for r in records]).to_csv(tmp_path / "sweeps.csv", index=False)
    table = bf16.bf16_vs_fp32(bf16.stored_records(tmp_path))
    summary = bf16.summary(table)
    assert summary.loc[("zen4", "cpu-loops-quick", "p"), "GEMM bf16/fp32"] == "2.00x (one repeat: no interval)"
    assert summary.loc[("old", "cpu-loops-quick", "p"), "GEMM bf16/fp32"] == "not in the records"
    shown = dict(bf16.breakdowns(table))
    assert list(shown) == ["zen4 / cpu-loops-quick / p"]  # the old machine's records hold no breakdown
    assert shown["zen4 / cpu-loops-quick / p"].loc["top_mlp", "bf16 / fp32"] == "0.50x [0.50, 0.50]"
    assert bf16.stored_records(tmp_path / "nothing").empty


def test_an_earlier_codes_runs_are_not_pooled_into_the_table(tmp_path) -> None:
    """Issue 69: notebook 02's table pooled the AMX Xeon's earlier code with today's (2.21x over 192 pairs beside the
    verdict's 2.34x over 96). The table reads the verdict's selection: each machine's newest code alone."""
    records = []
    for fingerprint, day, bf16_speed in (("early", "2026-12-01", 3.0), ("today", "2026-12-05", 2.0)):
        for repeat in range(3):
            extra = {"train.loop": "optimized", "code_fingerprint": fingerprint, "run_id": fingerprint,
                     "timestamp": f"{day}T01:0{repeat}:00", "protocol": 2}  # fmt: skip
            records += [record("xeon", "optimized-fp32", repeat, 1.0, FP32, **extra),
                        record("xeon", "optimized-bf16", repeat, bf16_speed, FP32, **extra)]  # fmt: skip
    pd.DataFrame(records).to_csv(tmp_path / "sweeps.csv", index=False)
    table = bf16.bf16_vs_fp32(bf16.stored_records(tmp_path)).set_index("quantity")
    assert table.loc["samples/s", "n"] == 3 and table.loc["samples/s", "center"] == pytest.approx(2.0)
