import pytest

from dlrm_study import config
from dlrm_study.errors import UsageError


@pytest.mark.parametrize("name", config.PRESETS)
def test_presets_are_valid_and_match_design(name):
    cfg = config.validate(config.preset(name))
    assert cfg.model.bottom_mlp[-1] == cfg.model.embedding_dim
    assert cfg.model.top_mlp[-1] == 1


def test_preset_shapes():
    bench = config.preset("dlrm-benchmark")
    assert bench.model.table_rows == [1_000_000] * 8
    assert (bench.model.dense_features, bench.model.bottom_mlp) == (512, [512, 64])
    assert bench.model.top_mlp == [1024, 1024, 1024, 1]
    assert (bench.data.lookups_per_table, bench.data.pooling, bench.train.batch_size) == (100, "fixed", 2048)
    # dlrm derives the top-MLP input: 64 + 9 * 8 / 2 pairwise dots.
    assert bench.model.interaction_width == 100
    assert len(config.preset("kaggle").model.table_rows) == 26
    assert max(config.preset("mlperf-scaled").model.table_rows) == config.MLPERF_ROW_CAP


def test_overrides_parse_lists_and_scalars(tiny):
    config.apply_override(tiny, "model.table_rows=3x500")
    config.apply_override(tiny, "model.bottom_mlp=32-16-8")
    config.apply_override(tiny, "train.learning_rate=0.5")
    config.apply_override(tiny, "data.skip_bad_lines=true")
    assert tiny.model.table_rows == [500, 500, 500]
    assert tiny.model.bottom_mlp == [32, 16, 8]
    assert tiny.train.learning_rate == 0.5
    assert tiny.data.skip_bad_lines is True
    config.validate(tiny)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("model.nope=1", "unknown config key 'model.nope'"),
        ("optimizer.lr=1", "unknown config key 'optimizer.lr'"),
        ("model.embedding_dim=abc", "model.embedding_dim"),
        ("model.embedding_dim=2.5", "model.embedding_dim"),
        ("train.skip=1", "unknown config key"),
        ("model.embedding_dim", "expected section.field=value"),
    ],
)
def test_bad_overrides_name_the_key(tiny, override, message):
    with pytest.raises(UsageError, match=message.replace(".", r"\.")):
        config.apply_override(tiny, override)


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("model.embedding_dim=16", "model.bottom_mlp"),  # bottom output must equal dim
        ("model.embedding_dim=0", "model.embedding_dim"),
        ("train.batch_size=-1", "train.batch_size"),
        ("model.table_rows=10-0", "model.table_rows"),
        ("model.top_mlp=16-2", "model.top_mlp"),
        ("train.loop=turbo", "train.loop"),
        ("train.precision=fp8", "train.precision"),
        ("data.pooling=max", "data.pooling"),
    ],
)
def test_validation_names_the_field(tiny, override, field):
    config.apply_override(tiny, override)
    with pytest.raises(UsageError, match=field.replace(".", r"\.")):
        config.validate(tiny)


def test_config_too_large_for_memory_is_refused_before_allocation(tiny):
    config.apply_override(tiny, "model.table_rows=4x100000000000")
    config.apply_override(tiny, "model.embedding_dim=8")
    need = config.estimate_memory(tiny)
    assert need.tables == 4 * 100_000_000_000 * 8 * 4
    with pytest.raises(UsageError, match=r"needs about .* GiB .* available"):
        config.check_fits(tiny, "cpu")


def test_memory_estimate_counts_the_reference_sparse_gradient():
    cfg = config.preset("dlrm-benchmark")
    need = config.estimate_memory(cfg)
    assert need.tables == 8 * 1_000_000 * 64 * 4
    ids = 2048 * 8 * 100
    assert need.activations > ids * 64 * 4  # one gradient row per looked-up id


def test_yaml_with_base_and_overrides(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("base: tiny\nmodel:\n  embedding_dim: 16\n  bottom_mlp: [32, 16]\ntrain:\n  steps: 7\n")
    cfg = config.load(str(path), ["train.seed=3"])
    assert (cfg.name, cfg.model.embedding_dim, cfg.train.steps, cfg.train.seed) == ("mine", 16, 7, 3)
    assert cfg.data.id_distribution == "zipf"  # inherited from the tiny preset
    config.validate(cfg)


@pytest.mark.parametrize(
    ("text", "message"),
    [("model: [1, 2]\n", "section 'model' must be a mapping"), ("colour: red\n", "unknown key 'colour'"),
     ("model:\n  depth: 3\n", "unknown config key 'model.depth'"), ("a: [\n", "not valid YAML")],
)  # fmt: skip
def test_bad_yaml_is_a_usage_error(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        config.load(str(path))


def test_missing_config_file_and_unknown_preset():
    with pytest.raises(UsageError, match="config file not found"):
        config.load("nowhere/cfg.yaml")
    with pytest.raises(UsageError, match="neither a preset"):
        config.load("huge")


def test_dict_round_trip_and_hash(tiny):
    again = config.Config.from_dict(tiny.to_dict())
    assert again == tiny and again.hash() == tiny.hash()
    config.apply_override(again, "train.seed=1")
    assert again.hash() != tiny.hash()
    assert tiny.flat()["model.table_rows"] == "1000-1000-1000-1000"


def test_a_later_field_at_its_default_keeps_older_records_identity(tiny):
    # The hash `tiny` had before the optimized loop's switches existed: stored records carry it.
    assert tiny.hash() == "21ef816e9fa9"
    switched = config.load("tiny", ["train.loop=optimized", "train.huge_pages=false"])
    assert switched.hash() != config.load("tiny", ["train.loop=optimized"]).hash()


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1:30", "1:30"),  # YAML 1.1 would read sexagesimal 90
        ("010", "010"),  # and octal 8
        ("no", "no"),  # and False
        ("2020-01-01", "2020-01-01"),  # and a date
        ("0x10", "0x10"),
        ("nan", "nan"),
        ("12", 12),
        ("-3", -3),
        ("1_000", 1000),
        ("1e3", 1000.0),
        (".5", 0.5),
        ("true", True),
        ("[1, 2]", [1, 2]),
    ],
)
def test_yaml_scalars_follow_the_core_schema(text, value):
    assert config.parse_text(text) == value and type(config.parse_text(text)) is type(value)


def test_text_fields_take_set_values_as_written():
    cfg = config.load("tiny", ["data.path=clicks #2.tsv", "name=yes", "data.source=criteo"])
    assert (cfg.data.path, cfg.name) == ("clicks #2.tsv", "yes")
    with pytest.raises(UsageError, match=r"train.steps: '1:30' is not a valid whole number"):
        config.load("tiny", ["train.steps=1:30"])


def test_the_gpu_loops_memory_counts_its_staged_ids_not_gradient_rows():
    """The gpu loop makes no per-id gradient row: per looked-up id it holds its staged ids (a ring and the
    step's copy, int32) and its update's sort buffers, tens of bytes, not the reference's 24 + 4 x dim."""
    reference = config.load("dlrm-benchmark", ["train.batch_size=65536"])
    gpu = config.load("dlrm-benchmark", ["train.batch_size=65536", "train.loop=gpu", "train.device=cuda"])
    ids = 65536 * 8 * 100
    assert config.memory.gpu_id_bytes(gpu) < 64
    per_id = config.estimate_memory(reference).activations - config.estimate_memory(gpu).activations
    assert per_id == pytest.approx(ids * (24 + 64 * 4 - config.memory.gpu_id_bytes(gpu)))


def test_the_large_gpu_presets_are_kept_built_across_repeats_on_an_h200(monkeypatch):
    """139 GiB free: the large presets' eight runs (two presets at 16,384 and 65,536, bf16 and fp32) fit in half
    of it together, so their three repeats share one build each (counted as before, 95 GiB: every task rebuilt)."""
    from dlrm_study.measure import runner

    monkeypatch.setattr(runner.config, "available_memory", lambda device: 139 << 30)
    monkeypatch.setattr(runner, "record_device", lambda cfg: "cuda")
    runs = [
        config.load(base, ["train.loop=gpu", "train.device=cuda", f"train.batch_size={b}", f"train.precision={p}"])
        for base in ("mlperf-scaled", "dlrm-benchmark")
        for b in (16384, 65536)
        for p in ("bf16", "fp32")
    ]
    assert runner.fits_together(runs)
