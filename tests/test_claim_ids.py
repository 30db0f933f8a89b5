"""Where a claim's id is written: knowledge of one claim should live in its own module (issue 50, item 4).

Today a claim's rule, deciding pairs, wordings and labels are spread over the modules below, each naming claims by
their ids. Until each claim has a module of its own, this list only shrinks: a new module that spells a claim id,
or more ids in one of these, fails here. Move the knowledge into the claim's module instead, then lower the count.
"""

import ast
from collections import Counter
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "dlrm_study"
CLAIM_IDS = {f"{kind}{n}" for kind in "HS" for n in range(1, 5)}
# module -> the claim-id literals it holds today (2026-12-06): the debt, never to grow
SPREAD = {
    "report/results_page.py": 16,
    "analysis/power.py": 12,
    "analysis/verdicts.py": 10,
    "analysis/claims.py": 8,
    "studies/gpu_lending.py": 8,
    "report/ledger.py": 7,
    "studies/gpu_pairs.py": 6,
    "plans/gpu.py": 4,
    "analysis/predictions.py": 3,
    "report/gallery.py": 3,
    "analysis/evidence.py": 1,
    "report/quantities.py": 1,
}


def claim_id_literals(source: str) -> int:
    """String constants that are exactly a claim's id ("H1" .. "S4"), wherever they stand."""
    return sum(isinstance(node, ast.Constant) and node.value in CLAIM_IDS for node in ast.walk(ast.parse(source)))


def spread(root: Path = SRC) -> Counter:
    found: Counter = Counter()
    for path in sorted(root.rglob("*.py")):
        if n := claim_id_literals(path.read_text()):
            found[path.relative_to(root).as_posix()] = n
    return found


def test_claim_ids_spread_no_further():
    grown = {module: n for module, n in spread().items() if n > SPREAD.get(module, 0)}
    assert not grown, f"claim ids written in more places than before (module: literals): {grown}"


def test_the_count_sees_an_id_wherever_it_stands():
    assert claim_id_literals('x = {"H1": 1}\ny = ("S3", "S4")\nz = f(claim="H2")\nw = "H5"\nv = "S3 speed"') == 4
