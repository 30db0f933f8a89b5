"""Time facebookresearch/dlrm's `dlrm_s_pytorch.py` and record it beside our reference loop.

    python scripts/upstream_dlrm.py --dlrm-dir PATH [--python PYTHON] [--batches 40]
    python scripts/upstream_dlrm.py --report     # ours over upstream, from the records

PATH is a checkout of facebookresearch/dlrm (not part of this repository); PYTHON an
interpreter with torch, numpy, scikit-learn and tensorboard, as dlrm needs. The run
uses the configuration of dlrm's bench/dlrm_s_benchmark.sh (our `dlrm-benchmark`
preset), parses dlrm's own "ms/it" lines, drops the first window as warm-up, and
appends one record (loop `upstream-dlrm`) to results/bench.csv with provenance: the code
fingerprint, and the invocation id `make compare-upstream` gives every process it starts
(DLRM_STUDY_INVOCATION). `--report` pairs ours with theirs only within one invocation and one
code fingerprint, and reports each code apart, newest first (`analysis.compare.upstream_report`).
"""

import argparse
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from dlrm_study import config
from dlrm_study.analysis.compare import upstream_report
from dlrm_study.records import columns as col
from dlrm_study.records import store
from dlrm_study.records.record import make_record

ARGS = [
    "--arch-sparse-feature-size=64",
    "--arch-mlp-bot=512-512-64",
    "--arch-mlp-top=1024-1024-1024-1",
    "--arch-embedding-size=" + "-".join(["1000000"] * 8),
    "--num-indices-per-lookup=100",
    "--num-indices-per-lookup-fixed=True",
    "--mini-batch-size=2048",
    "--data-generation=random",
    "--print-time",
]
MS_PER_IT = re.compile(r"Finished training it \d+/\d+ of epoch \d+, ([0-9.]+) ms/it")


def interpreter(name: str) -> str:
    """`--python` as a command that runs from dlrm's folder: a path made absolute, or a name on PATH."""
    found = str(Path(name).absolute()) if "/" in name else shutil.which(name)  # absolute: a venv's link stays
    if not found or not Path(found).is_file():
        print(f"upstream_dlrm: --python {name}: no such interpreter (make upstream-env builds .venv-upstream)",
              file=sys.stderr)  # fmt: skip
        sys.exit(2)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dlrm-dir", type=Path)
    parser.add_argument(
        "--report", action="store_true", help="print ours over upstream from --out's records, run nothing"
    )
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--window", type=int, default=5, help="dlrm --print-freq: iterations per ms/it figure")
    parser.add_argument("--out", type=Path, default=Path("results/bench.csv"))
    args = parser.parse_args()
    if args.report:
        print(upstream_report(store.load(args.out)) if args.out.is_file() else f"upstream_dlrm: no {args.out}")
        return
    if args.dlrm_dir is None:
        sys.exit("upstream_dlrm: --dlrm-dir is required (a checkout of facebookresearch/dlrm)")

    script = args.dlrm_dir / "dlrm_s_pytorch.py"
    if not script.is_file():
        sys.exit(f"upstream_dlrm: {script} not found")
    python = interpreter(args.python)
    command = [python, script.name, *ARGS, f"--num-batches={args.batches}", f"--print-freq={args.window}"]
    proc = subprocess.run(command, cwd=args.dlrm_dir, capture_output=True, text=True)
    windows = [float(ms) for ms in MS_PER_IT.findall(proc.stdout)]
    if proc.returncode != 0 or len(windows) < 2:
        sys.exit(f"upstream_dlrm: dlrm failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    timed = windows[1:]  # the first window holds the warm-up iterations
    cfg = config.preset("dlrm-benchmark")
    median = statistics.median(timed)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=args.dlrm_dir, capture_output=True, text=True)
    version = "import torch; print(torch.__version__)"
    torch_version = subprocess.run([args.python, "-c", version], capture_output=True, text=True).stdout.strip()
    fields = {
        col.LOOP: "upstream-dlrm",
        col.SPARSE_ARCH: "upstream-dlrm",
        col.PRECISION: "fp32",
        col.DEVICE: "cpu",
        col.BATCH_SIZE: cfg.train.batch_size,
        col.STEPS: len(timed) * args.window,
        col.WARMUP: args.window,
        **col.Timing.of_steps(timed, cfg.train.batch_size).fields(),  # over windows, each a mean of --window its
        "upstream_commit": commit.stdout.strip() or "unknown",
        "upstream_torch_version": torch_version,
        "upstream_ms_windows": " ".join(f"{ms:.1f}" for ms in timed),
        col.ERROR: "",
    }
    store.append(args.out, make_record("upstream", fields, cfg, variant="upstream-dlrm"))
    print(f"facebookresearch/dlrm: {median:.1f} ms/it median over {len(timed)} windows of {args.window} its")


if __name__ == "__main__":
    main()
