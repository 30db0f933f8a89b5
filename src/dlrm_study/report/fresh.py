"""Measure afresh and compare with what is published: `make reproduce FRESH=1`.

A reviewer on a class already measured gets nothing new from `make reproduce` (it measures only what this code has
no record of). This measures the points S2's and S3's rules read (`runs.CLAIM_STUDIES`) into a folder of its own,
whatever is committed, with the sequential design's looks; judges that folder alone (into its own verdicts.json); and
prints its words and numbers beside the committed ones of the same machine class.

Agreement is judged by a prediction interval for the fresh mean, not by the committed confidence interval (which
says where the committed mean lies, not where a new measurement of the same code will): per comparison, the committed
run means' spread within their invocations (s) and between invocations beyond it (s_inv, where two or more
invocations let it be estimated), so a fresh invocation of n runs varies by s_inv^2 + s^2 / n around the truth.

    python -m dlrm_study.cli.reproduce --fresh [--profile quick] [--out FOLDER] [--compare-only]
"""

import datetime
import math
import statistics
from pathlib import Path

import pandas as pd

from dlrm_study.analysis import clusters, stats
from dlrm_study.analysis.cpu import embedding_share_rows
from dlrm_study.analysis.evidence import Evidence
from dlrm_study.claims import s2, s3
from dlrm_study.records import columns as col
from dlrm_study.report import reading, verdicts

CLAIMS = (s2.ID, s3.ID)


def run_means(evidence: Evidence, machine: str) -> dict[str, dict[str, list[tuple[str, float]]]]:
    """Per claim and comparison (preset): (invocation, run mean) of each run, on the rule's scale (log ratio,
    logit share)."""
    part = evidence.of(machine)
    invoked = {run: name for name, members in clusters.invocations([part.cpu_loops, part.cpu_compare]).items()
               for run in members}  # fmt: skip
    found: dict[str, dict[str, list]] = {s2.ID: {}, s3.ID: {}}
    for preset, pairs in zip(s3.S3_PRESETS, s3.deciding(part) or [pd.DataFrame()] * 2, strict=True):
        found[s3.ID][preset] = per_run(pairs, "ratio", False, invoked)
    ref = s2.s2_records(part)
    for preset in s2.S2_PRESETS:
        rows = embedding_share_rows(ref[ref[col.CONFIG_NAME] == preset]) if len(ref) else ref
        found[s2.ID][preset] = per_run(rows, "share", True, invoked)
    return found


def per_run(frame: pd.DataFrame, value: str, share: bool, invoked: dict[str, str]) -> list[tuple[str, float]]:
    """(invocation, run mean on the rule's scale) per run of `frame`."""
    if frame.empty or value not in frame:
        return []
    out = []
    for group in clusters.run_groups(frame[frame[value].notna()]):
        run = str(group[col.RUN_ID].iloc[0])
        out.append((invoked.get(run, run), statistics.fmean(clusters.logs(group[value], share))))
    return out


def prediction(committed: list[tuple[str, float]], fresh_runs: int) -> tuple[float, float, float, str]:
    """(centre, low, high) on the rule's scale of where a fresh invocation's mean of `fresh_runs` runs should fall
    (95%), and how the interval was made."""
    means = [m for _, m in committed]
    if len(means) < 2 or fresh_runs < 1:
        return math.nan, math.nan, math.nan, "too few committed runs"
    groups: dict[str, list[float]] = {}
    for name, m in committed:
        groups.setdefault(name, []).append(m)
    within = [m - statistics.fmean(g) for g in groups.values() if len(g) > 1 for m in g]
    df = len(within) - sum(1 for g in groups.values() if len(g) > 1)
    s2_within = sum(x * x for x in within) / df if df > 0 else statistics.variance(means)
    k = len(groups)
    between = 0.0
    how = "one committed invocation: between-invocation spread not estimable, taken as 0"
    if k >= 2:
        invocation_means = [statistics.fmean(g) for g in groups.values()]
        per = len(means) / k
        between = max(0.0, statistics.variance(invocation_means) - s2_within / per)
        how = f"{k} committed invocations: between-invocation SD {math.sqrt(between):.3f}"
    centre = statistics.fmean(means)
    spread = math.sqrt(between * (1 + 1 / k) + s2_within * (1 / len(means) + 1 / fresh_runs))
    half = stats.t_quantile(0.975, max(1, len(means) - 1)) * spread
    return centre, centre - half, centre + half, how


def back(value: float, share: bool) -> float:
    return clusters.back(value, share)


def amount(value: float, share: bool) -> str:
    return "-" if value != value else (f"{value:.1%}" if share else f"{value:.2f}x")


def comparison_lines(claim: str, committed: dict, fresh: dict) -> list[str]:
    """One line per comparison: the fresh mean, the committed mean and the prediction interval, agreeing or not."""
    share = claim == s2.ID  # S2 reads shares (logit scale), S3 ratios (log)
    lines = []
    for preset, mine in fresh[claim].items():
        if not mine:
            continue
        ours = statistics.fmean(m for _, m in mine)
        centre, low, high, how = prediction(committed[claim].get(preset, []), len(mine))
        if centre != centre:
            lines.append(f"  {claim} {preset}: fresh {amount(back(ours, share), share)} ({len(mine)} runs); {how}")
            continue
        inside = low <= ours <= high
        lines.append(
            f"  {claim} {preset}: fresh {amount(back(ours, share), share)} ({len(mine)} runs); committed "
            f"{amount(back(centre, share), share)} ({len(committed[claim][preset])} runs), a fresh invocation of "
            f"{len(mine)} runs predicted in [{amount(back(low, share), share)}, {amount(back(high, share), share)}] "
            f"(95%; {how}): {'agrees' if inside else 'disagrees'}"
        )
    return lines


def same_class(evidence: Evidence, machine: str) -> str | None:
    """The committed machine to compare with: this machine's own key, else none (another CPU model is another
    truth; its words are printed by the ledger, not compared here)."""
    return machine if machine in evidence.machines() else None


def compare(fresh_out: Path, results: Path, profile: str, machine: str) -> list[str]:
    """The fresh folder's words and numbers beside the committed ones of this machine's class: the fresh folder
    judged into its own verdicts.json, the committed words read from results/verdicts.json (`report.reading`)."""
    fresh = Evidence.load(fresh_out, profile)
    mine_all, _ = verdicts.tables(verdicts.load(verdicts.write(fresh_out, profile, fresh).parent))
    published, theirs_all = reading.judged(results, profile)
    lines = [f"fresh measurement of {machine} ({fresh_out}) beside the committed records ({results}):"]
    theirs = same_class(published, machine)
    for claim_id in CLAIMS:
        mine = mine_all[claim_id][machine]
        lines.append(f"{claim_id} fresh: {mine.status}: {mine.detail}")
        if theirs:
            committed = theirs_all[claim_id][theirs]
            lines.append(f"{claim_id} committed: {committed.status}: {committed.detail}")
    if not theirs:
        lines.append(f"no committed records of {machine}: nothing to compare with (a new class)")
        return lines
    ours, committed_means = run_means(fresh, machine), run_means(published, theirs)
    lines.append("agreement, per comparison (on the rule's scale, run means):")
    for claim_id in CLAIMS:
        lines += comparison_lines(claim_id, committed_means, ours)
    return lines


def default_folder(results: Path, machine: str) -> Path:
    slug = machine.replace("/", "_")
    return results / "fresh" / f"{datetime.date.today()}-{slug}"
