"""The physical bound of one training step: the work a step must do at the rates the hardware allows.

Unlike `roofline` (each GEMM at the best library rate at its shape, each id a random row), this bound
reads no library and no kernel of the study, so no loop can beat it by being better than they are:

- compute: every MLP GEMM's FLOPs (`roofline.gemm_work`) and the interaction's distinct pairs
  (`roofline.iteration_work`'s `interaction_pair_flops`) at the instruction set's peak for the loop's
  precision (`Peaks.gflops`): the FMA peak for fp32; for bf16 the faster of VDPBF16PS and AMX tiles, where
  the CPU has them. A library rate measured above the probe's is taken instead (`Peaks.of`): a bound
  never sits below what anything was seen to do.
- memory: the unique rows a step touches, per table, read for the forward's gather (the first half of
  each [hi | lo] row in bf16) and read-modified-written for the update, in the time the line probes took
  to move exactly those rows (`measure.physical`: ids drawn as the config draws them, the prefetch distance
  and hint searched). Repeated ids cost nothing more: a loop may merge them.

Two step bounds (ms): `sequential`, the phases one after another (what a loop that runs them in order can
reach), and `overlapped`, the slower of all memory work and all compute work, each with every core (what a
loop that overlaps them could reach). sequential >= overlapped always. Left out, so the bound stays low:
elementwise work (bias, ReLU, casts, loss, the dense optimizer), index traffic and pooled outputs.
"""

import dataclasses

from dlrm_study.config import Config, Precision
from dlrm_study.perfmodel import roofline

OPERATORS = ("bottom_mlp", "embedding_forward", "interaction", "top_mlp", "dense_backward", "embedding_backward_update")
MEMORY = ("embedding_forward", "embedding_backward_update")  # the memory phases; the rest is compute
SEQUENTIAL, OVERLAPPED = "physical_sequential_ms", "physical_overlapped_ms"


def op_column(name: str) -> str:
    """A record's field for one operator's physical bound: `physical_op_top_mlp_ms`."""
    return f"physical_op_{name}_ms"


@dataclasses.dataclass(frozen=True)
class Peaks:
    """GFLOP/s a step's arithmetic runs at, at most: the probe's peak and the best library rate, per precision."""

    probe: float
    library: float = 0.0

    @property
    def gflops(self) -> float:
        """The rate the bound charges: the probe's peak, or a library rate above it (then the probe fell short)."""
        return max(self.probe, self.library)

    @classmethod
    def of(cls, fields: dict[str, float], precision: str) -> "Peaks":
        """From a bound record's fields (`peak_<precision>_gflops`, `library_<precision>_gflops`)."""
        return cls(float(fields[f"peak_{precision}_gflops"]), float(fields.get(f"library_{precision}_gflops", 0.0)))


@dataclasses.dataclass(frozen=True)
class Lines:
    """ms one step's unique rows take to move at the probes' best: gathered, and read-modified-written."""

    gather_ms: float
    update_ms: float


def compute_precision(cfg: Config) -> str:
    return "bf16" if cfg.train.precision == Precision.BF16 else "fp32"


def operator_ms(cfg: Config, peaks: Peaks, lines: Lines) -> dict[str, float]:
    """ms each operator of the breakdown needs at least (the physical parts of the step, in OPERATORS order)."""
    if peaks.gflops <= 0:
        raise ValueError("a peak of 0 GFLOP/s bounds nothing: the probe did not run")
    ms = dict.fromkeys(OPERATORS, 0.0)
    bottom = len(cfg.model.bottom_layers)
    for index, (batch, fan_in, fan_out) in enumerate(roofline.layer_shapes(cfg)):
        for gemm_pass in roofline.GEMM_PASSES:
            if index == 0 and gemm_pass == "grad_input":
                continue  # the first layer's input is data: no input gradient (as `roofline.gemm_work`)
            part = ("bottom_mlp" if index < bottom else "top_mlp") if gemm_pass == "forward" else "dense_backward"
            ms[part] += 2.0 * batch * fan_in * fan_out / peaks.gflops / 1e6
    pairs = roofline.iteration_work(cfg)["interaction_pair_flops"] / peaks.gflops / 1e6
    ms["interaction"] += pairs / 3  # forward: a third of the pairs' work, backward two (as `roofline`)
    ms["dense_backward"] += pairs * 2 / 3
    ms["embedding_forward"], ms["embedding_backward_update"] = lines.gather_ms, lines.update_ms
    return ms


def step_bounds(operators: dict[str, float]) -> dict[str, float]:
    """The two step bounds from the operators' bounds: the sum, and the slower of memory and compute."""
    memory = sum(operators[name] for name in MEMORY)
    compute = sum(value for name, value in operators.items() if name not in MEMORY)
    return {SEQUENTIAL: memory + compute, OVERLAPPED: max(memory, compute)}


def bound_fields(cfg: Config, peaks: Peaks, lines: Lines) -> dict[str, float]:
    """A bound record's fields: each operator's bound and the two step bounds, in ms."""
    operators = operator_ms(cfg, peaks, lines)
    return {op_column(name): value for name, value in operators.items()} | step_bounds(operators)
