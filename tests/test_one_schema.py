"""One place knows the record's column names (`records.columns`) and one the variant names
(`config.variants`): every other module names them through those modules, and the names there are
the ones stored."""

import ast
import csv
from pathlib import Path

import pytest

from dlrm_study.config import variants
from dlrm_study.records import columns as col

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "dlrm_study"
# The columns every record is identified and timed by: a reader that spells one of these by hand
# is a second place that knows the stored format.
CORE = {
    col.STUDY, col.VARIANT, col.REPEAT, col.POINT, col.CONFIG_NAME, col.CONFIG_HASH, col.MACHINE, col.RUN_ID,
    col.RULES_HASH, col.FLAGS, col.ERROR, col.TIMESTAMP, col.GIT_COMMIT, col.SAMPLES_PER_S, col.MS_MEDIAN,
    col.MS_P10, col.MS_P90,
}  # fmt: skip
# Registered variant names that are no loop's name too (`reference` and `torchrec` are both).
VARIANT_NAMES = set(variants.REGISTRY) - {variants.REFERENCE, variants.TORCHREC}
# Being changed on main while this test was written; convert them, then drop them from here.
PENDING: set[str] = set()
# platform.py reads /proc/cpuinfo (whose `flags` field is no record column), records/ defines the columns.
SOURCES = sorted(
    p
    for p in SRC.rglob("*.py")
    if p.relative_to(SRC).parts[0] != "records" and p.relative_to(SRC).as_posix() not in {*PENDING, "platform.py"}
)
VARIANT_SOURCES = [p for p in sorted(SRC.rglob("*.py")) if p.relative_to(SRC).as_posix() != "config/variants.py"]
# Where a reader uses a column's name: x["name"], x.get("name"), frame.groupby("name") ..., "name" in x.
TAKES_A_COLUMN = {"get", "groupby", "sort_values", "drop_duplicates", "set_index", "pivot_table", "dropna", "isin"}


def column_literals(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        text = None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            text = node.slice.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in TAKES_A_COLUMN:
            first = node.args[0] if node.args else None
            text = first.value if isinstance(first, ast.Constant) else None
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant):
            text = node.left.value if isinstance(node.ops[0], ast.In | ast.NotIn) else None
        elif isinstance(node, ast.Dict):
            found += [(k.lineno, k.value) for k in node.keys if isinstance(k, ast.Constant) and k.value in CORE]
        if isinstance(text, str) and text in CORE:
            found.append((node.lineno, text))
    return found


@pytest.mark.parametrize("path", SOURCES, ids=[p.relative_to(SRC).as_posix() for p in SOURCES])
def test_readers_name_core_columns_through_records_columns(path: Path) -> None:
    found = column_literals(ast.parse(path.read_text()))
    assert not found, f"{path.relative_to(ROOT)}: spell these through records.columns: {found}"


@pytest.mark.parametrize("path", VARIANT_SOURCES, ids=[p.relative_to(SRC).as_posix() for p in VARIANT_SOURCES])
def test_modules_name_variants_through_config_variants(path: Path) -> None:
    tree = ast.parse(path.read_text())
    found = [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in VARIANT_NAMES]
    assert not found, f"{path.relative_to(ROOT)}: name these through config.variants: {found}"


def test_the_literal_finder_finds_what_it_looks_for() -> None:
    code = 'f[f["variant"] == v]; r.get("machine"); f.groupby("repeat"); "study" in f; {"samples_per_s": 1}; x["n"]'
    assert sorted(text for _, text in column_literals(ast.parse(code))) == [
        "machine", "repeat", "samples_per_s", "study", "variant",
    ]  # fmt: skip


def test_column_constants_name_stored_columns() -> None:
    """Every name in records.columns is a column of some committed record (a misspelt constant is not)."""
    stored: set[str] = set()
    for path in sorted((ROOT / "results").glob("*.csv")):
        with path.open(newline="") as f:
            stored |= set(next(csv.reader(f), []))
    names = {
        value
        for key, value in vars(col).items()
        if key.isupper() and not key.startswith("_") and isinstance(value, str)
    }
    names |= set(col.OP_COLUMNS)
    # measure.gpu writes how a step ran (graph or eager) and a profile's slowest kernels; the committed GPU records
    # predate both columns.
    # Every record made now writes its code fingerprint and run slot, and `make compare-upstream`'s its invocation:
    # the committed records predate them until the next measurement at HEAD.
    # A lending's numerics check (`lending.numerics`) writes whether each kernel passed: no lending has run it yet.
    not_yet_stored = {col.CAPTURE, col.TOP_KERNELS, col.CODE_FINGERPRINT, col.RUN_SLOT, col.INVOCATION,
                      col.NUMERICS_PASSED}  # fmt: skip
    assert names - not_yet_stored <= stored, sorted(names - not_yet_stored - stored)


def test_variant_groups_name_registered_variants() -> None:
    groups = (variants.CPU_LOOPS, variants.BF16_PAIR, variants.ABLATION, variants.GPU_PLACEMENTS, variants.GPU_PRESETS)
    for group in (*groups, variants.ORDER):
        assert set(group) <= set(variants.REGISTRY), group
    assert len(set(variants.ORDER)) == len(variants.ORDER)
