"""Each operator of the per-operator breakdown bounded on its own: the roofline bound split by operator.

Why: a step's time over the whole bound says how far a loop is from the machine, not where. Each
operator the breakdown times (`records.columns.OPERATORS`) does a part of the bound's work: the MLPs'
forward GEMMs, the backward GEMMs (dense backward, with the interaction's backward), the embedding
bytes of the forward and of the update at their access's rate. These parts add up to
`roofline.bound_ms`; loss, optimizer step and `other` do work the bound leaves out (bound 0).

A part measured faster than its bound shows the bound is not this machine's limit there (a rate
measured under load, or a probe a loop outdid): `beaten` names such parts, a record carries them
(`BEATEN`) where they still are once the limits behind them are measured again (`measure.limits.remeasured`).
"""

from dlrm_study.config import Config
from dlrm_study.perfmodel import roofline
from dlrm_study.records import columns as col

BEATEN = "roofline_beaten"  # record field: the parts (operators, "step") timed faster than their bound
BOUNDED = ("bottom_mlp", "embedding_forward", "interaction", "top_mlp", "dense_backward", "embedding_backward_update")


def operator_bounds(cfg: Config, limits: dict[str, float]) -> dict[str, float]:
    """ms per step each bounded operator needs at least, as record fields (`col.bound_column`)."""
    ms = dict.fromkeys(BOUNDED, 0.0)
    precision, bottom = roofline.gemm_precision(cfg, limits), len(cfg.model.bottom_layers)
    for i, layer in enumerate(roofline.layer_shapes(cfg)):
        for gemm_pass in roofline.GEMM_PASSES:
            if i == 0 and gemm_pass == "grad_input":
                continue  # the first layer's input is data: no input gradient (as `roofline.gemm_work`)
            rate = roofline.rate(limits, roofline.layer_key(precision, layer, gemm_pass))
            operator = ("bottom_mlp" if i < bottom else "top_mlp") if gemm_pass == "forward" else "dense_backward"
            ms[operator] += 2.0 * layer[0] * layer[1] * layer[2] / rate / 1e6
    interaction = roofline.interaction_ms(cfg, limits)
    ms["interaction"] += interaction["forward"]
    ms["dense_backward"] += interaction["backward"]
    bound = roofline.bound_ms(cfg, limits)
    ms["embedding_forward"] = bound["roofline_embedding_forward_ms"]
    ms["embedding_backward_update"] = bound["roofline_embedding_update_ms"]
    return {col.bound_column(name): value for name, value in ms.items()}


def beaten(fields: dict[str, object]) -> list[str]:
    """The bounded operators, and "step", whose measured ms in a record's `fields` is below their bound."""
    pairs = [(name, col.op_column(name), col.bound_column(name)) for name in BOUNDED]
    pairs.append(("step", col.MS_MEDIAN, col.ROOFLINE_MS))
    found = []
    for name, measured, bound in pairs:
        ms, least = fields.get(measured), fields.get(bound)
        if isinstance(ms, float | int) and isinstance(least, float | int) and 0 < ms < least:
            found.append(name)
    return found
