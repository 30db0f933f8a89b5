"""`dlrm-study` commands on several processes under torchrun, from a study in this process.

A study that measures ranks (the scaling study, local against remote tables) launches each
repeat as its own process group and reads back the fields rank 0 measured (`launch_fields`).
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from dlrm_study.errors import UsageError


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


def launch_fields(ranks: int, args: list[str]) -> dict[str, object]:
    """The measured fields of one repeat of `dlrm-study bench ARGS`, run as `launch` runs it."""
    with tempfile.TemporaryDirectory(prefix="dlrm-study-") as scratch:
        handback = Path(scratch) / "fields.json"
        launch(ranks, [*args, "--fields-json", str(handback), "--no-progress"])
        return json.loads(handback.read_text())
