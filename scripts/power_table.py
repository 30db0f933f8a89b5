"""Rewrite the table of docs/claims.md's "Design and power" section (between its power markers) from
`claims.designs.power_markdown()`: run after changing the design, the variances or the targets."""

import sys
from pathlib import Path

from dlrm_study.analysis import power
from dlrm_study.claims import designs

DOC = Path(__file__).resolve().parents[1] / "docs" / "claims.md"


def main() -> int:
    text = DOC.read_text()
    if power.BEGIN not in text or power.END not in text:
        print(f"{DOC}: no {power.BEGIN} ... {power.END} markers", file=sys.stderr)
        return 1
    new = designs.with_table(text)
    if new != text:
        DOC.write_text(new)
    print(f"{DOC}: power table {'rewritten' if new != text else 'already current'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
