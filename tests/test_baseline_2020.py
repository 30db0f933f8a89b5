"""The 2020 training step (dlrm_study.baseline_2020) trains what the reference loop trains."""

import json
import subprocess
import sys

import pytest
import torch

from dlrm_study import config
from dlrm_study.analysis.baseline import baseline_records
from dlrm_study.cli import main as cli
from dlrm_study.data import make_data
from dlrm_study.errors import UsageError
from dlrm_study.measure import baseline_2020
from dlrm_study.plans.baseline import OLD
from dlrm_study.studies import baseline
from dlrm_study.train import run as loop

OVERRIDES = ["data.pooling=fixed", "data.lookups_per_table=3", "train.batch_size=16", "data.id_distribution=uniform"]


def copy_weights(run: loop.Run, old: baseline_2020.DLRM2020) -> None:
    """The reference run's initial parameters into the 2020 model (their initialisers differ)."""
    new = [m for m in [*run.model.bottom_mlp, *run.model.top_mlp] if isinstance(m, torch.nn.Linear)]
    mine = [m for m in [*old.bottom, *old.top] if isinstance(m, torch.nn.Linear)]
    assert len(new) == len(mine)
    with torch.no_grad():
        for a, b in zip(new, mine, strict=True):
            b.weight.copy_(a.weight)
            b.bias.copy_(a.bias)
        for table, bag in zip(run.model.sparse_arch.tables(), old.embeddings, strict=True):
            bag.weight.copy_(table)


def test_the_2020_step_trains_what_the_reference_loop_trains() -> None:
    cfg = config.load("tiny", OVERRIDES)
    run = loop.build(cfg)
    old = baseline_2020.make_model(baseline.step_config(cfg))
    copy_weights(run, old)
    trainer = baseline_2020.Trainer(old, cfg.train.learning_rate)
    batches = make_data(cfg).batches()
    for _ in range(5):
        batch = next(batches)
        expected = loop.train_step(run, batch).item()  # the batch as the reference loop sees it
        got = trainer.step((batch.dense, batch.offsets, batch.indices, batch.labels.unsqueeze(1)))
        assert got == pytest.approx(expected, abs=1e-5)
    for table, bag in zip(run.model.sparse_arch.tables(), old.embeddings, strict=True):
        torch.testing.assert_close(bag.weight.detach(), table, atol=1e-5, rtol=0)
    new = [m.weight for m in [*run.model.bottom_mlp, *run.model.top_mlp] if isinstance(m, torch.nn.Linear)]
    mine = [m.weight for m in [*old.bottom, *old.top] if isinstance(m, torch.nn.Linear)]
    for a, b in zip(new, mine, strict=True):
        torch.testing.assert_close(b.detach(), a.detach(), atol=1e-5, rtol=0)


def test_the_2020_initialisation_follows_dlrm() -> None:
    cfg = baseline.step_config(config.load("tiny", OVERRIDES))
    model = baseline_2020.make_model(cfg)
    rows = cfg["table_rows"][0]
    assert model.embeddings[0].weight.abs().max() <= (1 / rows) ** 0.5
    assert model.embeddings[0].sparse and model.embeddings[0].mode == "sum"
    assert isinstance(model.top[-1], torch.nn.Sigmoid)  # the top MLP ends in a sigmoid, the loss is BCE
    assert list(model.li[:3]) == [1, 2, 2] and list(model.lj[:3]) == [0, 0, 1]  # strict lower triangle


def test_the_script_prints_its_timings() -> None:
    cfg = baseline.step_config(config.load("tiny", OVERRIDES))
    command = [sys.executable, baseline_2020.__file__, "--config", json.dumps(cfg), "--steps", "3", "--warmup", "1"]
    out = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
    assert len(out["ms"]) == 3 and all(ms > 0 for ms in out["ms"])
    assert out["torch_version"] == torch.__version__


def test_the_2020_step_needs_fixed_pooling_and_a_2020_python(tmp_path, capsys) -> None:
    with pytest.raises(UsageError, match="pooling=fixed"):
        baseline.step_config(config.load("tiny", ["data.pooling=uniform"]))
    assert cli.main(["baseline-2020", "--python", str(tmp_path / "none"), "--results", str(tmp_path)]) == 2
    assert "make baseline-2020" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # no record, nothing half-written


def test_a_second_run_resumes_the_2020_records(tmp_path, monkeypatch) -> None:
    # The 2020 records name torch 1.5.1: they must count as measured when the study runs again.
    def fake_fields(python, cfg, steps, warmup):
        ms = 5.0
        stack = "1.5.1" if str(python) != sys.executable else torch.__version__
        return {"loop": "reference-2020", "ms_median": ms, "ms_p10": ms, "ms_p90": ms, "samples_per_s": 1e3,
                "threads": 1, "torch_version": stack}  # fmt: skip

    monkeypatch.setattr(baseline, "check_python", lambda python: "1.5.1")
    monkeypatch.setattr(baseline, "subprocess_fields", fake_fields)
    first = baseline.run("smoke", tmp_path, tmp_path / "python", progress=False)
    assert first.ran > 0 and first.failed == 0
    again = baseline.run("smoke", tmp_path, tmp_path / "python", progress=False)
    assert again.ran == 0 and again.skipped == first.ran
    frame = baseline_records("smoke", tmp_path)
    assert set(frame[frame["variant"] == OLD]["torch_version"]) == {"1.5.1"}
