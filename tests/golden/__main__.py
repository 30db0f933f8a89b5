"""`python -m tests.golden`: judge the fixture and say whether today's rules decide as the golden judgements do.

`--build` writes the fixture's records from its scenarios (once; then the records are the fixture);
`--write` writes today's judgements as the golden ones and the rules' id they give to rules.lock (a deliberate
change of the rules);
`--digest` prints the digest of today's judgements alone (`tests/claims_mutations.py` reads it).
"""

import argparse
import sys

from tests.golden import fixture

from dlrm_study import rules


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.golden")
    parser.add_argument("--build", action="store_true", help="write the fixture's records from its scenarios")
    parser.add_argument("--write", action="store_true", help="write today's judgements as the golden ones")
    parser.add_argument("--digest", action="store_true", help="print the digest of today's judgements")
    args = parser.parse_args()
    if args.build:
        from tests.golden.scenarios import build

        fixture.write_records(build())
    found = fixture.judgements()
    if args.digest:
        print(fixture.digest(found))
        return 0
    if args.write:
        fixture.GOLDEN.write_text(fixture.text(found))
        rules.rules_id.cache_clear()
        rules.LOCK.write_text(rules.rules_id() + "\n")
        print(f"wrote {len(found)} golden judgements to {fixture.GOLDEN}; the rules' id is now {rules.rules_id()}")
        return 0
    golden = fixture.written()
    moved = fixture.moved(found, golden)
    for name in moved:
        print(f"{name}: golden {golden.get(name, {}).get('status')}, today {found.get(name, {}).get('status')}")
    print(f"{len(found)} judgements, {len(moved)} moved ({fixture.digest(found)})")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
