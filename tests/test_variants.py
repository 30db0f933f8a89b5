"""Variant names and configs are inverses for every registered variant (issue: records with one schema)."""

import pytest

from dlrm_study import config
from dlrm_study.config.variants import ALIASES, REGISTRY, Variant


@pytest.mark.parametrize("name", [name for name in REGISTRY if name not in ALIASES])
@pytest.mark.parametrize("base", ["tiny", "dlrm-benchmark"])
def test_every_variant_round_trips(name: str, base: str) -> None:
    cfg = config.load(base, Variant.named(name).overrides)
    assert Variant.of(cfg).name == name


def test_the_ablation_step_keeps_its_name():
    """`fused-update` came back as optimized-fp32-no-table-batching-no-huge-pages-no-fused-interaction."""
    assert Variant.of(config.load("tiny", REGISTRY["fused-update"])).name == "fused-update"


def test_a_config_no_variant_describes_gets_a_name_that_is_no_variant():
    cfg = config.load("tiny", ["train.loop=optimized", "train.huge_pages=false"])
    assert Variant.of(cfg).name == "optimized-fp32-no-huge-pages" and Variant.of(cfg).name not in REGISTRY
    with pytest.raises(KeyError, match="unknown variant"):
        Variant.named("optimized-fp32-no-huge-pages")


def test_an_alias_names_its_loops_config():
    for alias, name in ALIASES.items():
        cfg = config.load("tiny", ["train.device=cuda", *Variant.named(alias).overrides])  # as in a GPU's sweep
        assert cfg.hash() == config.load("tiny", REGISTRY[name]).hash() and Variant.of(cfg).name == name


@pytest.mark.parametrize("name", list(REGISTRY))
def test_a_variants_setting_is_what_its_config_gets(name: str) -> None:
    """`Variant.setting` (what predictions read a gpu variant's placement from) agrees with the config."""
    cfg = config.load("tiny", Variant.named(name).overrides)
    for field in ("loop", "placement", "precision"):
        given = Variant.named(name).setting(field)
        assert given is None or given == str(getattr(cfg.train, field)), (name, field)
    assert Variant.named(name).setting("no_such_field") is None
    if cfg.train.loop == "gpu":  # every gpu variant places its tables itself
        assert Variant.named(name).setting("placement") == cfg.train.placement
