"""Model, data and training configs.

A config is three dataclasses (model, data, train) under one `Config` (schema). It is built
from a preset (presets) or a YAML file, changed by `--set section.field=value` overrides
(overrides) and validated before anything is allocated (validate), so a config that cannot
run is refused with a message naming the field; memory checks that it fits the device and
auto_placement picks where its tables live when asked to. `variants` names what ran (loop,
precision, placement, switches) both ways: a name stands for overrides, a config has a name.
"""

from dlrm_study.config.auto_placement import AUTO_ORDER, resolve_placement
from dlrm_study.config.memory import (
    GiB,
    MemoryEstimate,
    available_memory,
    check_fits,
    check_split_fits,
    estimate_memory,
    split_memory,
    table_bytes,
)
from dlrm_study.config.overrides import (
    apply_override,
    check_input_file,
    coerce,
    from_yaml,
    load,
    parse_int_list,
    parse_text,
    read_text,
    read_yaml,
    set_field,
)
from dlrm_study.config.presets import KAGGLE_ROWS, MLPERF_ROW_CAP, MLPERF_ROWS, PRESETS, preset
from dlrm_study.config.schema import (
    CACHE_POLICIES,
    DEVICES,
    LATER_FIELDS,
    LOOPS,
    OPTIMIZED_SWITCHES,
    OPTIMIZERS,
    PLACEMENTS,
    PRECISIONS,
    SECTIONS,
    TORCHREC_PLACEMENTS,
    Config,
    DataConfig,
    Loop,
    ModelConfig,
    Placement,
    Precision,
    TrainConfig,
    format_value,
)
from dlrm_study.config.validate import placements, validate, validate_placement

__all__ = [
    "AUTO_ORDER",
    "CACHE_POLICIES",
    "DEVICES",
    "KAGGLE_ROWS",
    "LATER_FIELDS",
    "LOOPS",
    "MLPERF_ROWS",
    "MLPERF_ROW_CAP",
    "OPTIMIZED_SWITCHES",
    "OPTIMIZERS",
    "PLACEMENTS",
    "PRECISIONS",
    "PRESETS",
    "SECTIONS",
    "TORCHREC_PLACEMENTS",
    "Config",
    "DataConfig",
    "GiB",
    "Loop",
    "MemoryEstimate",
    "ModelConfig",
    "Placement",
    "Precision",
    "TrainConfig",
    "apply_override",
    "available_memory",
    "check_fits",
    "check_input_file",
    "check_split_fits",
    "coerce",
    "estimate_memory",
    "format_value",
    "from_yaml",
    "load",
    "parse_int_list",
    "parse_text",
    "placements",
    "preset",
    "read_text",
    "read_yaml",
    "resolve_placement",
    "set_field",
    "split_memory",
    "table_bytes",
    "validate",
    "validate_placement",
]  # fmt: skip
