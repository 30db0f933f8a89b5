"""The scaling study on this machine: 1 and 2 ranks under torchrun, one core per rank.

Points (all on `SCALING_BASE`): strong scaling keeps the global batch (1 and 2 ranks at
batch B); weak scaling keeps the batch per rank (1 rank at B / 2, 2 ranks at B); and one
more single-rank point with twice the lookups lets the model tell dense work from sparse
work. Each point is one `dlrm-study bench --distributed` run appending one record; points
already recorded for this environment are skipped, so an interrupted study resumes.
"""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from dlrm_study import config, results
from dlrm_study.errors import UsageError
from dlrm_study.sweep import environment

SCALING_BASE = ["model.table_rows=8x100000", "data.lookups_per_table=20", "train.loop=optimized"]
SIZES = {  # profile -> (global batch B, timed steps, warm-up steps)
    "smoke": (64, 2, 1),
    "quick": (1024, 10, 3),
    "full": (2048, 30, 5),
}


def points(profile: str) -> list[tuple[int, list[str]]]:
    """(ranks, overrides) of every point."""
    batch = SIZES[profile][0]
    base = ["model.table_rows=4x1000", "data.lookups_per_table=4"] if profile == "smoke" else SCALING_BASE[:2]
    lookups = int(base[1].split("=")[1])
    return [
        (1, [*base, f"train.batch_size={batch}"]),
        (2, [*base, f"train.batch_size={batch}"]),
        (1, [*base, f"train.batch_size={batch // 2}"]),
        (1, [base[0], f"data.lookups_per_table={2 * lookups}", f"train.batch_size={batch}"]),
    ]


def preset(profile: str) -> str:
    return "tiny" if profile == "smoke" else "dlrm-benchmark"


def measure(profile: str, out: Path, progress: bool = True) -> pd.DataFrame:
    """Run the points not yet recorded (each in its own torchrun), then return the study's records."""
    path, study = out / "scaling.csv", f"scaling-{profile}"
    env_key = environment(threads=1)["env_key"]
    steps, warmup = SIZES[profile][1:]
    done = {(r["config_hash"], r["world_size"], r["env_key"]) for r in results.read_rows(path)[1] if "env_key" in r}
    for ranks, overrides in points(profile):
        cfg = config.load(preset(profile), ["train.loop=optimized", *overrides])
        if (cfg.hash(), str(ranks), env_key) in done:
            continue
        if progress:
            print(f"scaling: {ranks} rank(s), {' '.join(overrides)}", flush=True)
        run_point(ranks, preset(profile), ["train.loop=optimized", *overrides], steps, warmup, path, study)
    return records(profile, out)


def run_point(ranks: int, base: str, overrides: list[str], steps: int, warmup: int, path: Path, study: str) -> None:
    args = ["bench", "--distributed", "--config", base, "--steps", str(steps), "--warmup", str(warmup)]
    args += ["--study", study, "--out", str(path), *(item for o in overrides for item in ("--set", o))]
    launch(ranks, args)


def launch(ranks: int, args: list[str]) -> None:
    """`dlrm-study ARGS` on `ranks` processes under torchrun (or alone for 0), one core each."""
    command = [sys.executable, "-m", "dlrm_study", *args]
    if ranks:
        command[1:1] = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}"]
    # One core per rank: a 2-rank run shares this machine's cores without oversubscribing them.
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.startswith(("dlrm-study", "parameter server"))]
        raise UsageError(
            f"{' '.join(args[:2])} on {ranks or 1} process(es) failed: {said[-1] if said else done.stderr[-300:]}"
        )


def records(profile: str, out: Path) -> pd.DataFrame:
    path = out / "scaling.csv"
    if not path.exists():
        raise UsageError(f"no records yet: {path} does not exist (run with measure=True)")
    frame = results.load(path)
    frame = frame[frame["study"] == f"scaling-{profile}"]
    return frame.sort_values("timestamp").drop_duplicates(["config_hash", "world_size"], keep="last")


def measured_efficiency(frame: pd.DataFrame) -> dict[str, float]:
    """Strong and weak scaling from 1 to 2 ranks, from the measured points of `points`."""
    base = frame[frame["data.lookups_per_table"] == frame["data.lookups_per_table"].min()]
    rate = base.set_index(["world_size", "batch_size"])["samples_per_s"]
    big = int(base["batch_size"].max())
    strong = rate[(2, big)] / rate[(1, big)]
    weak = rate[(2, big)] / (2 * rate[(1, big // 2)])
    return {"strong_speedup": strong, "strong_efficiency": strong / 2, "weak_efficiency": weak}
