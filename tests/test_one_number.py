"""One number per quantity: no label is printed with two values anywhere in what is published."""

import re

from dlrm_study.report import quantities, render

XEON = "intel-xeon-f6m207s2/avx512f+avx512_bf16+amx_bf16/2cpu"
ZEN4 = "amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu"
GALLERY = (
    "README.md",
    f"Rendered from the records of `{XEON}`.\n\n| figure | findings | notebook |\n| --- | --- | --- |\n"
    "| ![x](a.png) | *where the reference spends its time*<br>mlperf-scaled: embedding backward + update take "
    "8% [7%, 8%] of the reference's profiled iteration, forward 5% [5%, 6%] (96 repeats) | [01](01.ipynb) |\n",
)
LEDGER = (
    "docs/results.md",
    f"| claim | words | {XEON} | why |\n| --- | --- | --- | --- |\n"
    "| [S2](01.ipynb) the reference | In the reference | **not reproduced**: dlrm-benchmark 61% [59%, 62%] "
    "(96 repeats, 32 runs); mlperf-scaled 8% [7%, 9%] (96 repeats, 32 runs) | why |\n",
)


def test_a_quantity_printed_with_two_values_is_found() -> None:
    """The gallery's S2 share and the ledger's differ in wording and interval: one label, two values."""
    found = quantities.published_conflicts([GALLERY, LEDGER])
    assert len(found) == 1
    assert "mlperf-scaled" in found[0] and "8% [7%, 8%]" in found[0] and "8% [7%, 9%]" in found[0]


def test_the_same_value_twice_or_another_machine_or_code_is_no_conflict() -> None:
    agreeing = (LEDGER[0], LEDGER[1].replace("8% [7%, 9%]", "8% [7%, 8%]"))
    assert quantities.published_conflicts([GALLERY, agreeing]) == []
    elsewhere = (LEDGER[0], LEDGER[1].replace(XEON, ZEN4))
    assert quantities.published_conflicts([GALLERY, elsewhere]) == []
    notebook = ("02.ipynb", f"On {XEON}:\n\nbf16 over fp32, mlperf-scaled 2.54x [2.28, 2.83] (96 pairs, 32 runs)")
    older = ("00.ipynb", f"{XEON} (commit 45fcdf0): bf16 over fp32, mlperf-scaled 2.49x [2.15, 2.88]")
    assert quantities.published_conflicts([notebook, older]) == []
    assert quantities.published_conflicts([notebook, (older[0], older[1].replace(" (commit 45fcdf0)", ""))])


def test_a_printed_tables_rows_are_read_under_their_titles() -> None:
    """Rows of two printed tables share row names; their titles (preset, code) keep them apart, and an index's
    repeated keys left blank by pandas are filled in from the row above."""
    table = (
        f"{XEON}: dlrm-benchmark, bf16 vs fp32\n                 fp32   bf16   bf16 / fp32  pairs\n"
        "bottom MLP       6.49   2.54   0.41x [0.37, 0.46]     96\n\n"
        f"{XEON}: mlperf-scaled, bf16 vs fp32\n                 fp32   bf16   bf16 / fp32  pairs\n"
        "bottom MLP       5.18   2.94   0.57x [0.43, 0.75]     96\n"
    )
    assert quantities.published_conflicts([("02.ipynb", table)]) == []
    index = (
        "machine  study   preset          ratio\n"
        f"{XEON}  loops   dlrm-benchmark  2.09x [1.93, 2.26]\n"
        "                  mlperf-scaled   2.54x [2.33, 2.77]\n"
    )
    said = [s.label for s in quantities.said(index, "02.ipynb", quantities.machines_named({}))]
    assert said[0][2] == "dlrm-benchmark" and said[1][2] == "mlperf-scaled" and said[1][0] == XEON


def test_every_published_quantity_has_one_number() -> None:
    assert quantities.published_conflicts(render.published()) == []


def test_the_bf16_tables_samples_row_is_s3s_quantity_read_by_its_centre() -> None:
    """Notebook 02's bf16-vs-fp32 table prints S3's quantity at 95% (the verdict reads it at 97.5%): a centre other
    than the verdict's (earlier code pooled in) is a conflict, another interval about the same centre is not."""
    table = (
        f"{XEON} / the CPU loops (quick) / dlrm-benchmark\n                 fp32   bf16   bf16 / fp32  pairs\n"
        "bf16 vs fp32\nsamples/s   12361.12  28048.20  2.21x [2.11, 2.32]    192\n"
    )
    ledger = (
        "docs/results.md",
        f"| claim | words | {XEON} | why |\n| --- | --- | --- | --- |\n"
        "| [S3](02.ipynb) bf16 | bf16 | **reproduced**: bf16 over fp32, dlrm-benchmark 2.34x [2.31, 2.37] "
        "(96 pairs, 32 runs) | why |\n",
    )
    found = quantities.published_conflicts([ledger, ("02.ipynb", table)])
    assert len(found) == 1 and "2.21x" in found[0] and "2.34x" in found[0]
    same = table.replace("2.21x [2.11, 2.32]    192", "2.34x [2.30, 2.38]     96")
    assert quantities.published_conflicts([ledger, ("02.ipynb", same)]) == []


def test_the_two_bound_tables_print_one_step_time() -> None:
    """The physical bound's table and the roofline's read the same loop's step: one ms per step per key."""
    physical = (
        f"{XEON} / dlrm-benchmark / reference (10 repeats): ms per step, physical bound, share of physical bound\n"
        "  bottom MLP                       8.66     5.26   61% [56%, 67%]\n"
        "  step (timed), in sequence      463.05    90.73   20% [15%, 27%]\n"
        "  step (timed), overlapped       463.05    60.23   13% [10%, 18%]\n"
    )
    roofline = (
        f"{XEON} / dlrm-benchmark / reference (5 repeats): ms per step, bound, share of bound\n"
        "  bottom MLP                       8.66     6.01   70% [60%, 80%]\n"
        "  step (timed)                   307.84    98.50   32% [31%, 32%]\n"
    )
    found = quantities.published_conflicts([("02.ipynb", physical + roofline)])
    assert len(found) == 1 and "463.05" in found[0] and "307.84" in found[0] and "step (timed)" in found[0]
    agreeing = roofline.replace("307.84", "463.05")
    assert quantities.published_conflicts([("02.ipynb", physical + agreeing)]) == []


def test_the_gpu_records_are_counted_once() -> None:
    """docs/results.md's GPU half and notebooks 03-05's status line count the same records (`gpu_loop.census`)."""
    docs = (
        "docs/results.md",
        "On Intel Xeon, 16 CPUs, H200, 36 of 36 GPU records measured the captured loop (one CUDA graph).\n"
        "On Intel Xeon, 16 CPUs, H200, 104 of 104 GPU records measured the old GPU loop, which launched it.\n",
    )
    notebook = ("03.ipynb", "GPU: 196 records measured on NVIDIA H200 (2026-12-01); 156 of them of the old GPU loop.")
    found = quantities.published_conflicts([docs, notebook])
    assert len(found) == 2 and any("140" in f and "196" in f for f in found)
    census = "H200 host: 104 GPU records, measured 2026-12-01 at commit 577ad01: 104 of the old GPU loop\n"
    census += "new host: 36 GPU records, measured 2026-12-04 at commit 5354afd: 26 as one CUDA graph, 10 eager\n"
    twice = ("03.ipynb", census + "\n" + census)  # printed in two cells: counted once
    assert quantities.published_conflicts([("docs/results.md", census), twice]) == []


def test_the_s1_figure_draws_the_runs_its_numbers_print() -> None:
    """The S1 decomposition's bars are the findings printed with it (`gallery.s1_records`): its caption names the
    runs it drew, and the S1 verdict's factors over the 2020 step name theirs; one set of records, one count."""
    figure = render.REPO / "results" / "figures" / "02_s1_decomposition.png"
    caption = quantities.figure_caption(figure)
    drawn = quantities.caption_runs(caption)
    machine = quantities.MACHINE_KEY.search(caption).group(0)
    stated = quantities.runs_stated(dict(render.published())["02_cpu_optimizations.ipynb"], machine, "the 2020 step")
    assert stated, f"notebook 02 prints no factor over the 2020 step on {machine}"
    assert stated == drawn, f"the figure draws {sorted(drawn)} run(s) ({caption}); its numbers say {sorted(stated)}"


def test_the_gpu_finding_is_shown_with_its_caveats() -> None:
    """H4's recovery on the current GPU loop (the cache's share of what host memory loses) is printed under
    'Measured, not judged' on docs/results.md and in notebook 05, beside how each placement ran."""
    pages = dict(render.published())
    for where in ("docs/results.md", "05_embedding_placement.ipynb"):
        section = pages[where].split("Measured, not judged", 1)
        assert len(section) == 2, f"{where}: no 'Measured, not judged' section"
        said = section[1].split("\n## ", 1)[0]  # the section, to the next heading
        assert re.search(r"the cache wins back[^\n]*\d+% \[\d+%, \d+%\]", said), f"{where}: no H4 recovery there"
        assert "CUDA graph" in said and "eager" in said, f"{where}: the recovery without how its placements ran"
