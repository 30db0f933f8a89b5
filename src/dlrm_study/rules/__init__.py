"""The verdict rules, declared: their literals (rules.toml), the judgements they give on a fixture of records
(golden.json), and the rules' id, the digest of both (`rules_id`)."""

from pathlib import Path

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden.json"
