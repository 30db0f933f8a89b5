"""S3's accuracy half: optimized fp32 and bf16 trained on the timed presets from the same seeds, read back paired."""

from dlrm_study.analysis.convergence import accuracy_records
from dlrm_study.analysis.verdicts import auc_gap
from dlrm_study.config.variants import BF16_PAIR
from dlrm_study.measure import runner
from dlrm_study.measure.sweep import runnable
from dlrm_study.studies.convergence import accuracy_configs, run_accuracy
from dlrm_study.studies.profiles import CONVERGENCE_SEEDS


def test_the_timed_presets_train_from_the_same_seeds_in_fp32_and_bf16():
    configs = accuracy_configs("quick")
    assert {cfg.name for _, _, cfg in configs} == {"dlrm-benchmark", "mlperf-scaled"}  # S3's timed presets
    assert {v for v, _, _ in configs} == set(BF16_PAIR)
    assert len(configs) == 2 * 2 * CONVERGENCE_SEEDS["quick"]
    for _, seed, cfg in configs:
        assert cfg.train.seed == seed and cfg.train.batch_size == 2048  # as S3 times them


def test_the_accuracy_study_records_paired_evaluations_and_resumes(tmp_path):
    if runnable(list(BF16_PAIR))[1]:  # no native bf16: nothing runs (emulated bf16 trains fp32's numbers)
        run_accuracy("smoke", tmp_path)
        assert not (tmp_path / "convergence.csv").exists()
        return
    run_accuracy("smoke", tmp_path)
    records = accuracy_records("smoke", tmp_path)
    evals = records[records["kind"] == "eval"]
    assert len(evals) == 2 * CONVERGENCE_SEEDS["smoke"] and evals["eval_auc"].between(0, 1).all()
    gap, seeds, presets = auc_gap(records)
    assert gap is not None and abs(gap.center) < 0.05  # fp32 and bf16 learn alike from the same seed
    assert seeds == CONVERGENCE_SEEDS["smoke"] and presets == ["tiny"]
    before = dict(runner.TALLY)
    run_accuracy("smoke", tmp_path)  # resumed: every config already recorded
    assert runner.TALLY["measured"] == before["measured"]


def test_a_timed_accuracy_near_chance_is_called_weak_evidence():
    """At a held-out AUC near 0.5 the models have barely learned: the finding must say an equal AUC is weak."""
    import pandas as pd

    from dlrm_study import config
    from dlrm_study.analysis.findings import NEAR_CHANCE_AUC, timed_accuracy
    from dlrm_study.records.record import make_record

    def records(auc: float) -> pd.DataFrame:
        fields = {v: {"kind": "eval", "step": 300, "eval_auc": auc + 0.001 * (v == BF16_PAIR[0])} for v in BF16_PAIR}
        rows = [make_record("accuracy", fields[v], config.preset("dlrm-benchmark"), variant=v, repeat=s)
                | {"train.seed": s} for s in (0, 1, 2) for v in BF16_PAIR]  # fmt: skip
        return pd.DataFrame(rows).assign(machine="m", run_id="r")

    assert any("near chance" in line for line in timed_accuracy(records(NEAR_CHANCE_AUC - 0.05)))
    assert not any("near chance" in line for line in timed_accuracy(records(0.8)))
