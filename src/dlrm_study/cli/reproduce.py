"""`make reproduce`: measure this machine (the lab), then judge and render what it recorded (the court).

    python -m dlrm_study.cli.reproduce [--profile quick]
    python -m dlrm_study.cli.reproduce --fresh [--profile quick] [--out FOLDER] [--compare-only]

The first measures only what this machine has no record of at this code (its loop's fingerprint,
`records.code_identity`): a short training run once per code, then every run of every study in a process of its own
(`studies.runs`), the claim runs to the look where their claims have their words (`claims.looks`); then the whole
render (`report.render.publish`), and one line saying how many records that added (or that none were needed).

`--fresh` (`make reproduce FRESH=1`) measures the points S2's and S3's rules read into a folder of its own whatever is
committed, judges that folder alone and prints its words beside the committed ones (`report.fresh`); the published
records and render are left as they are.
"""

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from dlrm_study import config
from dlrm_study.claims import looks
from dlrm_study.errors import UsageError
from dlrm_study.plans import profiles
from dlrm_study.plans.profiles import REPO
from dlrm_study.records import Machine, code_identity, provenance, store
from dlrm_study.records import columns as col
from dlrm_study.records.machine import machine_key
from dlrm_study.report import fresh, render
from dlrm_study.studies import runs

# The first step: a short training run (its record in results/train.csv), once per code and machine.
TRAIN = ("tiny", ["train.steps=300"])


def train_once(results: Path) -> bool:
    """The short training run, unless train.csv holds one of this config, machine and code; whether it ran."""
    from dlrm_study.measure.training import train_and_record
    from dlrm_study.train import build

    cfg, path = config.load(*TRAIN), results / "train.csv"
    if store.key_here(cfg, "", repeat="") in store.stored_keys(path):  # a train record has no variant nor repeat
        return False
    train_and_record(build(cfg), path, progress=False)
    return True


def records_of_this_code(results: Path) -> int:
    """The records under `results` measured on this machine by this code (`provenance.today_code`)."""
    here = machine_key()
    return sum(
        row.get(col.MACHINE) == here
        and code_identity.code_of_record(row.get(col.TRAIN_LOOP), row.get(col.CODE_FINGERPRINT))
        == provenance.today_code(row.get(col.TRAIN_LOOP))
        for path in sorted(results.glob("*.csv"))
        for row in store.read_rows(path)[1]
    )


def fingerprint_line() -> str:
    """Today's code, per loop (`records.code_identity`), in a few words: its fingerprint, and the one it is
    declared to run its step as (LOOP_LOCK) where that is another."""
    said = []
    for loop, fp in code_identity.loop_fingerprints().items():
        code = code_identity.today(loop)
        said.append(f"{loop} {fp}" + (f" (as {code})" if code != fp else ""))
    return ", ".join(said)


def measured_line(before: int, after: int) -> str:
    """What a measuring render measured, in one line."""
    code, here = fingerprint_line(), machine_key()
    if after == before:
        return f"measured nothing: {here} holds every record of this code ({code}, {after} records); rendered from them"
    return f"measured {after - before} new records of this code ({code}) on {here}; {after} in all"


def reproduce(profile: str, repo: Path = REPO) -> None:
    """Measure what this machine lacks at this code into results/, then render the whole study from the records."""
    results = repo / "results"
    before = records_of_this_code(results)
    train_once(results)
    print(looks.expected(machine_key()), file=sys.stderr)
    runs.measure(profile, results, look=looks.look)
    render.publish(profile, repo)
    print(measured_line(before, records_of_this_code(results)), file=sys.stderr)


def measure_afresh(profile: str, out: str | None, compare_only: bool) -> None:
    """The claim runs measured into a folder of their own, then judged beside the committed records."""
    results = profiles.results_dir(profile, None)
    machine = machine_key()
    if Machine.parse(machine).has_gpu:
        raise UsageError("a fresh measurement judges the CPU claims S2 and S3: run it on a CPU machine")
    folder = Path(out) if out else fresh.default_folder(results, machine)
    if not compare_only:
        print(looks.expected(machine), file=sys.stderr)
        runs.measure(profile, folder, runs.CLAIM_STUDIES, look=looks.look)
    print("\n".join(fresh.compare(folder, results, profile, machine)))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dlrm_study.cli.reproduce", description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default=None, help="smoke | quick | full (default: $DLRM_STUDY_PROFILE, quick)")
    parser.add_argument("--fresh", action="store_true", help="measure the claim runs afresh into a folder of their own")
    parser.add_argument("--out", default=None, help="--fresh: the folder (default: results/fresh/DATE-MACHINE)")
    parser.add_argument("--compare-only", action="store_true", help="--fresh: measure nothing; compare the folder")
    args = parser.parse_args(argv)
    try:
        profile = profiles.profile(args.profile)
        if args.fresh:
            measure_afresh(profile, args.out, args.compare_only)
        elif args.out or args.compare_only:
            raise UsageError("--out and --compare-only go with --fresh")
        else:
            reproduce(profile)
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
