"""The presets of DESIGN.md, by name."""

from dlrm_study.config.schema import Config, DataConfig, ModelConfig, TrainConfig
from dlrm_study.errors import UsageError

# Criteo Kaggle (Display Advertising Challenge) cardinalities of the 26 categorical
# features, as used by facebookresearch/dlrm's bench/dlrm_s_criteo_kaggle.sh.
KAGGLE_ROWS = [
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
    27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572,
]  # fmt: skip

# MLPerf DLRM (Criteo Terabyte, --max-ind-range=40000000) cardinalities.
MLPERF_ROWS = [
    39884406, 39043, 17289, 7420, 20263, 3, 7120, 1543, 63, 38532951, 2953546, 403346,
    10, 2208, 11938, 155, 4, 976, 14, 39979771, 25641295, 39664984, 585935, 12972,
    108, 36,
]  # fmt: skip

# Capped so the whole model (fp32 tables, dim 128) stays near 3.6 GB and fits a
# 24 GB development machine with room for optimizer state and activations.
MLPERF_ROW_CAP = 1_000_000


def preset(name: str) -> Config:
    """One of the presets of DESIGN.md, by name."""
    if name == "tiny":
        # Heavy-tailed ids, as in click logs, and a larger step: 300 steps then
        # learn the synthetic teacher well past AUC 0.75 (a smoke test of learning).
        return Config(
            name="tiny",
            data=DataConfig(id_distribution="zipf"),
            train=TrainConfig(learning_rate=0.3),
        )
    if name == "kaggle":
        return Config(
            name="kaggle",
            model=ModelConfig(13, [512, 256, 64, 16], KAGGLE_ROWS, 16, [512, 256, 1]),
            data=DataConfig(lookups_per_table=1, pooling="fixed"),
            train=TrainConfig(batch_size=128),
        )
    if name == "dlrm-benchmark":
        return Config(
            name="dlrm-benchmark",
            model=ModelConfig(512, [512, 64], [1_000_000] * 8, 64, [1024, 1024, 1024, 1]),
            data=DataConfig(lookups_per_table=100, pooling="fixed"),
            train=TrainConfig(batch_size=2048),
        )
    if name == "mlperf-scaled":
        rows = [min(n, MLPERF_ROW_CAP) for n in MLPERF_ROWS]
        return Config(
            name="mlperf-scaled",
            model=ModelConfig(13, [512, 256, 128], rows, 128, [1024, 1024, 512, 256, 1]),
            data=DataConfig(lookups_per_table=1, pooling="fixed"),
            train=TrainConfig(batch_size=2048),
        )
    raise UsageError(f"unknown preset {name!r} (choose from {', '.join(PRESETS)})")


PRESETS = ("tiny", "kaggle", "dlrm-benchmark", "mlperf-scaled")
