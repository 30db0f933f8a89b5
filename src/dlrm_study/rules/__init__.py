"""The verdict rules, declared: their literals (rules.toml), the judgements they give on a fixture of records
(golden.json), and the rules' id, the digest of both (`rules_id`).

A refactor that keeps every judgement keeps the id; a changed literal, or a change of the code that moves a
golden judgement, moves it. rules.lock names the id in force, so a move is a deliberate, reviewed change.
Nothing here imports the rest of the package: analysis and studies both read it.
"""

import functools
import hashlib
import json
import tomllib
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RULES = HERE / "rules.toml"
GOLDEN = HERE / "golden.json"
LOCK = HERE / "rules.lock"


@functools.cache
def declared(path: Path = RULES) -> dict[str, dict[str, Any]]:
    """The declared literals, by section."""
    return tomllib.loads(path.read_text())


def literal(section: str, name: str) -> Any:
    """One declared literal (a KeyError names what is missing)."""
    return declared()[section][name]


def digest(data: object) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


@functools.cache
def rules_id(rules: Path = RULES, golden: Path = GOLDEN) -> str:
    """`<values>-<judgements>`: 6 hex digits of the declared values' digest (comments and layout out), 6 of the
    golden judgements'. "" where either file is missing."""
    try:
        values, judged = tomllib.loads(rules.read_text()), json.loads(golden.read_text())
    except OSError:
        return ""
    return f"{digest(values)[:6]}-{digest(judged)[:6]}"
