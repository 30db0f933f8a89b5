"""The findings under each figure, computed from its records: one sentence each, with its interval.

The notebooks print them and the README's gallery repeats them (`report.ledger`), so a
number appears in the study only as these functions compute it. Every repeat counts; a
direction ("faster", "lower") is stated only where the interval excludes no effect, on at
least `stats.MIN_PAIRS` pairs, and the same with flagged repeats removed (else "fragile").
"""

import pandas as pd

from dlrm_study.analysis import baseline as old_stack
from dlrm_study.analysis import clusters, wording
from dlrm_study.analysis.convergence import SEED, accuracy_gaps, auc_gaps, preset_of
from dlrm_study.analysis.cpu import ablation_findings, embedding_share
from dlrm_study.analysis.current import newest_code_only
from dlrm_study.analysis.predictions import MEASURED_VERDICTS, against_naive
from dlrm_study.analysis.scaling import measured_efficiency
from dlrm_study.analysis.sensitivity import knob_findings
from dlrm_study.analysis.wording import variant_words
from dlrm_study.config.variants import ORDER, REFERENCE
from dlrm_study.records import columns as col


def reference_breakdown(records: pd.DataFrame) -> list[str]:
    """Notebook 01: the share of the reference's profiled iteration in embedding backward + update
    (S2), and in embedding forward beside it, per preset, over all repeats."""
    reference = records[records[col.VARIANT] == REFERENCE].dropna(subset=[col.op_column("embedding_forward")])
    update = embedding_share(reference).set_index(col.CONFIG_NAME)
    forward = embedding_share(reference, ("embedding_forward",)).set_index(col.CONFIG_NAME)
    lines = []
    for name in dict.fromkeys(reference[col.CONFIG_NAME]):
        u, f = update.loc[name], forward.loc[name]
        lines.append(
            f"{name}: embedding backward + update take {wording.describe(u.center, u.low, u.high, percent=True)} "
            f"of the reference's profiled iteration, forward {wording.describe(f.center, f.low, f.high, percent=True)}"
            f" ({u.n:.0f} repeats)"
        )
    return (lines or ["breakdown: no finding: no profiled reference repeat"]) + wording.flag_note(
        reference, "breakdown"
    )


def speedups(records: pd.DataFrame) -> list[str]:
    """Notebook 02: each loop's samples/s over the reference's, paired within repeats, per preset."""
    lines = []
    for name in sorted(set(records[col.CONFIG_NAME])):
        preset = records[records[col.CONFIG_NAME] == name]
        for variant in sorted(set(preset[col.VARIANT]) - {REFERENCE}):
            f = wording.paired_finding(preset, variant, REFERENCE, "faster", "slower")
            if f.all.n:
                lines.append(f"{name}: {variant_words(variant)} over the reference {f.text()}")
    return (lines or ["speedups: no finding: no loop pairs up with the reference"]) + wording.flag_note(records)


def largest_operator(records: pd.DataFrame) -> list[str]:
    """Notebook 02's breakdown: per preset and loop, the operator with the largest share of the iteration."""
    ops = list(col.OP_COLUMNS)
    clean = records.dropna(subset=ops)
    lines = []
    for (name, variant), group in clean.groupby([col.CONFIG_NAME, col.VARIANT], sort=True):
        shares = group[ops].div(group[ops].sum(axis=1), axis=0)  # per repeat
        top = shares.median().idxmax()
        share = wording.describe(*clusters.interval_of(group, shares[top]), percent=True)
        label = col.op_label(top)
        lines.append(
            f"{name} / {variant_words(variant)}: {label} takes the largest share, {share} ({len(group)} repeats)"
        )
    return (lines or ["breakdown: no finding: no profiled repeat"]) + wording.flag_note(clean, "breakdown")


def ablation(records: pd.DataFrame) -> list[str]:
    """Notebook 02's ablation: each technique's gain over the step before it."""
    return ablation_findings(records)


def knob(records: pd.DataFrame, name: str) -> list[str]:
    """Notebooks 03 and 04: samples/s at the knob's largest value over its smallest, per loop."""
    return knob_findings(records, name)


def cache(rates: pd.DataFrame, profile: str) -> list[str]:
    """Notebook 05: at steady state, the hit rate of a cache of 10% of the rows under Zipf(1.05) ids,
    LRU against LFU, and the largest gap between the policies over every size and skew."""
    alpha, fraction = (1.2, 0.3) if profile == "smoke" else (1.05, 0.1)
    if "evictions_per_batch" not in rates:
        return ["no records of the steady-state cache study"]
    rates = newest_code_only(rates)  # one code's records: an older code's are the same points again
    pick = rates[(rates["zipf_alpha"] == alpha) & (rates["cache_fraction"] == fraction)].set_index("cache_policy")
    if not {"lru", "lfu"} <= set(pick.index):
        return ["no records of that cache"]
    lru, lfu = pick.loc["lru"], pick.loc["lfu"]
    evicting = min(lru["evictions_per_batch"], lfu["evictions_per_batch"]) > 0
    state = (
        f"at steady state ({lru['evictions_per_batch']:,.0f} and {lfu['evictions_per_batch']:,.0f} rows evicted "
        f"per batch over {int(lru['batches'])} batches)"
        if evicting
        else "with no row evicted (the cache holds every row the ids use: the policies cannot differ)"
    )
    lines = [
        f"With ids Zipf({alpha}) a cache of {fraction:.0%} of the rows serves {lru['cache_hit_rate']:.1%} of lookups "
        f"under LRU and {lfu['cache_hit_rate']:.1%} under LFU {state}: {policy_gap(lfu, lru)} (counted, not timed)"
    ]
    wide = rates.pivot_table(index=["zipf_alpha", "cache_fraction"], columns="cache_policy", values="cache_hit_rate")
    if {"lru", "lfu"} <= set(wide.columns) and len(wide) > 1:
        gap = (wide["lfu"] - wide["lru"]).dropna()
        at = gap.abs().idxmax()
        lines.append(
            f"Over {len(gap)} sizes and skews the policies differ by at most {abs(gap[at]) * 100:.1f} points "
            f"(Zipf({at[0]}), {at[1]:.0%} of the rows: {policy_gap(wide.loc[at, 'lfu'], wide.loc[at, 'lru'])}) "
            "(counted, not timed)"
        )
    return lines


def policy_gap(lfu, lru) -> str:
    """LFU against LRU in words: the same to within 0.1 points, or which is higher and by how much."""
    lfu_rate = lfu["cache_hit_rate"] if isinstance(lfu, pd.Series) else lfu
    lru_rate = lru["cache_hit_rate"] if isinstance(lru, pd.Series) else lru
    gap = (lfu_rate - lru_rate) * 100
    if abs(gap) < 0.1:
        return "LRU and LFU the same to within 0.1 points"
    return f"{'LFU' if gap > 0 else 'LRU'} higher by {abs(gap):.1f} points"


def remote(records: pd.DataFrame) -> list[str]:
    """Notebook 05: tables on a parameter server against local tables, paired within repeats."""
    f = wording.paired_finding(records, "remote", "local", "faster", "slower")
    waits = records[records[col.VARIANT] == "remote"]["remote_ms_per_step"].median()
    return [
        f"Remote tables over local tables, samples/s: {f.text()}; the trainer waits {waits:.1f} ms per step on "
        "RPC (median)",
        *wording.flag_note(records),
    ]


def scaling(records: pd.DataFrame) -> list[str]:
    """Notebook 06: strong and weak scaling from 1 to 2 ranks, measured."""
    eff = measured_efficiency(records)
    strong = wording.describe(*eff["strong_speedup"], "x")
    efficiency = wording.describe(*eff["strong_efficiency"], percent=True)
    weak = wording.describe(*eff["weak_efficiency"], percent=True)
    return [
        f"Measured, 1 -> 2 ranks (paired within repeats): strong scaling {strong}, efficiency {efficiency}; "
        f"weak scaling efficiency {weak}",
        *wording.flag_note(records),
    ]


def projection(fitted: dict) -> list[str]:
    """Notebook 06: the model checked on the 2-rank point with this machine's link, then projected (not measured)."""
    table, tables, check, link = fitted["projection"], fitted["shape"].tables, fitted["check"], fitted["link"]
    at64 = table[table["ranks"] == table["ranks"].max()].set_index("mode")["efficiency"]
    ranks = int(table["ranks"].max())
    lines = []
    for _, two in check[check[col.WORLD_SIZE] == 2].iterrows():
        lines.append(
            f"Modelled (not measured) with this machine's link ({link.bandwidth_gbps:.2f} GB/s, "
            f"{link.latency_us:.0f} us, from the collectives timed alone): the 2-rank step {two['model_step_ms']:.0f} "
            f"ms against {two[col.MS_MEDIAN]:.0f} ms measured ({two['step_error']:+.0%}; compute alone "
            f"{two['compute_error']:+.0%})"
        )
    lines.append(
        f"Modelled (not measured) at {ranks} ranks: strong scaling efficiency {at64['strong']:.0%}, weak "
        f"{at64['weak']:.0%}; with {tables} tables placed whole, past {tables} ranks the busiest rank still looks "
        "up a whole table"
    )
    return lines


def convergence(records: pd.DataFrame) -> list[str]:
    """Notebook 07: the preset trained, then each loop's held-out AUC over its seeds and its difference
    from the reference's, paired by seed (mean over seeds with a t interval)."""
    evals = records[records[col.KIND] == "eval"]
    if REFERENCE not in set(evals[col.VARIANT]):
        return ["no reference run recorded"]
    if evals.duplicated([*[k for k in SEED if k in evals], col.VARIANT]).any():
        raise ValueError("two evaluations of one loop and seed in one run")
    steps = ", ".join(f"{int(s):,}" for s in sorted(evals[col.STEP].unique()))
    lines = [f"preset {preset_of(records)}, {steps} steps, each loop trained from the same seeds and data"]
    gaps = auc_gaps(records).set_index(col.VARIANT)
    for variant in [v for v in ORDER if v in set(evals[col.VARIANT])]:
        auc = evals.loc[evals[col.VARIANT] == variant, col.EVAL_AUC].dropna()
        said = (
            f"{variant_words(variant)}: held-out AUC {auc.median():.4f} (median of {wording.count(len(auc), 'seed')})"
        )
        if variant in gaps.index:
            gap = gaps.loc[variant]
            said += f", {wording.describe_gap(gap['mean'], gap['low'], gap['high'], int(gap['n']))} vs the reference"
        lines.append(said)
    return lines


NEAR_CHANCE_AUC = 0.6  # 0.5 is a coin: below this a model has barely learned, and equal AUCs say little


def timed_accuracy(records: pd.DataFrame) -> list[str]:
    """Notebook 07, S3's accuracy half: optimized bf16's held-out AUC less fp32's on each timed preset,
    paired by seed, and the machines that trained them."""
    if records.empty:
        return []
    lines = []
    evals = records[records[col.KIND] == "eval"]
    for row in accuracy_gaps(records).itertuples():
        mine = evals[evals[col.CONFIG_NAME] == row.config_name]
        steps, level = int(mine[col.STEP].max()), float(mine[col.EVAL_AUC].median())
        gap = wording.describe_gap(row.mean, row.low, row.high, int(row.n))
        lines.append(f"S3 accuracy, {row.config_name} ({steps} steps, held-out AUC {level:.3f} at the median): "
                     f"optimized bf16's AUC less optimized fp32's {gap}")  # fmt: skip
    if not lines:
        return []
    if float(evals[col.EVAL_AUC].median()) < NEAR_CHANCE_AUC:
        lines.append(
            f"(a held-out AUC below {NEAR_CHANCE_AUC} is near chance: in so few steps neither precision has learned "
            "much, so an equal AUC here is weak evidence that bf16 ends as accurate as fp32)"
        )
    machines = ", ".join(sorted(set(records[col.MACHINE])))
    return [*lines, f"(trained on {machines}, of the published machine's bf16 class)"]


# A finding states a number with its 95% interval (or says it has none), or says why there is none.
def baseline_2020(records: pd.DataFrame) -> list[str]:
    """Notebook 02: each step over the 2020 step on torch 1.5.1, per config and threads (measured, not projected)."""
    if records.empty:
        return ["2020 baseline: no records: not measured here (`make baseline-2020` measures it)"]
    table = old_stack.factors(records)
    lines = []
    for (config, threads), group in table.groupby([col.CONFIG_NAME, col.THREADS], sort=True):
        parts = [f"{row.step} x{wording.describe(row.center, row.low, row.high)}" for row in group.itertuples()]
        lines.append(
            f"{config}, {wording.count(int(threads), 'thread')}, over the 2020 step on torch 1.5.1: " + "; ".join(parts)
        )
    # No projection to a 28-core socket: a power law from 1 and 2 threads has no interval and no held-out check
    # (docs/claims.md, S1), so the factors stand as measured.
    return lines + wording.flag_note(records)


QUANTITIES = {col.SAMPLES_PER_S: "samples/s", "over_hbm": "over hbm", "gpu_over_cpu": "GPU over CPU"}


def predictions(scored: pd.DataFrame, claims: tuple[str, ...], headline: tuple[str, ...] = ()) -> list[str]:
    """The pre-registered GPU predictions of some claims against the GPU records: how many fell
    inside their range, and the `headline` sweeps' points one by one."""
    pick = scored[scored["claim"].isin(claims)] if not scored.empty else scored
    if pick.empty:
        return [f"{'/'.join(claims)}: no predictions in this results folder (dlrm-study predict): no finding"]
    done = pick[pick["verdict"].isin(MEASURED_VERDICTS)]
    commit = ", ".join(sorted({str(c)[:7] for c in pick[col.GIT_COMMIT]}))
    tally = ", ".join(f"{n} {v}" for v, n in done["verdict"].value_counts().sort_index().items()) or "none measured"
    shaky = int(done["flagged_only"].sum())
    lines = [
        f"{'/'.join(claims)}: Modelled (not measured) ranges pre-registered at {commit}; of {len(pick)} "
        f"predictions {len(done)} have GPU records: {tally}"
        + (f" ({shaky} measured on flagged repeats only)" if shaky else "")
    ]
    for row in done[done["sweep"].isin(headline)].itertuples():
        lines.append(
            f"{row.sweep.replace('-', ' ')} study, {row.grid} {variant_words(row.variant)} "
            f"{QUANTITIES.get(row.quantity, row.quantity)}: measured "
            f"{wording.number(row.measured)}, predicted {wording.number(row.mid)} "
            f"[{wording.number(row.low)}, {wording.number(row.high)}]: {row.verdict}"
            + (" (flagged repeats)" if row.flagged_only else "")
        )
    return lines


def prediction_summary(scored: pd.DataFrame) -> list[str]:
    """The scored predictions in lines, as the README, notebook 00 and the GPU session's summary print them:
    how the model's ranges fare against a naive range, then the presets' targets one by one."""
    return [*predictions_against_naive(scored), *predictions(scored, ("target",), ("gpu-presets",))]


def predictions_against_naive(scored: pd.DataFrame) -> list[str]:
    """How the model's ranges score against a constant range of the same width, per quantity (each point once)."""
    table = against_naive(scored)
    return [
        f"{QUANTITIES.get(r.quantity, r.quantity)}: each measured point scored once, {r.model_inside} of {r.points} "
        f"inside the model's ranges; {r.naive_inside} of {r.points} inside one constant range as wide, centred on "
        "the measurements' median (a naive baseline)"
        for r in table.itertuples()
    ] or ["predictions: no measured point to score"]
