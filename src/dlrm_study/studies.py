"""What each notebook measures, per profile, and the findings its records support.

Profiles: `smoke` (seconds; what nbval runs in CI), `quick` (the default: every notebook
within `make reproduce`'s 30 minutes on a 2-core CPU) and `full` (paper-grade).
"""

import os
import tempfile
from pathlib import Path

import pandas as pd

from dlrm_study.errors import UsageError
from dlrm_study.measure.bench import OPERATORS
from dlrm_study.sweep import Sweep

PROFILES = ("smoke", "quick", "full")
CPU_PRESETS = ["dlrm-benchmark", "mlperf-scaled", "kaggle"]


def profile(value: str | None = None) -> str:
    """The profile asked for, else $DLRM_STUDY_PROFILE, else quick."""
    chosen = value or os.environ.get("DLRM_STUDY_PROFILE") or "quick"
    if chosen not in PROFILES:
        raise UsageError(f"profile {chosen!r} is not one of {', '.join(PROFILES)}")
    return chosen


def results_dir(profile: str, value: str | None = None) -> Path:
    """Where records and figures go: the given folder; a scratch folder for smoke runs."""
    if value:
        return Path(value)
    if profile == "smoke":
        return Path(tempfile.mkdtemp(prefix="dlrm-study-smoke-"))
    return Path("../results")


def _sized(name: str, profile: str, configs: list[str], variants: list[str], out: Path) -> Sweep:
    steps, warmup = {"smoke": (2, 1), "quick": (5, 2), "full": (20, 3)}[profile]
    return Sweep(
        name=f"{name}-{profile}",
        config=["tiny"] if profile == "smoke" else configs,
        set=["train.batch_size=32"] if profile == "smoke" else [],
        variants=variants,
        steps=steps,
        warmup=warmup,
        profile_steps=1 if profile == "smoke" else 2,
        out=str(out / "sweeps.csv"),
    )


def reference_breakdown(profile: str, out: Path) -> Sweep:
    """Notebook 01: the reference loop's per-operator time on each CPU preset."""
    return _sized("reference-breakdown", profile, CPU_PRESETS, ["reference"], out)


def cpu_optimizations(profile: str, out: Path) -> Sweep:
    """Notebook 02: reference, torchrec, optimized fp32 and bf16 on each CPU preset."""
    variants = ["reference", "torchrec", "optimized-fp32", "optimized-bf16"]
    return _sized("cpu-optimizations", profile, CPU_PRESETS, variants, out)


def embedding_share(records: pd.DataFrame) -> pd.Series:
    """Fraction of each config's iteration spent in embedding forward, backward and update."""
    ops = records[[f"op_{name}_ms" for name in OPERATORS]].sum(axis=1)
    emb = records["op_embedding_forward_ms"] + records["op_embedding_backward_update_ms"]
    return (emb / ops).groupby(records["config_name"]).median()


def speedups(records: pd.DataFrame, baseline: str = "reference") -> pd.DataFrame:
    """samples/s of every variant over the baseline's, per config (medians over records)."""
    rates = records.groupby(["config_name", "variant"])["samples_per_s"].median().unstack()
    return rates.div(rates[baseline], axis=0)


def fused_matches_reference(steps: int = 3) -> bool:
    """The optimized fp32 loop ends where the reference does (tiny, repeated ids, 1e-5)."""
    import torch

    from dlrm_study import config
    from dlrm_study.data import SyntheticData
    from dlrm_study.train import build, train_step

    cfg = config.load("tiny", ["data.pooling=fixed", "data.lookups_per_table=6", "model.table_rows=50-70-30-90"])
    optimized = config.Config.from_dict(cfg.to_dict())
    optimized.train.loop = "optimized"
    runs = [build(cfg), build(optimized)]
    for i in range(steps):
        for run in runs:
            train_step(run, SyntheticData(cfg).batch(i))
    tables = [torch.cat(run.model.sparse_arch.tables()) for run in runs]
    return bool(torch.allclose(tables[0], tables[1], rtol=0, atol=1e-5))


CONVERGENCE_STEPS = {"smoke": 40, "quick": 1500, "full": 20000}
LOSS_WINDOW = {"smoke": 10, "quick": 50, "full": 500}


def convergence_config(profile: str) -> list[str]:
    """Overrides of `tiny` for the convergence study: bigger tables, Zipf ids, 256 per batch."""
    if profile == "smoke":
        return ["train.batch_size=32"]
    return [
        "model.table_rows=8x100000",
        "model.embedding_dim=16",
        "model.bottom_mlp=64-16",
        "model.top_mlp=64-1",
        "train.batch_size=256",
        f"train.steps={CONVERGENCE_STEPS[profile]}",
    ]


def run_convergence(profile: str, out: Path, variants: list[str] | None = None) -> pd.DataFrame:
    """Train each variant from the same seed; record windowed losses and held-out AUC.

    One variant's rows are appended together, so an interrupted study resumes at the
    first variant not yet recorded for this config and environment.
    """
    import itertools

    from dlrm_study import config, results
    from dlrm_study.data import make_data
    from dlrm_study.measure.compare import VARIANTS
    from dlrm_study.sweep import environment
    from dlrm_study.train import build, evaluate, train

    path, env, study = out / "convergence.csv", environment(), f"convergence-{profile}"
    _, rows = results.read_rows(path)
    done = {(r["study"], r["variant"], r["config_hash"], r["env_key"]) for r in rows}
    steps, window = CONVERGENCE_STEPS[profile], LOSS_WINDOW[profile]
    for variant in variants or list(VARIANTS):
        cfg = config.load("tiny", [*convergence_config(profile), *VARIANTS[variant]])
        key = cfg.hash()
        if (study, variant, key, env["env_key"]) in done:
            continue
        run = build(cfg)
        losses = train(run, make_data(cfg).batches(), steps)
        metrics = evaluate(run, itertools.islice(make_data(cfg, "eval").batches(), cfg.train.eval_batches))
        common = {"study": study, "variant": variant, "config_hash": key, **env}
        records = [
            {**common, "kind": "loss", "step": end, "loss": sum(losses[end - window : end]) / window}
            for end in range(window, steps + 1, window)
        ]
        records.append({**common, "kind": "eval", "step": steps, **{f"eval_{k}": v for k, v in metrics.items()}})
        records[-1].update(**cfg.flat(), **results.provenance("cpu"))
        results.append_many(path, records)
    frame = results.load(path)
    return frame[(frame["study"] == study) & (frame["env_key"] == env["env_key"])]


def convergence_records(profile: str, out: Path) -> pd.DataFrame:
    """The stored convergence records of a profile (measure=False)."""
    from dlrm_study import results

    path = out / "convergence.csv"
    if not path.exists():
        raise UsageError(f"no records yet: {path} does not exist (run with measure=True)")
    frame = results.load(path)
    frame = frame[frame["study"] == f"convergence-{profile}"]
    return frame.sort_values("timestamp").drop_duplicates(["variant", "kind", "step"], keep="last")


def split_sgd_exact() -> bool:
    """Split-SGD's halves reassemble bit for bit to fp32 SGD on the same gradients."""
    import torch

    from dlrm_study.embeddings.kernels import torch_ops

    gen = torch.Generator().manual_seed(0)
    weight, grad = torch.randn(1000, generator=gen), torch.randn(1000, generator=gen).bfloat16()
    hi, lo = torch_ops.split(weight)
    torch_ops.split_sgd_dense(hi, lo, grad.view(torch.int16), 0.1)
    return bool(torch.equal(torch_ops.join(hi, lo), weight - 0.1 * grad.float()))


# Knobs of the sensitivity notebooks, one at a time around a base config:
# name -> (grid key, values, axis label).
KNOBS = {
    "dense_features": ("model.dense_features", [16, 64, 256, 1024], "dense features"),
    "tables": ("model.table_rows", ["2x100000", "8x100000", "32x100000"], "sparse features (tables)"),
    "rows": ("model.table_rows", ["8x10000", "8x100000", "8x1000000"], "rows per table"),
    "lookups": ("data.lookups_per_table", [1, 10, 100], "lookups per table (pooling factor)"),
    "embedding_dim": (
        "model.embedding_dim+model.bottom_mlp",
        [[16, "512-16"], [64, "512-64"], [128, "512-128"]],
        "embedding dimension",
    ),
    "mlp_width": ("model.top_mlp", ["256-256-1", "1024-1024-1", "4096-4096-1"], "top-MLP width"),
    "batch_size": ("train.batch_size", [256, 1024, 4096], "batch size"),
}
SMOKE_KNOBS = {  # the same knobs on `tiny`, small enough for CI
    "dense_features": [4, 13],
    "tables": ["2x1000", "4x1000"],
    "rows": ["4x100", "4x1000"],
    "lookups": [1, 4],
    "embedding_dim": [[8, "16-8"], [16, "16-16"]],
    "mlp_width": ["8-1", "16-1"],
    "batch_size": [16, 32],
}
SENSITIVITY_BASE = ["model.table_rows=8x100000", "data.lookups_per_table=20", "train.batch_size=1024"]
SENSITIVITY_VARIANTS = ["reference", "optimized-fp32", "optimized-bf16"]


def sensitivity(knob: str, profile: str, out: Path) -> Sweep:
    """Notebooks 03 and 04: one knob varied around `dlrm-benchmark` scaled to 8 x 100,000 rows."""
    key, values, _ = KNOBS[knob]
    sweep = _sized(f"sensitivity-{knob.replace('_', '-')}", profile, ["dlrm-benchmark"], SENSITIVITY_VARIANTS, out)
    sweep.profile_steps = 0
    if profile == "smoke":
        sweep.grid = {key: SMOKE_KNOBS[knob]}
    else:
        sweep.set, sweep.grid = list(SENSITIVITY_BASE), {key: values}
    return sweep


def knob_value(knob: str, grid: str) -> float:
    """The x of a record's grid assignment: `model.table_rows=8x100000` is 8 tables or 1e5 rows."""
    first = grid.split()[0].split("=", 1)[1]
    if knob == "tables":
        return float(first.split("x")[0]) if "x" in first else float(len(first.split("-")))
    if knob == "rows":
        return float(first.split("x")[-1].split("-")[0])
    if knob == "mlp_width":
        return float(first.split("-")[0])
    return float(first)


def sensitivity_records(knob: str, spec: Sweep) -> pd.DataFrame:
    """A sensitivity sweep's records with `x`, the knob's value, and `knob`, its axis label."""
    from dlrm_study import sweep

    frame = sweep.records(spec).copy()
    frame["x"] = frame["grid"].map(lambda grid: knob_value(knob, grid))
    frame["knob"] = KNOBS[knob][2]
    return frame


def gpu_status(out: Path) -> str:
    """What GPU records exist beside the CPU ones (the GPU loop is a separate issue)."""
    from dlrm_study import results

    path = out / "sweeps.csv"
    frame = results.load(path) if path.exists() else pd.DataFrame()
    gpu = frame[frame["device"] == "cuda"] if "device" in frame else frame.iloc[0:0]
    if gpu.empty:
        return "GPU: not yet measured (no GPU records in this results folder); no GPU curve or heatmap is drawn."
    first = gpu.iloc[0]
    return f"GPU: {len(gpu)} records measured on {first['gpu_model']} ({str(gpu['timestamp'].max())[:10]})."
