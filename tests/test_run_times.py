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
