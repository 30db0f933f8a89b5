"""A judged quantity is printed by one function (`wording.amount`), per unit, and a ledger cell is cut at its cap
by whole clauses (`wording.cell`)."""

import math

from dlrm_study.analysis import stats
from dlrm_study.analysis.judgement import Judgement, Status, decided
from dlrm_study.analysis.wording import MAX_CELL, Share, amount, cell

RATIO = stats.Ratio(1.6, 1.32, 1.94, 4, 0.2, 2)


def test_a_ratio_and_a_share_print_in_their_units():
    assert amount(RATIO) == "1.60x [1.32, 1.94] (4 pairs, 2 runs)"
    assert amount(Share(0.55, 0.36, 0.72, 4, 0.2, 2)) == "55% [36%, 72%] (4 repeats, 2 runs)"
    assert (
        amount(stats.Ratio(1.6, math.nan, math.nan, 2, math.nan, 1))
        == "1.60x (one repeat: no interval) (2 pairs, one run)"
    )
    assert amount(stats.NO_RATIO) == "not paired (0 pairs)"


def test_a_cell_names_its_numbers_and_stops_at_the_cap():
    numbers = {f"preset {i}": RATIO for i in range(6)}
    said = cell(decided(Status.INCONCLUSIVE, "a long account " * 20, numbers), lambda k: k.upper())
    assert said.startswith("**inconclusive**: PRESET 0 1.60x [1.32, 1.94] (4 pairs, 2 runs); PRESET 1")
    assert len(said.replace("**", "")) <= MAX_CELL and "PRESET 5" not in said and not said.endswith(";")


def test_a_cell_without_numbers_says_the_rules_first_clause():
    assert cell(Judgement(Status.NOT_MEASURABLE, "no GPU; more")) == "**not measurable here**: no GPU"
    long = "2 logical CPUs: " + "x" * MAX_CELL
    assert cell(Judgement(Status.NOT_MEASURABLE, long)) == "**not measurable here**: 2 logical CPUs"


def test_a_cell_whose_comparisons_never_paired_says_so():
    said = cell(decided(Status.TOO_FEW, "knob ends: not paired; more", {"a": stats.NO_RATIO, "b": stats.NO_RATIO}))
    assert said == "**too few repeats**: none of its 2 comparisons paired (0 pairs)"
