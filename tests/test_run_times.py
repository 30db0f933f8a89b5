"""docs/reproduce.md's run times are read from kept logs of `make reproduce` (`report.run_times`), not typed."""

from tests.conftest import ROOT

from dlrm_study.report import run_times

LOG = """machine: intel-xeon-f6m207s2/avx512f+avx512_bf16+amx_bf16/2cpu
commit: 063dc1b0123
date: 2026-12-05
39 processes: cpu-loops 32 runs, ablation 1 run
runs 1/39: cpu-loops run 1/32: 36 measurements: 36 already recorded, 0 run (0 failed) (2 s)
runs 2/39: ablation run 1/1: 18 measurements: 0 already recorded, 18 run (0 failed) (57 s)
runs 3/39: baseline-2020 run 1/1: not measured: no .venv-2020/bin/python (make baseline-2020) (2 s)
cpu-loops-quick 1/21: run 8, repeat 0, mlperf-scaled, optimized-bf16: 22,047 samples/s
runs 4/39: cpu-loops run 8/32: 21 measurements: 0 already recorded, 21 run (0 failed) (318 s)
runs 5/39: cpu-loops run 9/32: 21 measurements: 3 already recorded, 18 run (0 failed) (250 s)
runs 6/39: cpu-loops run 10/32: 21 measurements: 0 already recorded, 21 run (0 failed) (300 s)
"""


def test_a_log_becomes_a_row_per_study_with_its_runs_seconds(tmp_path):
    header, runs = run_times.runs_in(LOG)
    assert header == {"machine": "intel-xeon-f6m207s2/avx512f+avx512_bf16+amx_bf16/2cpu", "commit": "063dc1b0123",
                      "date": "2026-12-05"}  # fmt: skip
    assert [r.kind for r in runs] == ["found", "measured", "other", "measured", "measured", "measured"]
    lines = run_times.table(header, runs, "a.txt")
    assert lines[0].startswith("`make reproduce` on `intel-xeon-f6m207s2/avx512f+avx512_bf16+amx_bf16/2cpu`, "
                               "commit 063dc1b (2026-12-05")  # fmt: skip
    assert "| cpu-loops | 3 | 300 (250, 318) | 1 | - |" in lines
    assert "| baseline-2020 | 0 | - | 0 | 2 |" in lines
    assert lines[-1] == "All 6 runs of the log: 15 minutes."


def test_the_docs_section_is_rewritten_between_its_markers_and_only_there(tmp_path):
    (tmp_path / "results" / "logs").mkdir(parents=True)
    (tmp_path / "results" / "logs" / "a.txt").write_text(LOG)
    (tmp_path / "docs").mkdir()
    doc = tmp_path / "docs" / "reproduce.md"
    doc.write_text(f"before\n{run_times.BEGIN}\nstale 999 s\n{run_times.END}\nafter\n")
    assert run_times.write(tmp_path) is True
    text = doc.read_text()
    assert text.startswith("before\n") and text.endswith("after\n") and "999" not in text and "318" in text
    assert run_times.write(tmp_path) is False  # unchanged the second time


def test_the_committed_docs_hold_what_the_kept_logs_give():
    text = (ROOT / "docs" / "reproduce.md").read_text()
    assert run_times.section(ROOT) in text


def test_the_first_screens_time_line_reads_the_logs(tmp_path):
    """The newest fresh log's runs, the newest whole study's, and what the looks' expected claim runs make of it:
    a log that measured nothing (a resume) is not a whole study."""
    from dlrm_study.report import run_times

    logs = tmp_path / "results" / "logs"
    logs.mkdir(parents=True)
    head = "machine: m/isa/2cpu\ncommit: abc\ndate: 2026-12-07\n"
    studies = ["ablation", "sensitivity", "remote", "scaling"]
    whole = [f"runs {i}/9: {s} run 1/1: 3 measurements: 0 already recorded, 3 run (0 failed) (600 s)"
             for i, s in enumerate(studies, 1)]  # fmt: skip
    whole += [f"runs {i}/9: cpu-loops run {i - 4}/32: 21 measurements: 0 already recorded, 21 run (0 failed) (120 s)"
              for i in range(5, 10)]  # fmt: skip
    (logs / "2026-12-06-m-aaa.txt").write_text(head + "\n".join(whole) + "\n")
    resumed = [line.replace("0 already recorded, 3 run", "3 already recorded, 0 run") for line in whole[:4]]
    (logs / "2026-12-08-m-bbb.txt").write_text(head + "\n".join(resumed) + "\n")
    fresh = "runs 1/2: cpu-loops run 1/32: 36 measurements: 0 already recorded, 36 run (0 failed) (540 s)\n"
    fresh += "runs 2/2: accuracy run 1/1: trained what was not recorded; load guard: contended (x) (660 s)\n"
    (logs / "2026-12-07-m-fresh-ccc.txt").write_text(head + fresh)
    line = run_times.times_line(tmp_path, {"m/isa/2cpu": 3.0})
    assert "`make reproduce FRESH=1` (S2 and S3 afresh) took 20 minutes on `m` (1 CPU-loop runs" in line
    # 4 x 600 s + 5 x 120 s, from the older log: the newer one measured nothing (a resume), no whole study
    assert "every study measured anew took 50 minutes on `m` with 5 CPU-loop runs" in line
    assert "make about 46" in line  # 50 - 4 x 2 minutes of claim runs + 2 more at their median
