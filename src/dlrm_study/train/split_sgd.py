"""Split-SGD for bf16 dense parameters (SC20).

Each parameter holds the upper 16 bits of its fp32 master weight as a bf16 tensor — the
weight forward and backward use — and the optimizer keeps the lower 16 bits as state. A
step joins the halves into fp32, applies SGD with the bf16 gradient, and splits again:
fp32 SGD's trajectory without an fp32 copy of the weights or per-step weight casts.

`PlainBF16SGD` and `drop_lower_halves` are the control: plain bf16 weights, no lower halves
(`train.split_sgd=false`), to show what the lower halves keep.
"""

from typing import Any

import torch
from torch import nn

from dlrm_study.model import kernels
from dlrm_study.model.kernels.torch_ops import interleave, master, split


class SplitSGD(torch.optim.Optimizer):
    def __init__(self, params, lr: float) -> None:
        super().__init__(params, {"lr": lr})
        self.ops = kernels.cpu_ops()

    @classmethod
    def from_fp32(cls, modules: list[nn.Module], lr: float) -> "SplitSGD":
        """Turn the modules' fp32 parameters into bf16 upper halves; the lower halves become state."""
        params, lower = [], []
        for module in modules:
            for p in module.parameters():
                hi, lo = split(p.data)
                p.data = hi.view(torch.bfloat16)
                params.append(p)
                lower.append(lo)
        optimizer = cls(params, lr)
        for p, lo in zip(params, lower, strict=True):
            optimizer.state[p]["lo"] = lo
        return optimizer

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load the state, keeping the lower halves int16 and bit for bit as saved."""
        super().load_state_dict(state_dict)
        # torch casts the state of a floating-point parameter to its dtype: int16 bits would
        # become bf16 *values*, rounded, so take them from the saved state instead.
        params = [p for group in self.param_groups for p in group["params"]]
        saved_ids = [i for group in state_dict["param_groups"] for i in group["params"]]
        for p, i in zip(params, saved_ids, strict=True):
            lo = state_dict["state"][i]["lo"]
            if lo.dtype != torch.int16:
                raise ValueError(f"Split-SGD state {i}: lower halves are {lo.dtype}, not int16")
            self.state[p]["lo"] = lo.to(p.device, copy=True)  # a copy: never alias the caller's tensors

    @torch.no_grad()
    def step(self) -> None:  # type: ignore[override]
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad.contiguous().view(torch.int16)
                self.ops.split_sgd_dense(p.view(torch.int16), self.state[p]["lo"], grad, group["lr"])


def round_bf16(value: torch.Tensor) -> torch.Tensor:
    """fp32 values rounded to the nearest bf16 (ties to even), as fp32."""
    return value.bfloat16().float()


class PlainBF16SGD(torch.optim.Optimizer):
    """SGD on bf16 weights with no lower halves: each update computed in fp32, then rounded to bf16.

    What Split-SGD exists to beat: an update smaller than half a weight's bf16 spacing (|w| * 2^-8)
    rounds away, so small steps are lost.
    """

    def __init__(self, params, lr: float) -> None:
        super().__init__(params, {"lr": lr})

    @classmethod
    def from_fp32(cls, modules: list[nn.Module], lr: float) -> "PlainBF16SGD":
        """Turn the modules' fp32 parameters into bf16 (rounded to nearest)."""
        params = []
        for module in modules:
            for p in module.parameters():
                p.data = p.data.bfloat16()
                params.append(p)
        return cls(params, lr)

    @torch.no_grad()
    def step(self) -> None:  # type: ignore[override]
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.copy_((p.float() - group["lr"] * p.grad.float()).bfloat16())


def drop_lower_halves(arch: nn.Module, chunk: int = 1 << 20) -> None:
    """Make a Split-SGD table plain bf16: its weights rounded to bf16 with lower halves zero, and after every
    update the rows it touched rounded again (their fp32 result of `w - lr * g` to the nearest bf16)."""
    table = arch.weight_split
    with torch.no_grad():
        for start in range(0, len(table), chunk):
            rows = table[start : start + chunk]
            rows.copy_(interleave(round_bf16(master(rows))))
    update = arch.update_tables

    def plain_update(ids: torch.Tensor, bag_starts: torch.Tensor, grad: torch.Tensor, batch: int, tables: int) -> None:
        update(ids, bag_starts, grad, batch, tables)
        touched = ids[: int(bag_starts[-1])].unique()
        table[touched] = interleave(round_bf16(master(table[touched])))

    arch.update_tables = plain_update
