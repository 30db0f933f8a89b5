"""Compile every Triton kernel of the GPU placements and the GPU interaction for an H200 (sm_90), with no GPU.

    python scripts/triton_compile_check.py

Triton's interpreter runs what a GPU compiler may refuse (its control flow, its types), and the
GPU machine's Triton (3.6, Python 3.12) is older than the development one: this compiles each
kernel, with the argument types the placements pass (int32 staged ids, int64 per-table ids), to
PTX and a cubin with Triton's own ptxas, each twice: as written, and as a launch specializes it (every
pointer 16-byte aligned and the sizes that are multiples of 16 at the targets, the batch, its bags, the
row width and the id count, hinted `tt.divisibility = 16`, as Triton's JIT does: the hints change the
layouts its passes choose, and a kernel that compiled without them failed with them on the H200 on
2026-12-04, results/gpu-session/lending1-log.txt). It needs only Triton: where torch is not installed (a
Python 3.12 venv holding `triton==3.6.0` alone), the kernels' module is loaded with a stand-in
for torch, which the kernels themselves never touch. Prints `compiled N kernels under triton X`.
"""

import importlib.util
import itertools
import os
import sys
import types
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # real kernels, not the interpreter's

import triton  # after the environment is set: Triton reads it at import
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

SRC = Path(__file__).resolve().parents[1] / "src"
H200 = GPUTarget("cuda", 90, 32)


class Placeholder(type):
    """A placeholder class whose attributes are placeholder classes too (`torch.autograd.Function`, `nn.Module`):
    something to subclass or annotate with, never to run."""

    def __getattr__(cls, name: str) -> type:
        return Placeholder(name, (), {})


class Anything(types.ModuleType):
    """A module whose every attribute is a placeholder class: enough for a module that names `torch.Tensor`,
    subclasses `torch.autograd.Function` or `nn.Module`, but runs no torch code at import."""

    def __getattr__(self, name: str) -> type:
        return Placeholder(name, (), {})


def kernels_module() -> types.ModuleType:
    """`dlrm_study.model.kernels.triton_ops`: imported, or loaded from its file where torch is missing."""
    try:
        import torch  # noqa: F401
    except ImportError:
        path = SRC / "dlrm_study" / "model" / "kernels" / "triton_ops.py"
        stub = Anything("torch")
        packages = ["dlrm_study", "dlrm_study.model", "dlrm_study.model.kernels"]
        sys.modules.update({"torch": stub, **{name: Anything(name) for name in packages}})
        sys.modules["dlrm_study.model.kernels"].torch_ops = Anything("torch_ops")
        spec = importlib.util.spec_from_file_location("triton_ops", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    sys.path.insert(0, str(SRC))
    from dlrm_study.model.kernels import triton_ops

    return triton_ops


# The integer arguments that are multiples of 16 at the targets (batch 2,048 to 65,536; rows of 64 or 128).
ALIGNED_SIZES = ("bags", "batch", "dim", "count")
# Every BLOCK_D a launch can ask for (`triton_ops.block`: the power of two at least the row width; the plan's widths
# run from 16 to 128), and the interaction's feature tiles (`triton_interaction.tile`: up to 32 tables).
BLOCK_DS = (16, 32, 64, 128)
FEATURE_TILES = (16, 32, 64)


def launch_hints(fn, signature: dict[str, str]) -> dict[tuple[int], list]:
    """What Triton's JIT adds at a launch with aligned pointers and sizes: `tt.divisibility = 16` on each."""
    hinted = [name for name, kind in signature.items() if kind.startswith("*") or name in ALIGNED_SIZES]
    return {(fn.arg_names.index(name),): [["tt.divisibility", 16]] for name in hinted}


def build(fn, signature: dict[str, str], constexprs: dict[str, object]) -> None:
    """One kernel to PTX for sm_90 and on to a cubin, as written and as launched (ptxas runs: a kernel it
    refuses raises here, naming the kernel and which of the two)."""
    full = {**signature, **dict.fromkeys(constexprs, "constexpr")}
    for launched in (False, True):
        attrs = launch_hints(fn, signature) if launched else {}
        try:
            kernel = triton.compile(ASTSource(fn=fn, signature=full, constexprs=constexprs, attrs=attrs), target=H200)
        except Exception as error:
            how = "with a launch's alignment hints" if launched else "as written"
            raise RuntimeError(f"{fn.__name__} ({how}, {signature}): {type(error).__name__}: {error}") from error
        if ".target sm_90" not in kernel.asm["ptx"] or not kernel.asm.get("cubin"):
            raise RuntimeError(f"{fn.__name__}: no sm_90 cubin")


def interaction_kernels(triton_ops: types.ModuleType) -> int:
    """The GPU interaction's two kernels (`model.kernels.triton_interaction`), fp32 and bf16 dense, at every tile a
    launch can ask for: up to 64 features (32 tables and the dense vector; mlperf-scaled's 27 take 32,
    dlrm-benchmark's 9 take 16) by every row width of BLOCK_DS."""
    if not isinstance(sys.modules.get("torch"), Anything):
        from dlrm_study.model.kernels import triton_interaction as k
    else:  # torch missing: the file itself, beside the stand-ins `kernels_module` left
        sys.modules["dlrm_study.model.kernels.triton_ops"] = triton_ops
        path = SRC / "dlrm_study" / "model" / "kernels" / "triton_interaction.py"
        spec = importlib.util.spec_from_file_location("triton_interaction", path)
        k = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(k)

    built = 0
    sizes = {"F": "i32", "D": "i32", "P": "i32"}
    for dense, bf16 in (("*fp32", False), ("*bf16", True)):
        for fp, dp in itertools.product(FEATURE_TILES, BLOCK_DS):
            constexprs = {"FP": fp, "DP": dp, "BF16": bf16}
            build(k._forward_kernel, {"dense": dense, "pooled": "*fp32", "out": dense, **sizes}, constexprs)
            build(k._backward_kernel, {"dense": dense, "pooled": "*fp32", "grad": dense, "grad_dense": dense,
                                       "grad_pooled": "*fp32", **sizes}, constexprs)  # fmt: skip
            built += 2
    return built


def main() -> int:
    t = kernels_module()
    sizes = {"bags": "i32", "batch": "i32", "tables": "i32", "dim": "i32"}
    built = 0
    # staged batches (int32), per-table bags and cache slots (int64); every row width a launch asks for
    for ids, block_d in itertools.product(("*i32", "*i64"), BLOCK_DS):
        build(t._pool_kernel, {"weight": "*fp32", "ids": ids, "bag_starts": "*i64", "out": "*fp32", **sizes},
              {"BLOCK_BAGS": t.BLOCK_BAGS, "BLOCK_D": min(block_d, t.BLOCK_COLS)})  # fmt: skip
        sorted_ = {"rows": ids, "id_bag": "*i64", "grad": "*fp32"}
        build(t._chunk_head_kernel, {**sorted_, "heads": "*fp32", "count": "i32", **sizes},
              {"CHUNK": t.CHUNK, "BLOCK_D": block_d})  # fmt: skip
        for adagrad in (True, False):  # row-wise Adagrad and SGD
            build(t._segment_update_kernel,
                  {"weight": "*fp32", "momentum": "*fp32", **sorted_, "heads": "*fp32", "lr": "fp32", "eps": "fp32",
                   "count": "i32", "table_rows": "i32", **sizes},
                  {"ADAGRAD": adagrad, "CHUNK": t.CHUNK, "BLOCK_CHUNKS": t.BLOCK_CHUNKS,
                   "BLOCK_D": block_d})  # fmt: skip
        build(t._copy_rows_kernel, {"src": "*fp32", "src_rows": ids, "dst": "*fp32", "dst_rows": ids, "dim": "i32"},
              {"BLOCK_D": block_d})  # fmt: skip
        built += 5
    built += interaction_kernels(t)
    print(f"compiled {built} kernels under triton {triton.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
