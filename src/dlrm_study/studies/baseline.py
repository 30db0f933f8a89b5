"""Notebook 02's S1 decomposition: the 2020 reference step on torch 1.5.1, then today's loops.

Six steps, interleaved within each repeat at 1 and 2 threads, on `dlrm-benchmark` and
`mlperf-scaled`: the 2020 training step (`dlrm_study.baseline_2020`) on the 2020 stack
(`.venv-2020`: Python 3.8, torch 1.5.1, built by `make baseline-2020`) and the same file on
today's torch, both in their own processes; then today's reference loop, torchrec, and the
optimized loop in fp32 and bf16 (bf16 only where the CPU has it natively), in this process.
Records: `baseline.csv`, study `baseline-2020-<profile>`.
"""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

from dlrm_study.config import Config
from dlrm_study.errors import UsageError
from dlrm_study.measure import baseline_2020, runner
from dlrm_study.measure.bench import measure_prepared
from dlrm_study.measure.prepared import prepare
from dlrm_study.measure.timing import step_times
from dlrm_study.plans.baseline import OLD, OLD_TODAY, points
from dlrm_study.plans.profiles import BASELINE, RUNS, shown
from dlrm_study.records import columns as col
from dlrm_study.records import provenance

PYTHON_2020 = Path(__file__).resolve().parents[3] / ".venv-2020" / "bin" / "python"


def step_config(cfg: Config) -> dict[str, object]:
    """What the 2020 step needs of a config (it knows nothing of the package's Config)."""
    if cfg.data.pooling != "fixed":
        raise UsageError(f"config {cfg.name}: the 2020 step draws a fixed number of lookups (data.pooling=fixed)")
    m = cfg.model
    return {
        "dense_features": m.dense_features,
        "bottom_mlp": list(m.bottom_mlp),
        "table_rows": list(m.table_rows),
        "embedding_dim": m.embedding_dim,
        "top_mlp": list(m.top_mlp),
        col.BATCH_SIZE: cfg.train.batch_size,
        "lookups_per_table": cfg.data.lookups_per_table,
        "learning_rate": cfg.train.learning_rate,
    }


def check_python(python: Path) -> str:
    """The torch version of the 2020 environment's Python, or a one-line refusal."""
    if not Path(python).exists():
        raise UsageError(f"no Python at {python}: `make baseline-2020` builds .venv-2020 (Python 3.8, torch 1.5.1)")
    done = subprocess.run([str(python), "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
    if done.returncode != 0:
        raise UsageError(f"{python} cannot import torch: `make baseline-2020` installs torch 1.5.1 into .venv-2020")
    return done.stdout.strip()


def subprocess_fields(python: Path, cfg: Config, steps: int, warmup: int) -> dict[str, object]:
    """Time the 2020 step in its own process under `python`; the record's fields."""
    command = [str(python), baseline_2020.__file__, "--config", json.dumps(step_config(cfg))]
    command += ["--steps", str(steps), "--warmup", str(warmup), "--threads", str(cfg.train.threads)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the 2020 step under {python} failed: {last}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        col.LOOP: "reference-2020",
        col.SPARSE_ARCH: "reference",
        col.PRECISION: "fp32",
        col.DEVICE: "cpu",
        col.THREADS: out["threads"],
        col.BATCH_SIZE: cfg.train.batch_size,
        col.STEPS: steps,
        col.WARMUP: warmup,
        **step_times(out["ms"], cfg.train.batch_size),
        "torch_version": out["torch_version"],  # the stack that ran, not this process's
        "python_version": out["python_version"],
        col.BUILDS: "every repeat (own process)",
    }


def in_process_fields(cfg: Config, steps: int, warmup: int) -> dict[str, object]:
    prepared = prepare(cfg)
    try:
        return {**measure_prepared(prepared, steps, warmup, 0, progress=False), col.BUILDS: "every repeat"}
    finally:
        prepared.close()


def run(profile: str, out: Path, python: Path = PYTHON_2020, progress: bool = True) -> runner.Counts:
    """Measure what `baseline.csv` does not hold yet (resumable, like every study)."""
    old_torch = check_python(python)
    p = BASELINE[profile]
    print(f"2020 stack: {shown(python)} (torch {old_torch}); {p.repeats} repeats of {p.warmup} + {p.steps} steps")

    def measure(task: runner.Task) -> dict[str, object]:
        if task.variant == OLD:
            return subprocess_fields(python, task.cfg, p.steps, p.warmup)
        if task.variant == OLD_TODAY:
            return subprocess_fields(Path(sys.executable), task.cfg, p.steps, p.warmup)
        return in_process_fields(task.cfg, p.steps, p.warmup)

    tasks = runner.schedule(points(profile), p.repeats, runner.machine_of, runs=RUNS[profile])
    # A 2020 record names the stack that ran it (torch 1.5.1), so that is what it resumes by.
    stack = {**provenance.versions(), "torch_version": old_torch}
    tasks = [dataclasses.replace(t, versions=stack) if t.variant == OLD else t for t in tasks]
    return runner.run(tasks, measure, out / "baseline.csv", f"baseline-2020-{profile}", progress=progress)
