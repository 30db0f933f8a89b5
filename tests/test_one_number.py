"""One number per quantity: no label is printed with two values anywhere in what is published."""

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
