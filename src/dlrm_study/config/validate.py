"""Refusing, before anything is allocated, a config that cannot run: the message names the field."""

from dlrm_study.config.schema import (
    CACHE_POLICIES,
    DEVICES,
    LOOPS,
    OPTIMIZED_SWITCHES,
    OPTIMIZERS,
    PLACEMENTS,
    PRECISIONS,
    TORCHREC_PLACEMENTS,
    Config,
    Loop,
    Placement,
    Precision,
)
from dlrm_study.errors import UsageError

MAX_THREADS = 1024  # more than any one machine here has cores


def validate(cfg: Config) -> Config:
    """Refuse, naming the field, any config that cannot run; return it unchanged otherwise."""
    m, d, t = cfg.model, cfg.data, cfg.train
    positive = {
        "model.dense_features": m.dense_features,
        "model.embedding_dim": m.embedding_dim,
        "data.lookups_per_table": d.lookups_per_table,
        "train.batch_size": t.batch_size,
        "train.eval_batches": t.eval_batches,
    }
    for key, value in positive.items():
        if value <= 0:
            raise UsageError(f"{key} must be positive, got {value}")
    for key, widths in {"model.bottom_mlp": m.bottom_mlp, "model.top_mlp": m.top_mlp}.items():
        if not widths or min(widths) <= 0:
            raise UsageError(f"{key} must be a non-empty list of positive widths, got {widths}")
    if not m.table_rows or min(m.table_rows) <= 0:
        raise UsageError(f"model.table_rows must be a non-empty list of positive sizes, got {m.table_rows}")
    if t.steps < 0 or t.threads < 0 or t.prefetch < 0:
        raise UsageError("train.steps, train.threads and train.prefetch must not be negative")
    if t.threads > MAX_THREADS:  # the OS refuses to start that many, deep inside torch
        raise UsageError(f"train.threads must be at most {MAX_THREADS}, got {t.threads}")
    for key, seed in {"train.seed": t.seed, "data.teacher_seed": d.teacher_seed}.items():
        if not 0 <= seed < 2**32:  # what numpy and torch generators accept
            raise UsageError(f"{key} must be in [0, 2**32), got {seed}")
    if t.learning_rate <= 0:
        raise UsageError(f"train.learning_rate must be positive, got {t.learning_rate}")
    if m.interaction != "dot":
        raise UsageError(f"model.interaction {m.interaction!r} is not supported (only 'dot')")
    if m.bottom_mlp[-1] != m.embedding_dim:
        raise UsageError(
            f"model.bottom_mlp ends in {m.bottom_mlp[-1]} but the dot interaction needs "
            f"it to equal model.embedding_dim ({m.embedding_dim})"
        )
    if m.top_mlp[-1] != 1:
        raise UsageError(f"model.top_mlp must end in 1 (one logit), got {m.top_mlp[-1]}")
    choices = {
        "data.source": (d.source, ("synthetic", "criteo")),
        "data.pooling": (d.pooling, ("fixed", "uniform")),
        "data.id_distribution": (d.id_distribution, ("uniform", "zipf")),
        "data.teacher": (d.teacher, ("additive", "dlrm")),
        "train.loop": (t.loop, LOOPS),
        "train.precision": (t.precision, PRECISIONS),
        "train.optimizer": (t.optimizer, OPTIMIZERS),
        "train.device": (t.device, DEVICES),
    }
    for key, (value, allowed) in choices.items():
        if value not in allowed:
            raise UsageError(f"{key} {value!r} is not one of {', '.join(allowed)}")
    if t.loop in (Loop.OPTIMIZED, Loop.TORCHREC) and t.device == "cuda":
        raise UsageError(f"train.loop {t.loop} runs on the CPU; use train.device=cpu (or train.loop=gpu)")
    validate_placement(cfg)
    switched_off = [name for name in OPTIMIZED_SWITCHES if not getattr(t, name)]
    if switched_off and t.loop != Loop.OPTIMIZED:
        raise UsageError(
            f"train.{switched_off[0]} switches a technique of the optimized loop (set train.loop=optimized)"
        )
    if t.precision == Precision.BF16 and t.loop == Loop.REFERENCE:
        raise UsageError("train.precision bf16 needs the optimized loop (the reference is fp32, as in dlrm)")
    if d.id_distribution == "zipf" and d.zipf_alpha <= 0:
        raise UsageError(f"data.zipf_alpha must be positive, got {d.zipf_alpha}")
    if d.source == "criteo":
        if not d.path:
            raise UsageError("data.path must name a Criteo TSV file when data.source is criteo")
        if m.dense_features != 13 or m.num_tables != 26:
            raise UsageError(
                "Criteo data has 13 dense and 26 categorical features: set model.dense_features=13 "
                f"and 26 model.table_rows (got {m.dense_features} and {m.num_tables})"
            )
    return cfg


def placements(cfg: Config) -> list[str]:
    """The placement of each table: `train.placement` repeated, or its comma list."""
    parts = [p.strip() for p in cfg.train.placement.split(",")]
    return parts * cfg.model.num_tables if len(parts) == 1 else parts


def validate_placement(cfg: Config) -> None:
    t = cfg.train
    if t.loop != Loop.GPU:
        if t.placement != Placement.HBM:
            raise UsageError(f"train.placement {t.placement} applies to the gpu loop only (set train.loop=gpu)")
        return
    single = (*PLACEMENTS, *TORCHREC_PLACEMENTS, "auto")
    each = placements(cfg)
    if "," in t.placement:
        if len(each) != cfg.model.num_tables:
            raise UsageError(
                f"train.placement lists {len(each)} placements for {cfg.model.num_tables} tables (one per table)"
            )
        bad = [p for p in each if p not in PLACEMENTS]
        if bad:
            raise UsageError(f"train.placement {bad[0]!r} in a per-table list is not one of {', '.join(PLACEMENTS)}")
    elif t.placement not in single:
        raise UsageError(f"train.placement {t.placement!r} is not one of {', '.join(single)} (or a per-table list)")
    if not 0 < t.cache_fraction <= 1:
        raise UsageError(f"train.cache_fraction must be in (0, 1], got {t.cache_fraction}")
    if t.cache_policy not in CACHE_POLICIES:
        raise UsageError(f"train.cache_policy {t.cache_policy!r} is not one of {', '.join(CACHE_POLICIES)}")
    if t.precision == Precision.BF16 and t.placement.startswith("torchrec"):
        raise UsageError("train.precision bf16 with a torchrec placement is not supported; use fp32")
