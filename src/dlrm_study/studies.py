"""What each notebook measures, per profile, and the findings its records support.

Profiles: `smoke` (seconds; what nbval runs in CI), `quick` (the default: every notebook
within `make reproduce`'s 30 minutes on a 2-core CPU) and `full` (paper-grade).
"""

import dataclasses
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
    from dlrm_study.measure.compare import CPU_VARIANTS, VARIANTS
    from dlrm_study.sweep import environment
    from dlrm_study.train import build, evaluate, train

    path, env, study = out / "convergence.csv", environment(), f"convergence-{profile}"
    _, rows = results.read_rows(path)
    done = {(r["study"], r["variant"], r["config_hash"], r["env_key"]) for r in rows}
    steps, window = CONVERGENCE_STEPS[profile], LOSS_WINDOW[profile]
    for variant in variants or list(CPU_VARIANTS):
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
    frame = convergence_records(profile, out)
    return frame[frame["env_key"] == env["env_key"]]


def convergence_records(profile: str, out: Path) -> pd.DataFrame:
    """The stored convergence records of a profile, for the variants' current configs."""
    from dlrm_study import config, results
    from dlrm_study.measure.compare import CPU_VARIANTS, VARIANTS

    path = out / "convergence.csv"
    if not path.exists():
        raise UsageError(f"no records yet: {path} does not exist (run with measure=True)")
    frame = results.load(path)
    current = {config.load("tiny", [*convergence_config(profile), *VARIANTS[v]]).hash() for v in CPU_VARIANTS}
    frame = frame[(frame["study"] == f"convergence-{profile}") & frame["config_hash"].isin(current)]
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

    return with_knob(knob, sweep.records(spec))


def with_knob(knob: str, records: pd.DataFrame) -> pd.DataFrame:
    """The records with `x`, the knob's value at each point, and `knob`, its axis label."""
    frame = records.copy()
    frame["x"] = frame["grid"].map(lambda grid: knob_value(knob, grid))
    frame["knob"] = KNOBS[knob][2]
    return frame


# --- GPU sweeps: the CPU sweeps' points on the gpu loop, in their own records file ----------

GPU_RECORDS = "gpu_sweeps.csv"
DENSE_SPARSE_GRID = {
    "model.dense_features": [16, 256, 1024],
    "model.table_rows": ["2x100000", "8x100000", "32x100000"],
}
SMOKE_DENSE_SPARSE_GRID = {"model.dense_features": [4, 13], "model.table_rows": ["2x1000", "4x1000"]}


def dense_sparse_grid(profile: str, out: Path) -> Sweep:
    """Notebook 03's heatmap: dense x sparse features, the best CPU loop (bf16) at every point."""
    sweep = _sized("dense-sparse-grid", profile, ["dlrm-benchmark"], ["optimized-bf16"], out)
    sweep.profile_steps = 0
    if profile == "smoke":
        sweep.grid = dict(SMOKE_DENSE_SPARSE_GRID)
    else:
        sweep.set, sweep.grid = list(SENSITIVITY_BASE), dict(DENSE_SPARSE_GRID)
    return sweep


def on_gpu(spec: Sweep, device: str = "cuda", variants: tuple[str, ...] = ("gpu-hbm",)) -> Sweep:
    """The same points on the gpu loop: GPU variants, records in GPU_RECORDS beside the CPU ones.

    More steps than on the CPU: a GPU step takes milliseconds, and the first ones compile kernels.
    """
    steps, warmup = (spec.steps, spec.warmup) if device == "cpu" else (max(spec.steps, 20), max(spec.warmup, 5))
    return dataclasses.replace(
        spec,
        name=f"gpu-{spec.name}",
        set=[*spec.set, f"train.device={device}"],
        variants=list(variants),
        steps=steps,
        warmup=warmup,
        profile_steps=0,
        out=str(Path(spec.out).with_name(GPU_RECORDS)),
    )


def gpu_records(spec: Sweep) -> pd.DataFrame:
    """A GPU sweep's stored records, or an empty frame where none were measured yet."""
    from dlrm_study import sweep

    try:
        return sweep.records(spec)
    except UsageError:
        return pd.DataFrame()


def with_gpu(knob: str, cpu_spec: Sweep) -> pd.DataFrame:
    """A sensitivity sweep's CPU records and, where measured, its GPU records (plotted as one)."""
    frame = sensitivity_records(knob, cpu_spec)
    gpu = gpu_records(on_gpu(cpu_spec))
    if gpu.empty:
        return frame
    return pd.concat([frame, with_knob(knob, gpu)], ignore_index=True)


def gpu_over_cpu(cpu: pd.DataFrame, gpu: pd.DataFrame) -> pd.DataFrame:
    """samples/s of the GPU over the CPU at each (dense features, tables) point of the grid."""

    def rates(frame: pd.DataFrame) -> pd.Series:
        tables = frame["model.table_rows"].map(lambda rows: len(str(rows).split("-")))
        return frame.groupby([frame["model.dense_features"], tables])["samples_per_s"].median()

    ratio = (rates(gpu) / rates(cpu)).dropna()
    ratio.index.names = ["dense features", "tables"]
    return ratio.unstack("dense features")


# --- the cache of the `cached` placement: hit rate against id skew -----------------------------

CACHE_ALPHAS = {"smoke": [0.8, 1.2], "quick": [0.6, 0.8, 1.05, 1.2, 1.4], "full": [0.4, 0.6, 0.8, 1.0, 1.05, 1.2, 1.4]}
CACHE_FRACTIONS = {"smoke": [0.3, 0.5], "quick": [0.01, 0.05, 0.1, 0.2], "full": [0.005, 0.01, 0.02, 0.05, 0.1, 0.2]}
CACHE_BATCHES = {"smoke": (2, 3), "quick": (50, 50), "full": (500, 500)}  # (warm-up, measured)


def cache_hit_rates(profile: str, out: Path, measure: bool = True) -> pd.DataFrame:
    """Hit rate of the `cached` placement's cache (LRU, LFU) against Zipf skew and cache size.

    The ids of `mlperf-scaled` (26 tables, batch 2,048; `tiny` when smoke), fed to the
    placement's own cache book-keeping on the CPU: a hit rate depends on the id stream and
    the policy, not on the device, so it is measured here; what a miss costs is the GPU's.
    Resumable: points already recorded for this environment are skipped.
    """
    import itertools

    from dlrm_study import config, results
    from dlrm_study.sweep import environment

    path, env, study = out / "cache.csv", environment(), f"cache-hit-rate-{profile}"
    if measure:
        _, rows = results.read_rows(path)
        done = {(r["study"], r["config_hash"], r["env_key"]) for r in rows}
        base = "tiny" if profile == "smoke" else "mlperf-scaled"
        grid = itertools.product(CACHE_ALPHAS[profile], CACHE_FRACTIONS[profile], ("lru", "lfu"))
        for alpha, fraction, policy in grid:
            overrides = [f"data.zipf_alpha={alpha}", f"train.cache_fraction={fraction}", f"train.cache_policy={policy}"]
            cfg = config.load(
                base, ["data.id_distribution=zipf", "train.loop=gpu", "train.placement=cached", *overrides]
            )
            if (study, cfg.hash(), env["env_key"]) in done:
                continue
            record = {"study": study, "config_hash": cfg.hash(), **hit_rate(cfg, *CACHE_BATCHES[profile])}
            results.append(path, {**record, **env, **results.provenance("cpu")})
    if not path.exists():
        raise UsageError(f"no records yet: {path} does not exist (run with measure=True)")
    frame = results.load(path)
    frame = frame[frame["study"] == study]
    return frame.sort_values("timestamp").drop_duplicates(["zipf_alpha", "cache_fraction", "cache_policy"], keep="last")


def hit_rate(cfg, warm: int, timed: int) -> dict[str, object]:
    """The cache's hit rate over `timed` batches of the config's ids, after `warm` batches."""
    import itertools

    import torch

    from dlrm_study.data import make_data
    from dlrm_study.embeddings.cached import CachedSparseArch

    t = cfg.train
    # One column per row is enough: which rows are resident does not depend on the dimension.
    arch = CachedSparseArch(
        cfg.model.table_rows, 1, t.learning_rate, torch.Generator(), "sgd", torch.device("cpu"),
        t.cache_fraction, t.cache_policy,
    )  # fmt: skip
    for i, batch in enumerate(itertools.islice(make_data(cfg).batches(), warm + timed)):
        if i == warm:
            arch.stats()
        arch.make_resident(torch.cat([ids + s for ids, s in zip(batch.indices, arch.table_starts, strict=True)]))
    return {
        "zipf_alpha": cfg.data.zipf_alpha,
        "cache_fraction": t.cache_fraction,
        "cache_policy": t.cache_policy,
        "batches": timed,
        **arch.stats(),
        **{f"cfg_{k}": v for k, v in cfg.flat().items() if k.startswith(("model.", "data."))},
    }


def placement_records(out: Path, study: str) -> pd.DataFrame:
    """One of the GPU script's placement sweeps (gpu-placements, -skew, -size), `x` its knob."""
    from dlrm_study import results

    path = out / GPU_RECORDS
    frame = results.load(path) if path.exists() else pd.DataFrame()
    if frame.empty or "study" not in frame:
        return frame
    frame = frame[(frame["study"] == study) & frame["error"].isna()].copy()
    frame = frame.sort_values("timestamp").drop_duplicates(["variant", "sweep_point"], keep="last")
    if study.endswith("-skew"):
        frame["x"], frame["knob"] = frame["data.zipf_alpha"], "Zipf exponent of the ids"
    elif study.endswith("-size"):
        frame["x"] = frame["model.table_rows"].map(lambda rows: float(str(rows).split("-")[0]))
        frame["knob"] = "rows per table"
    return frame


def gpu_here(device: str) -> bool:
    """Whether a notebook's `device` parameter lets it measure on a GPU now."""
    import torch

    return device in ("auto", "cuda") and torch.cuda.is_available()


def gpu_status(out: Path) -> str:
    """Which GPU records this results folder holds: where and when they were measured."""
    from dlrm_study import results

    path = out / GPU_RECORDS
    frame = results.load(path) if path.exists() else pd.DataFrame()
    gpu = frame[frame["device"] == "cuda"] if "device" in frame else frame.iloc[0:0]
    if gpu.empty:
        return (
            "GPU: not yet measured (no GPU records in this results folder; `bash scripts/gpu_check.sh` on a GPU "
            "makes them); no GPU curve or heatmap is drawn."
        )
    first = gpu.iloc[0]
    when = str(gpu["timestamp"].min())[:10]
    return f"GPU: {len(gpu)} records measured on {first['gpu_model']} ({when}, commit {str(first['git_commit'])[:7]})."


# --- notebook 05: tables on parameter servers against local tables ------------------------------

REMOTE_BASE = {
    "smoke": ["model.table_rows=4x1000", "train.batch_size=32"],
    "quick": ["model.table_rows=8x100000", "data.lookups_per_table=20", "train.batch_size=1024"],
    "full": ["model.table_rows=8x1000000", "data.lookups_per_table=20", "train.batch_size=2048"],
}
REMOTE_ROUNDS = {"smoke": 1, "quick": 3, "full": 5}


def remote_vs_local(profile: str, out: Path, measure: bool = True) -> pd.DataFrame:
    """The optimized fp32 loop with its tables local, and on one parameter server (RPC), alternated.

    Each process gets one core (the trainer and the server one each), so the remote setup has a
    second core for its tables: the comparison is of placements, not of equal hardware.
    """
    from dlrm_study import results
    from dlrm_study.distributed.scaling import launch

    path, study = out / "remote.csv", f"remote-vs-local-{profile}"
    base = "tiny" if profile == "smoke" else "dlrm-benchmark"
    steps = {"smoke": 2, "quick": 10, "full": 30}[profile]
    if measure:
        have = results.load(path) if path.exists() else pd.DataFrame()
        measured = int((have["study"] == study).sum()) if "study" in have else 0
        for _ in range(REMOTE_ROUNDS[profile] - measured // 2):
            for placement in ("local", "remote"):
                args = ["bench", "--config", base, "--loop", "optimized", "--steps", str(steps), "--warmup", "2"]
                args += ["--profile-steps", "0", "--roofline", "off", "--study", study, "--out", str(path)]
                args += [item for o in REMOTE_BASE[profile] for item in ("--set", o)]
                if placement == "remote":
                    launch(2, [*args, "--remote-tables"])  # a trainer and one parameter server
                else:
                    launch(0, args)
    if not path.exists():
        raise UsageError(f"no records yet: {path} does not exist (run with measure=True)")
    frame = results.load(path)
    frame = frame[frame["study"] == study].copy()
    frame["tables"] = frame["placement"].map(lambda p: "remote (1 server)" if p == "remote" else "local")
    return frame
