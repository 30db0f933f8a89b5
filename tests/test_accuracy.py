"""S3's accuracy half: fp32, bf16 Split-SGD and plain bf16 SGD trained on a teacher-labelled benchmark from the same
seeds, judged by `s3_accuracy` (bf16's learned gain relative to fp32's, over seeds, on one machine and code)."""

import pandas as pd
import pytest

from dlrm_study import config
from dlrm_study.analysis import convergence as acc
from dlrm_study.analysis.readers import LEFT_OUT
from dlrm_study.config.variants import ACCURACY_PRECISIONS, OPTIMIZED_BF16, OPTIMIZED_FP32, PLAIN_BF16, REGISTRY
from dlrm_study.data import SyntheticData
from dlrm_study.errors import UsageError
from dlrm_study.measure import context
from dlrm_study.plans.convergence import ACCURACY_IDS, RECORDS, SMALL_LENGTH, SMALL_STEPS, accuracy_configs
from dlrm_study.plans.profiles import ACCURACY_SEEDS
from dlrm_study.records import store
from dlrm_study.records.machine import machine_key
from dlrm_study.studies.convergence import run_accuracy, train_and_record
from dlrm_study.train import build
from dlrm_study.train.run import precision_label


def test_the_timed_presets_train_from_the_same_seeds_in_three_precisions():
    configs = accuracy_configs("quick")
    small = {"dlrm-benchmark-small-steps", "mlperf-scaled-small-steps"}
    assert {cfg.name for _, _, cfg in configs} == {"dlrm-benchmark", "mlperf-scaled", *small}  # S3's timed presets
    assert {v for v, _, _ in configs} == set(ACCURACY_PRECISIONS)
    assert len(configs) == 2 * 2 * 3 * 6  # regimes x presets x precisions x ACCURACY_SEEDS["quick"]
    for preset in ("dlrm-benchmark", "mlperf-scaled"):
        rates = {cfg.name: cfg.train.learning_rate for _, _, cfg in configs if cfg.name.startswith(preset)}
        assert rates[preset] == pytest.approx(SMALL_STEPS * rates[f"{preset}-small-steps"])  # smaller steps ...
        lengths = {cfg.name: cfg.train.steps for _, _, cfg in configs if cfg.name.startswith(preset)}
        assert lengths[f"{preset}-small-steps"] == SMALL_LENGTH * lengths[preset]  # ... for longer
        timed = config.load(preset)
        shapes = [cfg for _, _, cfg in configs if cfg.name.startswith(preset)]
        for cfg in shapes:  # the reduction keeps each table's dim and pooling, and labels come from the teacher
            assert cfg.model.embedding_dim == timed.model.embedding_dim
            assert cfg.data.lookups_per_table == timed.data.lookups_per_table
            assert cfg.data.teacher == "dlrm" and cfg.data.id_distribution == ACCURACY_IDS[preset][0]
        assert len({c.hash() for c in shapes}) == len(shapes)  # every precision and seed its own point


def test_plain_bf16_sgd_is_its_own_variant_and_says_so():
    cfg = config.load("tiny", REGISTRY[PLAIN_BF16])
    assert not cfg.train.split_sgd and cfg.hash() != config.load("tiny", REGISTRY[OPTIMIZED_BF16]).hash()
    assert "plain SGD" in precision_label(cfg.train.precision, build(cfg).device, cfg.train.split_sgd)
    run = build(cfg)  # no lower halves: every table weight is a bf16 value, so its low 16 bits are zero
    assert not run.model.sparse_arch.weight_split[:, cfg.model.embedding_dim :].any()


def test_the_teacher_draws_labels_from_probabilities_it_can_report():
    cfg = config.load("tiny", ["data.teacher=dlrm"])
    data = SyntheticData(cfg, "eval")
    batch, prob = data.sample(3)
    assert prob.shape == batch.labels.shape and bool(((prob > 0) & (prob < 1)).all())
    assert (batch.labels == data.batch(3).labels).all() and (prob == data.probabilities(3)).all()
    additive = SyntheticData(config.load("tiny"), "eval").probabilities(3)
    assert not (additive == prob).all()  # the teacher DLRM's pairwise dots change the probabilities


def records(machine: str, bf16_auc: float, fingerprint: str | None = None) -> pd.DataFrame:
    """Final evaluations of three seeds on one preset: fp32 0.80 of an attainable 0.82, plain bf16 0.75."""
    auc = {OPTIMIZED_FP32: 0.80, OPTIMIZED_BF16: bf16_auc, PLAIN_BF16: 0.75}
    rows = [
        {"machine": machine, "run_id": "r", "train.seed": s, "variant": v, "kind": "eval", "step": 100,
         "config_name": "p", "eval_auc": auc[v] + 0.001 * s, "eval_attainable_auc": 0.82}
        for s in range(3) for v in ACCURACY_PRECISIONS
    ]  # fmt: skip
    frame = pd.DataFrame(rows)
    return frame.assign(code_fingerprint=fingerprint) if fingerprint else frame


def test_the_accuracy_rule_reads_only_the_given_machine_and_code():
    both = pd.concat([records("a", 0.80), records("b", 0.70)])
    assert acc.s3_accuracy(both, "a").status == acc.HOLDS
    assert acc.s3_accuracy(both, "b").status == acc.FAILS
    assert acc.s3_accuracy(both, "a").plain_status == acc.FAILS
    assert acc.s3_accuracy(both, "c").status == acc.NO_RECORDS


def test_fp32_alone_is_said_over_its_own_seeds_with_no_bf16_verdict():
    """A CPU without native bf16 trains fp32 alone: its share is over fp32's seeds (not the 0 seeds that recorded
    every precision), and the words say bf16 was not trained rather than that it had too few seeds."""
    fp32 = records("a", 0.80)
    fp32 = fp32[fp32["variant"] == OPTIMIZED_FP32]
    judged = acc.s3_accuracy(fp32, "a")
    assert judged.seeds == {"p": 0} and judged.fp32_seeds == {"p": 3}
    again = pd.concat([fp32, fp32.assign(run_id="r2")])  # the same seeds trained again in another run
    assert acc.s3_accuracy(again, "a").fp32_seeds == {"p": 3}
    said = acc.accuracy_words(judged)
    assert "over 3 seeds" in said[0] and said[-1].startswith("bf16 not trained on this machine")
    native = acc.accuracy_words(acc.s3_accuracy(records("a", 0.80), "a"))[-1]
    assert native.startswith("bf16 Split-SGD: holds") and "emulated" not in native
    labelled = records("a", 0.80).assign(
        precision_label=lambda f: f["variant"].map(
            {OPTIMIZED_FP32: "fp32", OPTIMIZED_BF16: "bf16 (emulated)", PLAIN_BF16: "bf16 plain SGD (emulated)"}
        )
    )
    judged = acc.s3_accuracy(labelled, "a")
    assert judged.emulated and "bf16 emulated on this CPU" in acc.accuracy_words(judged)[-1]
    coded = pd.concat([records("a", 0.80, "new"), records("a", 0.70, "old")])
    assert acc.s3_accuracy(coded, "a", "new").status == acc.HOLDS
    assert acc.s3_accuracy(coded, "a", "old").status == acc.FAILS
    judged = acc.s3_accuracy(coded, "a", "new")
    assert judged.seeds == {"p": 3} and judged.split[0].seeds == 3  # seeds counted as seeds, per preset


def test_the_accuracy_rule_needs_a_benchmark_that_learned():
    unlearned = records("a", 0.80).assign(eval_attainable_auc=0.95)  # fp32 reached 67% of the attainable gain
    assert acc.s3_accuracy(unlearned, "a").status == acc.NOT_LEARNED


def evaluated(preset: str, fp32: float, bf16: list[float], attainable: float) -> pd.DataFrame:
    """Final evaluations on one preset: fp32 at `fp32` every seed, bf16 Split-SGD per seed, plain bf16 below."""
    auc = [{OPTIMIZED_FP32: fp32, OPTIMIZED_BF16: b, PLAIN_BF16: 0.6} for b in bf16]
    return pd.DataFrame([
        {"machine": "a", "run_id": "r", "train.seed": s, "variant": v, "kind": "eval", "step": 100,
         "config_name": preset, "eval_auc": by[v], "eval_attainable_auc": attainable}
        for s, by in enumerate(auc) for v in ACCURACY_PRECISIONS
    ])  # fmt: skip


@pytest.mark.parametrize(
    ("fp32", "attainable", "status"),
    [
        (0.80, 0.826, acc.HOLDS),  # fp32 learned 92% of the attainable gain, AUC 0.80
        (0.80, 0.853, acc.NOT_LEARNED),  # 85%: below LEARNED_SHARE (90%), though above 80%
        (0.72, 0.74, acc.HOLDS),  # 92%, AUC 0.72
        (0.65, 0.66, acc.NOT_LEARNED),  # 94%, but AUC 0.65: below MIN_AUC (0.70), though above 0.60
    ],
)
def test_the_gate_on_what_the_benchmark_learned_decides_by_its_literals(fp32, attainable, status):
    """bf16 equal to fp32 holds only where fp32 learned enough: each literal of the gate read at both sides."""
    assert acc.s3_accuracy(evaluated("p", fp32, [fp32] * 3, attainable), "a").status == status


def test_one_preset_that_did_not_learn_stops_the_accuracy_half():
    learned, unlearned = evaluated("p", 0.80, [0.80] * 3, 0.826), evaluated("q", 0.80, [0.80] * 3, 0.95)
    assert acc.s3_accuracy(learned, "a").status == acc.HOLDS
    assert acc.s3_accuracy(pd.concat([learned, unlearned]), "a").status == acc.NOT_LEARNED  # any, not all


def test_accuracy_holds_only_where_it_holds_on_every_preset():
    """One preset holds, the other's interval spans GAIN_MARGIN: undecided, never holds."""
    holds = evaluated("p", 0.80, [0.80] * 3, 0.826)
    spans = evaluated("q", 0.80, [0.5 + 0.3 * r for r in (0.97, 0.99, 1.02)], 0.826)
    assert acc.s3_accuracy(spans, "a").status == acc.UNDECIDED
    assert acc.s3_accuracy(pd.concat([holds, spans]), "a").status == acc.UNDECIDED


def with_control(plain_small: float, fp32: float = 0.80, attainable: float = 0.826) -> pd.DataFrame:
    """A preset in both regimes, Split-SGD equal to fp32 in each; plain bf16 equal at the benchmark's rate and at
    `plain_small` of fp32's learned gain at small steps."""
    small = evaluated("p-small-steps", fp32, [fp32] * 3, attainable)
    plain = small["variant"] == PLAIN_BF16
    small.loc[plain, "eval_auc"] = 0.5 + plain_small * (fp32 - 0.5)
    benchmark = evaluated("p", fp32, [fp32] * 3, attainable)
    return pd.concat([benchmark.assign(eval_auc=benchmark["eval_auc"].where(benchmark["variant"] != PLAIN_BF16, fp32)),
                      small])  # fmt: skip


def test_the_control_is_judged_at_small_steps_and_must_fail_there():
    """The accuracy half is shown able to fail only where plain bf16 SGD fails the rule at small steps: a control
    that keeps fp32's gain there (or was not trained there) leaves it untested, whatever it did at the benchmark's
    own rate (where SGD's noise dithers the rounding away)."""
    from dlrm_study.analysis.judgement import Status
    from dlrm_study.claims.s3 import CONTROL_KEPT, CONTROL_UNMEASURED, accuracy_half, control_notes

    failing = acc.s3_accuracy(with_control(0.90), "a")
    assert (failing.status, failing.plain_status, failing.control_status) == (acc.HOLDS, acc.FAILS, acc.FAILS)
    assert accuracy_half(failing, fails=False) == Status.REPRODUCED and control_notes(failing) == ()
    kept = acc.s3_accuracy(with_control(1.0), "a")
    assert (kept.status, kept.control_status) == (acc.HOLDS, acc.HOLDS)
    assert accuracy_half(kept, fails=False) == Status.INCONCLUSIVE and control_notes(kept) == (CONTROL_KEPT,)
    benchmark_only = with_control(0.90)
    unmeasured = acc.s3_accuracy(benchmark_only[benchmark_only["config_name"] == "p"], "a")
    assert (unmeasured.status, unmeasured.control_status) == (acc.HOLDS, acc.NO_RECORDS)
    assert accuracy_half(unmeasured, fails=False) == Status.TOO_FEW
    assert control_notes(unmeasured) == (CONTROL_UNMEASURED,)


def test_the_small_step_regime_learns_by_its_own_share():
    """At small steps fp32 learns less in the same steps: the gate reads SMALL_LEARNED_SHARE there, LEARNED_SHARE at
    the benchmark's rate; 80% of the attainable gain passes the one and not the other."""
    assert acc.SMALL_LEARNED_SHARE < 0.8 < acc.LEARNED_SHARE
    small = evaluated("p-small-steps", 0.80, [0.80] * 3, 0.875)  # 80% of the attainable gain
    assert acc.s3_accuracy(small, "a").status == acc.HOLDS
    assert acc.s3_accuracy(small.assign(config_name="p"), "a").status == acc.NOT_LEARNED


# A small version of the benchmark: tiny's tables (Zipf ids, the teacher DLRM's hot ranks), batches of 64 and a
# learning rate small enough that many updates fall below half a bf16 weight's spacing (|w| * 2^-9).
SMALL = ["data.teacher=dlrm", "train.batch_size=64", "train.steps=200", "train.learning_rate=0.05"]


@pytest.mark.slow
def test_dropping_split_sgds_lower_halves_in_the_optimized_loop_fails_the_accuracy_rule(tmp_path, monkeypatch):
    """The mutation the rule exists for: the optimized loop's bf16 run with Split-SGD's lower halves dropped (its
    build made plain bf16) is judged less accurate than fp32, and the unmutated run keeps more of fp32's gain."""
    from dlrm_study.train import run as run_module

    pair = (OPTIMIZED_FP32, OPTIMIZED_BF16)
    configs = [(v, s, config.load("tiny", [*SMALL, *REGISTRY[v], f"train.seed={s}"])) for s in range(3) for v in pair]
    train_and_record(configs, tmp_path / "kept.csv", "accuracy-test", 50)
    kept = store.load(tmp_path / "kept.csv")
    monkeypatch.setattr(run_module, "plain_bf16", lambda cfg: cfg.train.precision == "bf16")  # drop the lower halves
    train_and_record([c for c in configs if c[0] == OPTIMIZED_BF16], tmp_path / "dropped.csv", "accuracy-test", 50)
    dropped = pd.concat([kept[kept["variant"] == OPTIMIZED_FP32], store.load(tmp_path / "dropped.csv")])
    (split,) = acc.s3_accuracy(kept, machine_key()).split
    (mutant,) = acc.s3_accuracy(dropped, machine_key()).split
    assert mutant.status == acc.FAILS, mutant  # the rule sees what dropping the lower halves loses
    assert split.low > mutant.high, (split, mutant)  # and Split-SGD keeps it


def test_the_accuracy_study_records_three_precisions_and_resumes(tmp_path):
    run_accuracy("smoke", tmp_path)
    frame = acc.accuracy_records("smoke", tmp_path)
    evals = frame[frame["kind"] == "eval"]
    assert len(evals) == 2 * 3 * ACCURACY_SEEDS["smoke"] and evals["eval_auc"].between(0, 1).all()  # two regimes
    assert evals["eval_attainable_auc"].between(0.5, 1).all()  # the teacher's own AUC, recorded
    assert set(frame[frame["variant"] == PLAIN_BF16]["precision_label"].str.contains("plain SGD")) == {True}
    assert not frame[frame["kind"] == "auc"].empty  # held-out AUC curves, every window
    before = context.current().measured
    run_accuracy("smoke", tmp_path)  # resumed: every config already recorded
    assert context.current().measured == before
    # a run of an earlier design (the same points, trained to other steps) is left out and counted, not pooled
    stored = store.load(tmp_path / RECORDS)
    earlier = stored.assign(run_id="earlier", **{"train.steps": stored["train.steps"] // 2})
    store.append_many(tmp_path / RECORDS, earlier.to_dict("records"))
    again = acc.accuracy_records("smoke", tmp_path)
    assert len(again) == len(frame) and not (again["run_id"] == "earlier").any()
    assert sum(n for (_, why), n in again.attrs[LEFT_OUT].items() if why == acc.EARLIER_DESIGN) == len(earlier)


def test_a_timed_accuracy_near_chance_is_called_weak_evidence():
    """At a held-out AUC near 0.5 the models have barely learned: the finding must say an equal AUC is weak."""
    from dlrm_study.analysis.findings import NEAR_CHANCE_AUC, timed_accuracy
    from dlrm_study.records.record import make_record

    def frame(auc: float) -> pd.DataFrame:
        pair = (OPTIMIZED_FP32, OPTIMIZED_BF16)
        fields = {v: {"kind": "eval", "step": 300, "eval_auc": auc + 0.001 * (v == pair[0])} for v in pair}
        rows = [make_record("accuracy", fields[v], config.preset("dlrm-benchmark"), variant=v, repeat=s)
                | {"train.seed": s} for s in (0, 1, 2) for v in pair]  # fmt: skip
        return pd.DataFrame(rows).assign(machine="m", run_id="r")

    assert any("near chance" in line for line in timed_accuracy(frame(NEAR_CHANCE_AUC - 0.05)))
    assert not any("near chance" in line for line in timed_accuracy(frame(0.8)))


def test_plain_bf16_sgd_loses_updates_below_half_a_bf16_spacing_that_split_sgd_keeps():
    """Why the control can fail: at |w| = 1 bf16's spacing is 2^-7, so an update of 2^-10 rounds away in plain
    bf16, step after step, while Split-SGD's lower halves add them up."""
    import torch
    from torch import nn

    from dlrm_study.model.kernels.torch_ops import join
    from dlrm_study.train.split_sgd import PlainBF16SGD, SplitSGD

    def trained(make) -> tuple[nn.Linear, torch.optim.Optimizer]:
        layer = nn.Linear(4, 1, bias=False)
        nn.init.ones_(layer.weight)
        optimizer = make([layer], 2.0**-10)
        for _ in range(8):
            layer.weight.grad = torch.ones_like(layer.weight)
            optimizer.step()
        return layer, optimizer

    plain, _ = trained(PlainBF16SGD.from_fp32)
    assert (plain.weight.float() == 1.0).all()  # eight updates of 2^-10: every one lost
    split, optimizer = trained(SplitSGD.from_fp32)
    master = join(split.weight.data.view(torch.int16), optimizer.state[split.weight]["lo"])
    assert torch.allclose(master, torch.full_like(master, 1 - 8 * 2.0**-10))  # every one kept


def test_the_quick_accuracy_study_trains_bf16_only_where_it_is_native(tmp_path, monkeypatch) -> None:
    """Without native bf16 (S3 not measurable there) the quick study trains fp32 alone (is the benchmark
    learnable here) unless emulated bf16 is asked for; with native bf16, or in smoke, every precision."""
    from dlrm_study.studies import convergence as study

    monkeypatch.setattr(study, "native_bf16", lambda: False)
    trained = []
    monkeypatch.setattr(study, "train_and_record", lambda *args, **kwargs: trained.append(args))

    def variants() -> set[str]:
        return {variant for variant, _, _ in trained.pop()[0]}

    assert study.run_accuracy("quick", tmp_path) is True and variants() == {"optimized-fp32"}
    assert study.run_accuracy("quick", tmp_path, variants=("optimized-fp32", "optimized-bf16")) is False
    assert trained == []
    assert study.run_accuracy("quick", tmp_path, emulated=True) is True and variants() == set(ACCURACY_PRECISIONS)
    assert study.run_accuracy("smoke", tmp_path) is True and variants() == set(ACCURACY_PRECISIONS)
    monkeypatch.setattr(study, "native_bf16", lambda: True)
    assert study.run_accuracy("quick", tmp_path) is True and variants() == set(ACCURACY_PRECISIONS)
    assert len(accuracy_configs("quick", (OPTIMIZED_FP32,))) == 24  # 2 regimes x 2 presets x 6 seeds
    with pytest.raises(UsageError, match="accuracy variants"):
        study.run_accuracy("quick", tmp_path, variants=("fp64",))


def test_only_the_hottest_zipf_ids_carry_the_dlrm_teachers_signal():
    """A short run cannot learn an id it sees a few times, so with Zipf ids the teacher scores only the hottest
    TEACHER_HOT_RANKS of each table: the ids `_ids` draws for those ranks, and no other."""
    import torch

    from dlrm_study.data import synthetic

    cfg = config.load("tiny", ["data.teacher=dlrm", "data.id_distribution=zipf", "model.table_rows=8x5000"])
    data = SyntheticData(cfg, "eval")
    hottest = (torch.arange(synthetic.TEACHER_HOT_RANKS) * synthetic.SCATTER) % 5000
    for scores, table in zip(data.id_scores, data.dlrm.tables, strict=True):
        scored = scores.nonzero().flatten()
        assert sorted(scored.tolist()) == sorted(hottest.tolist())
        assert (table.abs().sum(1).nonzero().flatten() == scored.sort().values).all()
    overrides = ["data.teacher=dlrm", "data.id_distribution=uniform", "model.table_rows=8x5000"]
    uniform = SyntheticData(config.load("tiny", overrides), "eval")
    assert all(bool((s != 0).all()) for s in uniform.id_scores)  # uniform ids: every id scores
