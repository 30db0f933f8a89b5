"""What a rendered notebook says of itself: where and with what it ran, and what it measured then."""

from pathlib import Path

from dlrm_study import results
from dlrm_study.measure import runner

VERSIONS = ("torch", "torchrec", "fbgemm-gpu-cpu", "triton")


def header(profile: str, out: Path, machine: str = "this") -> str:
    """Commit, machine, software and profile of this run, and whose records it draws."""
    prov = results.provenance("cpu")
    keys = {name: name.replace("-", "_") + "_version" for name in VERSIONS}
    versions = ", ".join(f"{name} {prov[key]}" for name, key in keys.items() if prov[key])
    drawn = "this machine's records" if machine == "this" else f"the records of {machine}"
    return "\n".join(
        [
            f"dlrm-study {prov['package_version']}, commit {prov['git_commit']}, {prov['timestamp']}",
            f"machine {results.machine_key()} ({prov['cpu_model']}, {prov['cpu_count']} CPUs)",
            f"Python {prov['python_version']}, {versions}",
            f"profile {profile}; records in {Path(out)}; figures draw {drawn}",
        ]
    )


def footer() -> str:
    """How many measurements this run made, and how many it reused from earlier runs' records."""
    t = runner.TALLY
    return f"this run measured {t['measured']} record(s) and reused {t['reused']} already in the results folder"
