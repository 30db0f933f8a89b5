"""Where a claim's id is written: knowledge of one claim lives in its own module (issue 50, item 4).

Each claim is `src/dlrm_study/claims/<id>.py`, which spells its own id once (`ID = "S2"`) and no other; the
registry lists the modules, spelling none. Outside the claims package, a claim id is written only in the modules
of `DEBT`, each by a reason, and that list only shrinks: a new module that spells a claim id, or more ids in one
of these, fails here. Move the knowledge into the claim's module instead, then lower the count.
"""

import ast
import re
from collections import Counter
from pathlib import Path

from dlrm_study.claims import registry

SRC = Path(__file__).resolve().parents[1] / "src" / "dlrm_study"
CLAIM_IDS = set(registry.BY_ID)
CLAIM_MODULE = re.compile(r"[hs]\d+")  # claims/h1.py .. claims/s4.py: a claim's module is named by its id
# module -> the claim-id literals it holds (2026-12-06), never to grow; why each is still there:
DEBT = {
    # which GPU lending judges which claims, and the runs of each lending that feed them: plans below the claims
    "lending/gpu_lending.py": 8,
    "plans/gpu.py": 4,
    # the `claim` column of results/gpu_predictions.csv: a label the records carry
    "analysis/predictions.py": 3,
    # the model-shape knobs H1 reads, declared in rules.toml's [H1]: the evidence loads their sweeps
    "analysis/evidence.py": 1,
}


def claim_id_literals(source: str) -> list[str]:
    """String constants that are exactly a claim's id (the registry's: "H1" .. "S4"), wherever they stand."""
    return [n.value for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Constant) and n.value in CLAIM_IDS]


def spread(root: Path = SRC) -> Counter:
    found: Counter = Counter()
    for path in sorted(root.rglob("*.py")):
        if n := len(claim_id_literals(path.read_text())):
            found[path.relative_to(root).as_posix()] = n
    return found


def test_each_claim_module_spells_its_own_id_once():
    for claim in registry.CLAIMS:
        module = SRC / "claims" / f"{claim.id.lower()}.py"
        assert claim_id_literals(module.read_text()) == [claim.id], module.name


def test_the_registry_lists_every_claim_module_and_spells_no_id():
    modules = {p.stem.upper() for p in (SRC / "claims").glob("*.py") if CLAIM_MODULE.fullmatch(p.stem)}
    assert sorted(c.id for c in registry.CLAIMS) == sorted(modules)
    assert not claim_id_literals((SRC / "claims" / "registry.py").read_text())


def test_claim_ids_spread_no_further():
    outside = {m: n for m, n in spread().items() if not m.startswith("claims/")}
    grown = {module: n for module, n in outside.items() if n > DEBT.get(module, 0)}
    assert not grown, f"claim ids written outside their claim's module (module: literals): {grown}"
    claims_package = {m for m in spread() if m.startswith("claims/")}
    assert claims_package == {f"claims/{c.id.lower()}.py" for c in registry.CLAIMS}


def test_the_count_sees_an_id_wherever_it_stands():
    found = claim_id_literals('x = {"H1": 1}\ny = ("S3", "S4")\nz = f(claim="H2")\nw = "H5"\nv = "S3 speed"')
    assert sorted(found) == ["H1", "H2", "S3", "S4"]
