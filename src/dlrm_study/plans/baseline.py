"""Notebook 02's S1 decomposition as data: the six steps (the 2020 reference step on torch 1.5.1 and on today's
torch, then today's loops), the configs and thread counts they are measured at (`studies.baseline` measures them).
"""

from dlrm_study import config
from dlrm_study.config.variants import OPTIMIZED_BF16, OPTIMIZED_FP32, REFERENCE, REGISTRY, TORCHREC
from dlrm_study.plans.sweep import Planned, runnable

OLD, OLD_TODAY = "reference-2020", "reference-2020-today"
STEPS = {  # variant -> what the decomposition calls it, in order
    OLD: "2020 reference step, torch 1.5.1",
    OLD_TODAY: "the same step, today's torch",
    REFERENCE: "today's reference loop",
    TORCHREC: "torchrec",
    OPTIMIZED_FP32: "optimized fp32",
    OPTIMIZED_BF16: "optimized bf16",
}
CONFIGS = {"smoke": ["tiny"], "quick": ["dlrm-benchmark", "mlperf-scaled"], "full": ["dlrm-benchmark", "mlperf-scaled"]}
THREADS = {"smoke": [1], "quick": [1, 2], "full": [1, 2]}
SMOKE_SET = ["train.batch_size=32", "data.pooling=fixed"]


def points(profile: str) -> list[Planned]:
    """(label, {variant: config}) per config and thread count: the six steps side by side."""
    kept, _ = runnable(list(STEPS))
    out = []
    for name in CONFIGS[profile]:
        for threads in THREADS[profile]:
            base = [*SMOKE_SET] if profile == "smoke" else []
            base.append(f"train.threads={threads}")
            configs = {
                variant: config.load(name, [*base, *REGISTRY.get(variant, ["train.loop=reference"])])
                for variant in kept
            }
            out.append((f"{name} {threads}t", configs))
    return out
