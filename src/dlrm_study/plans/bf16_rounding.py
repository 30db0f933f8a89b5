"""The bf16 rounding probe's plan (notebook 07): the fp32 runs it follows, one per accuracy preset, its records'
fields and the steps over which it keeps plain bf16's movement (`studies.bf16_rounding` runs it)."""

from dlrm_study.config import Config
from dlrm_study.config.variants import OPTIMIZED_FP32
from dlrm_study.plans.convergence import ACCURACY_PRESETS, REGIMES, accuracy_config

RECORDS = "bf16_rounding.csv"
GROUP, MOVED, ROUNDED_AWAY, MEDIAN_OVER_HALF = "group", "moved", "rounded_away", "median_update_over_half_spacing"
MOVEMENT_KEPT = "movement_kept"
GROUPS = ("embeddings", "mlp")
# Steps at the end of each window over which plain bf16's weights follow fp32's updates (`movement_kept`): a
# fifth of the quick profile's window, enough for noise to scatter a weight's updates, and few copies of the
# weights (mlperf-scaled's tables are 150 MB).
KEPT_STEPS = 10


def study(profile: str) -> str:
    return f"bf16-rounding-{profile}"


def fp32_configs(profile: str, seed: int = 0) -> list[Config]:
    """The fp32 run the probe trains for each accuracy preset in each regime (smoke: the first preset's reduction,
    of tiny)."""
    presets = ACCURACY_PRESETS[:1] if profile == "smoke" else ACCURACY_PRESETS
    return [accuracy_config(profile, preset, OPTIMIZED_FP32, seed, r) for r in REGIMES for preset in presets]
