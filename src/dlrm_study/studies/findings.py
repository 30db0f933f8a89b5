"""The findings under each figure, computed from its records: one sentence each, with its interval.

The notebooks print them and the README's gallery repeats them (`studies.summary`), so a
number appears in the study only as these functions compute it. A direction ("faster",
"lower") is stated only where the interval excludes no effect.
"""

import re

import pandas as pd

from dlrm_study.measure import stats
from dlrm_study.studies import cpu
from dlrm_study.studies.sensitivity import knob_findings


def left_out(excluded: int) -> list[str]:
    return [f"({excluded} flagged repeat(s) left out)"] if excluded else []


def reference_breakdown(records: pd.DataFrame) -> list[str]:
    """Notebook 01: the embedding share of the reference's profiled iteration, per preset."""
    reference = records[records["variant"] == "reference"]
    clean, excluded = stats.usable(reference, "breakdown")
    shares = cpu.embedding_share(clean).set_index("config_name")
    lines = []
    for name in dict.fromkeys(reference["config_name"]):
        if name in shares.index:
            row = shares.loc[name]
            lines.append(
                f"{name}: embedding forward + backward/update take "
                f"{stats.describe(row.center, row.low, row.high, percent=True)} of the reference's profiled "
                f"iteration ({row.n:.0f} repeats)"
            )
        else:
            lines.append(f"{name}: no finding: every repeat's breakdown is flagged")
    return lines + left_out(excluded)


def speedups(records: pd.DataFrame) -> list[str]:
    """Notebook 02: each loop's samples/s over the reference's, paired within repeats, per preset."""
    clean, excluded = stats.usable(records)
    table = cpu.speedups(clean)
    lines = (
        [
            f"{r.config_name}: {r.variant} {stats.describe(r.center, r.low, r.high, 'x')} the reference "
            f"({r.n:.0f} paired repeats: {stats.direction(r.low, r.high, 'faster', 'slower')})"
            for r in table.sort_values(["config_name", "variant"]).itertuples()
        ]
        if not table.empty
        else ["speedups: no finding: no loop pairs up with the reference"]
    )
    return lines + left_out(excluded)


def largest_operator(records: pd.DataFrame) -> list[str]:
    """Notebook 02's breakdown: per preset and loop, the operator with the largest share of the iteration."""
    from dlrm_study.measure.bench import OPERATORS

    ops = [f"op_{name}_ms" for name in OPERATORS]
    clean, excluded = stats.usable(records.dropna(subset=ops), "breakdown")
    lines = []
    for (name, variant), group in clean.groupby(["config_name", "variant"], sort=True):
        shares = group[ops].div(group[ops].sum(axis=1), axis=0)  # per repeat
        top = shares.median().idxmax()
        share = stats.describe(*stats.interval(shares[top]), percent=True)
        label = top.removeprefix("op_").removesuffix("_ms").replace("_", " ")
        lines.append(f"{name} / {variant}: {label} takes the largest share, {share} ({len(group)} repeats)")
    return (lines or ["breakdown: no finding: every repeat's breakdown is flagged"]) + left_out(excluded)


def ablation(records: pd.DataFrame) -> list[str]:
    """Notebook 02's ablation: each technique's gain over the step before it."""
    return cpu.ablation_findings(records)


def knob(records: pd.DataFrame, name: str) -> list[str]:
    """Notebooks 03 and 04: samples/s at the knob's largest value over its smallest, per loop."""
    return knob_findings(records, name)


def cache(rates: pd.DataFrame, profile: str) -> list[str]:
    """Notebook 05: at steady state, the hit rate of a cache of 10% of the rows under Zipf(1.05) ids,
    LRU against LFU, and the largest gap between the policies over every size and skew."""
    alpha, fraction = (1.2, 0.3) if profile == "smoke" else (1.05, 0.1)
    if "evictions_per_batch" not in rates:
        return ["no records of the steady-state cache study"]
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
    clean, excluded = stats.usable(records)
    r = stats.paired_ratio(clean, "remote", "local")
    waits = clean[clean["variant"] == "remote"]["remote_ms_per_step"].median()
    return [
        f"Remote tables: {stats.describe(r.center, r.low, r.high, 'x')} the samples/s of local tables "
        f"({r.n} paired repeats: {stats.direction(r.low, r.high, 'faster', 'slower')}); the trainer waits "
        f"{waits:.1f} ms per step on RPC (median)",
        *left_out(excluded),
    ]


def scaling(records: pd.DataFrame) -> list[str]:
    """Notebook 06: strong and weak scaling from 1 to 2 ranks, measured."""
    from dlrm_study.distributed import scaling as study

    eff = study.measured_efficiency(records)
    return [
        f"Measured, 1 -> 2 ranks (paired within repeats): strong scaling {stats.describe(*eff['strong_speedup'], 'x')}"
        f", efficiency {stats.describe(*eff['strong_efficiency'], percent=True)}; weak scaling efficiency "
        f"{stats.describe(*eff['weak_efficiency'], percent=True)}",
        *left_out(stats.usable(records)[1]),
    ]


def projection(fitted: dict) -> list[str]:
    """Notebook 06: the model checked on the 2-rank point with this machine's link, then projected (not measured)."""
    table, tables, check, link = fitted["projection"], fitted["shape"].tables, fitted["check"], fitted["link"]
    at64 = table[table["ranks"] == table["ranks"].max()].set_index("mode")["efficiency"]
    ranks = int(table["ranks"].max())
    lines = []
    for _, two in check[check["world_size"] == 2].iterrows():
        lines.append(
            f"Modelled (not measured) with this machine's link ({link.bandwidth_gbps:.2f} GB/s, "
            f"{link.latency_us:.0f} us, from the collectives timed alone): the 2-rank step {two['model_step_ms']:.0f} "
            f"ms against {two['ms_median']:.0f} ms measured ({two['step_error']:+.0%}; compute alone "
            f"{two['compute_error']:+.0%})"
        )
    lines.append(
        f"Modelled (not measured) at {ranks} ranks: strong scaling efficiency {at64['strong']:.0%}, weak "
        f"{at64['weak']:.0%}; with {tables} tables placed whole, past {tables} ranks the busiest rank still looks "
        "up a whole table"
    )
    return lines


def convergence(records: pd.DataFrame) -> list[str]:
    """Notebook 07: held-out AUC and log loss of each loop, trained from one seed."""
    evals = records[records["kind"] == "eval"].set_index("variant")
    if "reference" not in evals.index:
        return ["no reference run recorded"]
    return [
        f"{variant}: held-out AUC {row['eval_auc']:.4f} ({row['eval_auc'] - evals.loc['reference', 'eval_auc']:+.4f} "
        f"vs the reference), log loss {row['eval_logloss']:.4f}"
        for variant, row in evals.iterrows()
    ]


# A finding states a number with its 95% interval (or says it has none), or says why there is none.
def number(value: float) -> str:
    """Samples/s as whole numbers, ratios with two decimals."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"


def baseline_2020(records: pd.DataFrame) -> list[str]:
    """Notebook 02: each step over the 2020 step on torch 1.5.1, per config and threads; S1 projected."""
    from dlrm_study.studies import baseline

    if records.empty:
        return ["2020 baseline: no records: not measured here (`make baseline-2020` measures it)"]
    table = baseline.factors(records)
    lines = []
    for (config, threads), group in table.groupby(["config_name", "threads"], sort=True):
        parts = [f"{row.step} x{stats.describe(row.center, row.low, row.high)}" for row in group.itertuples()]
        lines.append(f"{config}, {threads} thread(s), over the 2020 step on torch 1.5.1: " + "; ".join(parts))
    for config in dict.fromkeys(records["config_name"]):
        p = baseline.projection(records, config)
        if p:
            lines.append(
                f"{config}: Modelled (not measured) projection to {p['cores']} cores: {p['variant']} "
                f"{p['measured']:.1f}x the 2020 step at 2 threads would be {p['projected']:.0f}x if each side kept "
                f"its 1-to-2-thread scaling (exponents {p['exponent_best']:.2f} and {p['exponent_2020']:.2f})"
            )
    excluded = int(stats.usable(records)[1])
    return lines + left_out(excluded)


QUANTITIES = {"samples_per_s": "samples/s", "over_hbm": "over hbm", "gpu_over_cpu": "GPU over CPU"}


def predictions(scored: pd.DataFrame, claims: tuple[str, ...], headline: tuple[str, ...] = ()) -> list[str]:
    """The pre-registered GPU predictions of some claims against the GPU records: how many fell
    inside their range, and the `headline` sweeps' points one by one."""
    pick = scored[scored["claim"].isin(claims)] if not scored.empty else scored
    if pick.empty:
        return [f"{'/'.join(claims)}: no predictions in this results folder (dlrm-study predict): no finding"]
    done = pick[pick["verdict"] != "not yet measured"]
    commit = ", ".join(sorted({str(c)[:7] for c in pick["git_commit"]}))
    tally = ", ".join(f"{n} {v}" for v, n in done["verdict"].value_counts().sort_index().items()) or "none measured"
    shaky = int(done["flagged_only"].sum())
    lines = [
        f"{'/'.join(claims)}: Modelled (not measured) ranges pre-registered at {commit}; of {len(pick)} "
        f"predictions {len(done)} have GPU records: {tally}"
        + (f" ({shaky} measured on flagged repeats only)" if shaky else "")
    ]
    for row in done[done["sweep"].isin(headline)].itertuples():
        lines.append(
            f"{row.grid} {row.variant} {QUANTITIES.get(row.quantity, row.quantity)}: measured {number(row.measured)}, "
            f"predicted {number(row.mid)} [{number(row.low)}, {number(row.high)}]: {row.verdict}"
            + (" (flagged repeats)" if row.flagged_only else "")
        )
    return lines


WITH_INTERVAL = re.compile(r"\d[\d,.]*(%|x)? (\[[-\d,.]+%?, [-\d,.]+%?\]|\(one repeat: no interval\))")
WITHOUT = re.compile(r"(no finding|not measured|no records|no unflagged|\(\d+ flagged repeat\(s\) left out\)"
                     r"|counted, not timed|Modelled \(not measured\)|held-out AUC)")  # fmt: skip


def well_formed(lines: list[str]) -> bool:
    """Whether every finding line carries its interval, or says plainly why it has none (nbval checks this)."""
    return bool(lines) and all(WITH_INTERVAL.search(line) or WITHOUT.search(line) for line in lines)
