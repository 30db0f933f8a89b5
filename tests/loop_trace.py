"""What each loop's measurement executes: run as `python tests/loop_trace.py LOOP...`, it imports the package
first (so module bodies do not count), then traces a tiny sweep of each loop's variants on the CPU (the GPU
loop's twins) and prints, as JSON, per loop, each package file whose functions ran, with their names."""

import importlib
import json
import pkgutil
import sys
import tempfile
import threading
from pathlib import Path

import dlrm_study

VARIANTS = {
    "reference": ["reference"],
    "optimized": ["optimized-fp32", "optimized-bf16", "optimized-bf16-plain-sgd"],
    "torchrec": ["torchrec"],
    "gpu": ["gpu-hbm", "gpu-hbm-fp32", "gpu-host", "gpu-uvm", "gpu-cached", "gpu-cached-lfu", "gpu-eager"],
}

# The GPU loop's twins run its Triton kernels in Triton's interpreter on the CPU (the tests set TRITON_INTERPRET=1),
# whose cost grows with the batch: at tiny's batch of 64 their trace took about 200 s, at 4 about 17 s, and the two
# traced the same files and the same functions in them (compared on a Zen 4, 2026-12-07).
GPU_TWIN_BATCH = 4


def main(loops: list[str]) -> None:
    for module in pkgutil.walk_packages(dlrm_study.__path__, "dlrm_study."):
        if module.name.split(".")[1] not in ("cli", "report", "analysis", "studies", "__main__"):
            importlib.import_module(module.name)
    from dlrm_study.config.variants import REGISTRY

    root = Path(dlrm_study.__file__).parent
    found = {}
    for loop in loops:
        ran = trace(loop, root, REGISTRY)
        found[loop] = {f: sorted(names) for f, names in sorted(ran.items())}
    print(json.dumps(found))


def trace(loop: str, root: Path, registry) -> dict[str, set[str]]:
    """The package files whose functions ran in a tiny sweep of the loop's variants, with their names."""
    from dlrm_study.measure import sweep
    from dlrm_study.plans.sweep import Sweep

    ran: dict[str, set[str]] = {}
    seen: set = set()  # code objects already noted: the tracer costs a set lookup on each later call
    prefix = str(root)

    def tracer(frame, event, arg):  # Python calls only (`settrace`): no event for torch's C calls, no line events
        code = frame.f_code
        if code not in seen:
            seen.add(code)
            if code.co_filename.startswith(prefix):
                ran.setdefault(Path(code.co_filename).relative_to(root).as_posix(), set()).add(code.co_name)
        return None

    variants = [v for v in VARIANTS[loop] if v in registry]
    extra = ["train.device=cpu", f"train.batch_size={GPU_TWIN_BATCH}"] if loop == "gpu" else []
    with tempfile.TemporaryDirectory(prefix="dlrm-study-trace-") as folder:  # the records go with the trace
        spec = Sweep(name="trace", config="tiny", set=extra, variants=variants, repeats=1, steps=2, warmup=1,
                     profile_steps=1, out=str(Path(folder) / "trace.csv"))  # fmt: skip
        sys.settrace(tracer)
        threading.settrace(tracer)
        try:
            sweep.run(spec, progress=False)
        finally:
            sys.settrace(None)
            threading.settrace(None)
    return ran


if __name__ == "__main__":
    main(sys.argv[1:])
