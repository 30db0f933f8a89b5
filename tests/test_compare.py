import pandas as pd
import pytest
import torch

from dlrm_study import config, platform
from dlrm_study.analysis.compare import report, upstream_report
from dlrm_study.cli.main import main
from dlrm_study.config.variants import CPU_LOOPS, REGISTRY
from dlrm_study.measure import limits as machine_limits
from dlrm_study.measure import sweep
from dlrm_study.measure.bench import bench
from dlrm_study.perfmodel import roofline
from dlrm_study.plans import sweep as sweep_plan
from dlrm_study.plans.sweep import runnable
from dlrm_study.records import store
from dlrm_study.studies.compare import compare
from dlrm_study.train import run as loop


def test_compare_interleaves_variants_and_reports_paired_ratios(tmp_path):
    pytest.importorskip("torchrec")
    cfgs = [config.load("tiny", REGISTRY[v]) for v in CPU_LOOPS]
    limits = machine_limits.measure_limits(quick=True, **roofline.needs(*cfgs))
    out = tmp_path / "bench.csv"
    records = compare(["tiny"], repeats=2, steps=2, warmup=1, out=out, progress=False, limits=limits)
    kept, _ = runnable(["reference", "optimized-fp32", "optimized-bf16", "torchrec"])
    first = [r["variant"] for r in records[: len(kept)]]  # the run's own order, drawn from its run id
    assert sorted(first) == sorted(kept)
    assert [r["variant"] for r in records[len(kept) :]] == first[1:] + first[:1]  # repeat 1 starts one later
    assert [r["repeat"] for r in records] == [0] * len(kept) + [1] * len(kept)
    assert all(r["roofline_ms"] > 0 and r["roofline_fraction"] > 0 for r in records)
    assert len(store.load(out)) == 2 * len(kept)
    text = report(records)
    assert "optimized fp32 / reference" in text and "target >= 2.2x" in text
    assert "optimized-fp32 time / bound" in text and "target <= 1.3x" in text


def test_report_arithmetic_pairs_within_repeats():
    def record(variant, repeat, rate, ms, bound):
        return {"config_name": "p", "variant": variant, "repeat": repeat, "samples_per_s": rate, "ms_median": ms,
                "roofline_ms": bound}  # fmt: skip

    records = []
    for repeat, speed in enumerate([1.0, 2.0, 1.0]):  # the machine ran twice as fast in repeat 1
        records += [
            record("reference", repeat, 100 * speed, 10 / speed, 1),
            record("optimized-bf16", repeat, 500 * speed, 2 / speed, 1.6),
            record("optimized-fp32", repeat, 200 * speed * (1 + 0.01 * repeat), 5 / speed, 2),
            record("torchrec", repeat, 250 * speed, 4 / speed, 1),
        ]
    text = " ".join(report(records).split())
    # Unpaired, each loop's interval is wide (the drift); paired within repeats, the ratios are exact.
    assert "reference 126 [47, 340] samples/s" in text  # the geometric mean of 100, 200, 100 and its interval
    assert "optimized bf16 / reference 5.00x [5.00, 5.00] target >= 4.0x: meets" in text
    assert "optimized bf16 / torchrec 2.00x [2.00, 2.00] target >= 2.5x: misses" in text
    assert "optimized fp32 / reference 2.02x [1.97, 2.07] target >= 2.2x: misses" in text
    noisy = [r for r in records if r["variant"] in ("reference", "optimized-fp32")]
    noisy.append(record("optimized-fp32", 3, 2000 * 0.95, 5, 2) | {"samples_per_s": 300})
    noisy.append(record("reference", 3, 100, 10, 1))
    line = next(line for line in report(noisy).splitlines() if "optimized fp32 / reference" in line)
    assert "2.23x" in line and "inconclusive (the interval spans the target)" in line  # one repeat at 3x


def test_bf16_over_fp32_is_judged_against_1_3x_or_85_percent_of_the_bound_ratio():
    def rows(bf16_rate, bf16_bound, native=True):
        out = []
        for repeat in range(3):
            out += [{"config_name": "p", "variant": "optimized-fp32", "repeat": repeat, "samples_per_s": 100.0,
                     "ms_median": 10.0, "roofline_ms": 2.0},
                    {"config_name": "p", "variant": "optimized-bf16", "repeat": repeat, "ms_median": 10.0,
                     "samples_per_s": bf16_rate * (1 + 0.01 * repeat), "roofline_ms": bf16_bound,
                     "native_bf16": native}]  # fmt: skip
        return out

    def line(records):
        return " ".join(next(x for x in report(records).splitlines() if "optimized bf16 / fp32" in x).split())

    # The bound allows 2x: the target is 1.3x, and 1.25x misses it.
    assert "target >= 1.30x (1.3x; bound ratio 2.00x): misses" in line(rows(125.0, 1.0))
    # The bound allows only 1.25x: 85% of it (1.06x) is the target, and 1.1x meets it.
    assert "target >= 1.06x (85% of the bound ratio 1.25x): meets" in line(rows(110.0, 1.6))
    assert "bf16 (emulated): not judged" in line(rows(110.0, 1.6, native=False))


def upstream_run(variant, i, rate, study="reference-vs-upstream", code="c1", invocation="inv-1", day="02"):
    return {
        "study": study,
        "config_name": "dlrm-benchmark",
        "machine": "m",
        "variant": variant,
        "loop": variant,
        "timestamp": f"2026-12-{day}T00:00:{i:02d}+00:00",
        "samples_per_s": rate,
        "native_bf16": True,
        "run_id": f"{variant}-{i}-{invocation}",
        "code_fingerprint": code,
        "invocation": invocation,
    }  # fmt: skip  (each run its own process, its own run id)


def upstream_round(i, speed, **where):
    return [upstream_run("reference", i, 100 * speed, **where), upstream_run("optimized-fp32", i, 300 * speed, **where),
            upstream_run("optimized-bf16", i, 450 * speed, **where),
            upstream_run("upstream-dlrm", i, 100 * speed, "upstream", **where)]  # fmt: skip


def test_upstream_report_pairs_runs_in_order_per_machine():
    records = []
    for i, speed in enumerate([1.0, 1.2, 1.0]):  # drift cancels within each round
        records += upstream_round(i, speed)
    records.append(upstream_run("optimized-bf16", 9, 1.0, "cpu-compare"))  # another study's record: not a pair
    text = " ".join(upstream_report(pd.DataFrame(records)).split())
    assert "optimized-bf16 / upstream 4.50x [4.50, 4.50] target >= 6.0x: misses, 3 pairs" in text
    assert "optimized-fp32 / upstream 3.00x [3.00, 3.00] target >= 3.0x: meets" in text
    assert "reference / upstream 1.00x [1.00, 1.00] no target (faithful)" in text
    bounded = pd.DataFrame(records).assign(ms_median=lambda f: 1e5 / f["samples_per_s"], roofline_ms=1e5 / 480.0)
    text = " ".join(upstream_report(bounded).split())  # upstream's 1,000 ms/it over a bound of 208 ms/it
    assert "target >= 6.0x: misses, 3 pairs; at most 4.80x by this machine's roofline: the target is beyond" in text
    # a target within reach says what share of the bound it needs beside the share the step reaches
    assert "target >= 3.0x: meets, 3 pairs; at most 4.80x by this machine's roofline: the target needs 62% of" in text
    (faithful,) = [line for line in upstream_report(bounded).splitlines() if "reference / upstream" in line]
    assert faithful.endswith("at most 4.80x by this machine's roofline")  # no target: no share of the bound asked


def test_upstream_report_pairs_within_one_invocation_and_one_code_newest_first():
    """(Before, every record of a machine paired by order across invocations and codes: pooled.)"""
    records = upstream_round(0, 1.0, code="old", invocation="a", day="01")
    records += [upstream_run("optimized-bf16", 1, 900.0, code="old", invocation="b", day="01")]  # b's upstream missing
    records += upstream_round(0, 1.0, code="new", invocation="c") + upstream_round(1, 1.0, code="new", invocation="d")
    records += [{**r, "samples_per_s": r["samples_per_s"] * (2 if r["variant"] == "optimized-bf16" else 1)}
                for r in upstream_round(0, 1.0, code="new", invocation="e")]  # fmt: skip
    legacy = [{k: v for k, v in r.items() if k not in ("invocation", "code_fingerprint")} for r in upstream_round(5, 1)]
    text = upstream_report(pd.DataFrame(records + legacy))
    lines = [" ".join(line.split()) for line in text.splitlines()]
    heads = [line for line in lines if line.startswith("code ")]
    assert [h.split(",")[0] for h in heads] == ["code new", "code old"]  # newest first, each apart
    new, old = lines[lines.index(heads[0]) + 1 : lines.index(heads[1])], lines[lines.index(heads[1]) + 1 :]
    assert heads[0].endswith("3 invocation(s)")
    assert any("optimized-bf16 / upstream" in x and "3 pairs" in x for x in new)
    assert any("optimized-bf16 / upstream 4.50x" in x and "1 pairs" in x for x in old)  # b's 900 pairs with nothing
    assert lines[-1].startswith("4 records without an invocation id") and "not paired" in lines[-1]


def test_upstream_report_flags_a_pair_whose_loops_step_time_jumped():
    """A slow window over both members of round 2 leaves its ratio as the others' (so `flags.pair_flags` alone
    would pass it), one over upstream's member only in round 3 moves the ratio: both pairs are flagged, and the
    ratio is given again without them."""
    records = []
    for i, (ours, theirs) in enumerate([(1.0, 1.0), (1.0, 1.0), (1 / 3, 1 / 3), (1.0, 1 / 2), (1.0, 1.0), (1.0, 1.0)]):
        records += [{**r, "samples_per_s": r["samples_per_s"] * (theirs if r["variant"] == "upstream-dlrm" else ours)}
                    for r in upstream_round(i, 1.0)]  # fmt: skip
    timed = pd.DataFrame(records).assign(ms_median=lambda f: 1e5 / f["samples_per_s"], config_hash="dlrm-benchmark")
    lines = [" ".join(line.split()) for line in upstream_report(timed).splitlines()]
    at = next(i for i, line in enumerate(lines) if line.startswith("optimized-bf16 / upstream"))
    assert lines[at].startswith("optimized-bf16 / upstream 5.05x")  # 4.5x five times and 9x: 4.5 x 2^(1/6)
    assert lines[at].endswith("6 pairs")
    assert lines[at + 1] == (
        "without its 2 flagged pairs of 6 (a step time or a ratio far from its invocation's others, or steps "
        "spread): optimized-bf16 / upstream 4.50x [4.50, 4.50], misses"
    )
    # without step times, no jump shows: only round 3's ratio stands out of the pairs
    untimed = [" ".join(line.split()) for line in upstream_report(timed.drop(columns="ms_median")).splitlines()]
    assert untimed[at + 1].startswith("without its 1 flagged pair of 6")


def test_report_pins_time_over_bound():
    timed = (("optimized-bf16", 13.0), ("optimized-fp32", 26.0))
    records = [{"config_name": "p", "variant": v, "repeat": r, "samples_per_s": 100.0, "ms_median": ms,
                "roofline_ms": 10.0} for r in range(3) for v, ms in timed]  # fmt: skip
    text = " ".join(report(records).split())
    assert "optimized-bf16 time / bound 1.30x [1.30, 1.30] target <= 1.3x: meets" in text  # at the target: met
    assert "optimized-fp32 time / bound 2.60x [2.60, 2.60] target <= 1.3x: misses" in text


def no_native_bf16(monkeypatch) -> None:
    """Stand for a CPU without native bf16 (an AMD EPYC with AVX2 only)."""
    monkeypatch.setattr(platform, "cpu_flags", lambda: frozenset({"avx2", "fma"}))


def test_bf16_without_native_support_runs_bf16_and_says_so(tiny, monkeypatch, capsys):
    no_native_bf16(monkeypatch)
    tiny.train.loop, tiny.train.precision = "optimized", "bf16"
    run = loop.build(tiny)
    assert run.model.top_mlp[0].weight.dtype == torch.bfloat16 and tiny.train.precision == "bf16"
    assert "no native bf16" in capsys.readouterr().err
    fields = bench(tiny, steps=2, warmup=1, profile_steps=0, progress=False)
    assert fields["precision"] == "bf16" and fields["native_bf16"] is False


def test_bf16_bench_on_a_cpu_without_native_bf16_is_honest_and_clean(tmp_path, monkeypatch, capsys):
    no_native_bf16(monkeypatch)
    out = tmp_path / "b.csv"
    argv = ["bench", "--config", "tiny", "--loop", "optimized", "--precision", "bf16", "--steps", "2",
            "--repeats", "2", "--warmup", "1", "--roofline", "quick", "--no-progress", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    printed, err = capsys.readouterr()
    assert "bf16 ran emulated" in printed and "Traceback" not in err
    frame = store.load(out)
    assert set(frame["variant"]) == {"optimized-bf16"} and set(frame["precision"]) == {"bf16"}
    assert (frame["native_bf16"] == False).all()  # noqa: E712
    assert set(frame["precision_label"]) == {"bf16 (emulated)"} and "(bf16 (emulated)) on" in printed
    # The config says what was asked (bf16): its hash, and so every stored record's, is unchanged.
    asked = config.load("tiny", ["train.loop=optimized", "train.precision=bf16", "train.steps=2"])
    assert set(frame["config_hash"]) == {asked.hash()}
    assert set(frame["machine"].str.split("/").str[1]) == {"avx2"}
    assert "gemm_bf16_gflops" not in frame  # emulated bf16 is not a limit of the machine


@pytest.mark.parametrize(
    ("flags", "label"),
    [({"avx2", "fma"}, "bf16 (emulated)"), ({"avx512f", "avx512_bf16"}, "bf16"), ({"amx_bf16"}, "bf16")],
)
def test_precision_label_says_whether_bf16_was_emulated(flags, label, monkeypatch) -> None:
    monkeypatch.setattr(platform, "cpu_flags", lambda: frozenset(flags))
    cpu = torch.device("cpu")
    assert loop.precision_label("bf16", cpu) == label and loop.precision_label("fp32", cpu) == "fp32"


def test_studies_skip_cpu_bf16_variants_without_native_bf16(tmp_path, monkeypatch, capsys):
    no_native_bf16(monkeypatch)
    assert runnable(["reference", "optimized-bf16", "gpu-hbm"]) == (["reference", "gpu-hbm"], ["optimized-bf16"])
    spec = sweep_plan.Sweep(name="s", variants=["reference", "optimized-bf16"], repeats=1, steps=1, warmup=0,
                       out=str(tmp_path / "s.csv"))  # fmt: skip
    sweep.run(spec, progress=False)
    err = capsys.readouterr().err
    assert "no native bf16" in err and "optimized-bf16 not measured" in err
    assert set(pd.read_csv(tmp_path / "s.csv")["variant"]) == {"reference"}


def test_bf16_bench_with_an_odd_embedding_dim_measures_its_bound(tmp_path, capsys):
    """A bf16 row of odd dim is 2-byte aligned; the roofline gathers 4-byte words: rows are rounded up."""
    out = tmp_path / "b.csv"
    argv = ["bench", "--loop", "optimized", "--precision", "bf16", "--set", "model.embedding_dim=7",
            "--set", "model.bottom_mlp=16-7", "--steps", "1", "--repeats", "1", "--warmup", "0",
            "--roofline", "quick", "--no-progress", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    record = store.load(out).iloc[0]
    assert record["model.embedding_dim"] == 7 and record["roofline_ms"] > 0


def test_upstream_report_gives_the_newest_invocation_alone_beside_the_pooled_ratio():
    """Two invocations of one code pool as two clusters (one degree of freedom: a wide interval); the target is
    also read over the newest invocation's own pairs, in order, each two processes of their own."""
    records = []
    for i, speed in enumerate([1.0, 1.1, 0.9]):
        records += upstream_round(i, speed, invocation="old", day="01")
    faster = {"optimized-bf16": 14 / 9, "optimized-fp32": 1.1}  # the newest: bf16 at 7x upstream, fp32 at 3.3x
    for i, speed in enumerate([1.0, 1.2, 1.0, 0.8, 1.1]):
        records += [{**r, "samples_per_s": r["samples_per_s"] * faster.get(r["variant"], 1)}
                    for r in upstream_round(i, speed, invocation="new", day="02")]  # fmt: skip
    lines = [" ".join(line.split()) for line in upstream_report(pd.DataFrame(records)).splitlines()]
    (pooled,) = [line for line in lines if line.startswith("optimized-bf16 / upstream")]
    assert "8 pairs" in pooled and "inconclusive" in pooled  # 4.5x and 7x: two clusters, one degree of freedom
    newest = [line for line in lines if line.startswith("the newest invocation alone")]
    assert newest == [
        "the newest invocation alone (5 pairs): optimized-bf16 / upstream 7.00x [7.00, 7.00], meets",
        "the newest invocation alone (5 pairs): optimized-fp32 / upstream 3.30x [3.30, 3.30], meets",
        "the newest invocation alone (5 pairs): reference / upstream 1.00x [1.00, 1.00]",
    ]
    one = [" ".join(x.split()) for x in upstream_report(pd.DataFrame(records[:12])).splitlines()]
    assert not any("newest invocation alone" in x for x in one)  # one invocation: nothing to tell apart
    ours_alone = [r for r in records[:12] if r["variant"] != "upstream-dlrm"] + records[12:]
    alone = [" ".join(x.split()) for x in upstream_report(pd.DataFrame(ours_alone)).splitlines()]
    assert not any("newest invocation alone" in x for x in alone)  # every pair is the newest's: said above


def test_the_newest_invocation_alone_is_given_without_its_flagged_pairs_and_needs_5_pairs_for_a_word():
    records = upstream_round(0, 1.0, invocation="old", day="01")
    for i, theirs in enumerate([1.0, 1.0, 1.0, 1 / 2, 1.0, 1.0]):  # round 3: a slow window over upstream alone
        records += [{**r, "samples_per_s": r["samples_per_s"] * (theirs if r["variant"] == "upstream-dlrm" else 1)}
                    for r in upstream_round(i, 1.0, invocation="new", day="02")]  # fmt: skip
    timed = pd.DataFrame(records).assign(ms_median=lambda f: 1e5 / f["samples_per_s"])
    lines = [" ".join(line.split()) for line in upstream_report(timed).splitlines()]
    at = lines.index(next(x for x in lines if x.startswith("the newest invocation alone (6 pairs): optimized-bf16")))
    assert lines[at].endswith("5.05x [3.75, 6.80], inconclusive (the interval spans the target)")  # 4.5x x5, 9x
    assert lines[at + 1] == (
        "without its 1 flagged pair of 6 (a step time or a ratio far from its invocation's others, or steps "
        "spread): the newest invocation's optimized-bf16 / upstream 4.50x [4.50, 4.50], misses"
    )
    few = [" ".join(x.split()) for x in upstream_report(timed[timed["timestamp"] < "2026-12-02T00:00:03"]).splitlines()]
    assert "the newest invocation alone (3 pairs): optimized-bf16 / upstream 4.50x [4.50, 4.50], too few pairs for a " \
           "verdict (3 < 5)" in few  # fmt: skip
