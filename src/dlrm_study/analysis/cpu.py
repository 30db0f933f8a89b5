"""Notebooks 01 and 02's quantities: the reference's embedding share (S2), speedups, the ablation's steps."""

import itertools

import pandas as pd

from dlrm_study.analysis import clusters, wording
from dlrm_study.config.variants import ABLATION, ABLATION_LABELS, REFERENCE
from dlrm_study.records import columns as col


def ablation_steps(records: pd.DataFrame) -> pd.DataFrame:
    """Each step's samples/s over the step before it and over the reference, paired within repeats
    (all repeats; `word` from both views, `wording.paired_finding`)."""
    steps = [v for v in ABLATION if v in set(records[col.VARIANT])]
    rows = []
    for before, step in itertools.pairwise(steps):
        gain = wording.paired_finding(records, step, before, "faster", "slower")
        total = clusters.paired_ratio(records, step, REFERENCE)
        rows.append({"step": step, "label": ABLATION_LABELS[step], "after": before, **gain.all._asdict(),
                     "word": gain.word, "text": gain.text(),
                     **{f"total_{k}": v for k, v in total._asdict().items()}})  # fmt: skip
    return pd.DataFrame(rows)


def ablation_findings(records: pd.DataFrame) -> list[str]:
    """One sentence per step: its gain over the step before, and where that leaves the loop."""
    table = ablation_steps(records)
    lines = [
        f"{r.label}: over the step before, {r.text}; "
        f"{wording.describe(r.total_center, r.total_low, r.total_high, 'x')} the reference"
        for r in table.itertuples()
    ]
    lines = lines or ["ablation: no finding: no step pairs up with the one before it"]
    return lines + wording.flag_note(records)


S2_PART = ("embedding_backward_update",)  # S2's claim: embedding backward and update


EMBEDDING_PARTS = ("embedding_forward", "embedding_backward_update")


def embedding_share(records: pd.DataFrame, parts: tuple[str, ...] = S2_PART) -> pd.DataFrame:
    """Per config: the share of the profiled iteration spent in the operators `parts` (by default
    embedding backward + update, S2's claim).

    A summary table (`stats.summarize`, on the logit scale): median share over repeats and its 95% interval.
    """
    ops = records[list(col.OP_COLUMNS)].sum(axis=1)
    share = sum(records[col.op_column(name)] for name in parts) / ops
    return clusters.summarize(records.assign(share=share), [col.CONFIG_NAME], "share", share=True)


def embedding_share_rows(records: pd.DataFrame, parts: tuple[str, ...] = S2_PART) -> pd.DataFrame:
    """The records with `share`: each one's share of its profiled iteration in the operators `parts`
    (summarized with runs as clusters by the S2 rule, `analysis.clusters`)."""
    if records.empty:
        return records.assign(share=pd.Series(dtype=float))
    ops = records[list(col.OP_COLUMNS)].sum(axis=1)
    return records.assign(share=sum(records[col.op_column(name)] for name in parts) / ops)


def largest_operator(records: pd.DataFrame) -> tuple[str, float]:
    """The profiled operator with the largest median share of its iteration over the records, in words, and that
    share (time no operator claimed, `other`, aside); ("", nan) without a profiled record."""
    total = records[list(col.OP_COLUMNS)].sum(axis=1)
    shares = {name: (records[col.op_column(name)] / total).median() for name in col.OPERATORS if name != "other"}
    shares = {name: share for name, share in shares.items() if share == share}
    if not shares:
        return "", float("nan")
    name = max(shares, key=lambda n: shares[n])
    return name.replace("_", " "), float(shares[name])


def speedups(records: pd.DataFrame, baseline: str = REFERENCE) -> pd.DataFrame:
    """Every variant's samples/s over the baseline's, paired within repeats, per config."""
    parts = [
        clusters.paired_ratios(records, [col.CONFIG_NAME], variant, baseline).assign(**{col.VARIANT: variant})
        for variant in records[col.VARIANT].unique()
        if variant != baseline
    ]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
