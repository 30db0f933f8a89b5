"""Notebook 05's figure: the cache's hit rate against id skew and cache size."""

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from dlrm_study.report.plots.common import add_caption


def hit_rates(records: pd.DataFrame, title: str) -> plt.Figure:
    """Cache hit rate (top) and rows evicted per batch (bottom) against id skew, one line per cache
    size, one column per policy: counts over the measured batches, so no interval."""
    rows = records.assign(cache=records["cache_fraction"].map(lambda f: f"{f:.1%} of rows"))
    long = rows.melt(
        id_vars=["zipf_alpha", "cache", "cache_policy"], value_vars=["cache_hit_rate", "evictions_per_batch"],
        var_name="count", value_name="value",
    )  # fmt: skip
    names = {"cache_hit_rate": "hit rate (per lookup)", "evictions_per_batch": "rows evicted per batch"}
    long["count"] = long["count"].map(names)
    grid = sns.relplot(
        long, x="zipf_alpha", y="value", hue="cache", col="cache_policy", row="count", kind="line", marker="o",
        height=3.0, aspect=1.3, facet_kws={"sharey": "row"}, errorbar=None,
    )  # fmt: skip
    grid.set_titles("{col_name}, {row_name}")
    grid.set_axis_labels("Zipf exponent of the ids (skew)", "")
    for (count, _), ax in grid.axes_dict.items():
        ax.set_ylabel(count)
    grid.figure.suptitle(title, y=1.03)
    add_caption(grid.figure, records)
    return grid.figure
