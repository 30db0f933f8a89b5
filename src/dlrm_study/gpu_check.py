"""One GPU session, prepared: the GPU tests, then the benchmark grid, records under --out.

    python -m dlrm_study.gpu_check --out DIR [--budget-s 420] [--dry-run]

In order: the tests marked `gpu`; the GPU's copy bandwidths; the embedding-only benchmark
of each placement (the `hbm` bandwidth target); then sweeps, most needed first: the
presets (the throughput target), the placements (the `cached` target), the sensitivity
sweeps of notebooks 03 and 04 and the dense x sparse grid, then placements against id
skew and table size. Points run one at a time; past the time budget the rest are left for
the next session (every sweep resumes where it stopped). `--dry-run` runs it all on the
CPU at tiny sizes, which is what CI checks. Records: DIR/gpu_sweeps.csv, DIR/gpu_embedding.csv;
the verdicts against the targets: DIR/summary.txt.
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

from dlrm_study import config, results, studies, sweep
from dlrm_study.errors import UsageError
from dlrm_study.measure import gpu, runner
from dlrm_study.studies import predictions
from dlrm_study.sweep import Sweep

PLACEMENT_VARIANTS = ["gpu-hbm", "gpu-cached", "gpu-cached-lfu", "gpu-uvm", "gpu-host"]
TARGET_SAMPLES_PER_S = 1_000_000  # mlperf-scaled, bf16, hbm
TARGET_COPY_FRACTION = 0.5  # dlrm-benchmark, hbm: embedding bytes / copy bandwidth
TARGET_CACHED_OVER_HBM = 0.7  # Zipf(1.05), 10% of rows cached


REPEATS = 3  # every GPU point and placement, measured in interleaved repeats (measure.runner)


def sweeps(out: Path, dry_run: bool) -> list[Sweep]:
    """The grid, most needed first."""
    device, profile = ("cpu", "smoke") if dry_run else ("cuda", "quick")
    steps, warmup = (2, 1) if dry_run else (50, 10)
    records = str(out / studies.GPU_RECORDS)
    repeats = 2 if dry_run else REPEATS

    def own(name: str, configs: list[str], variants: list[str], set_: list[str], grid: dict | None = None) -> Sweep:
        base = ["tiny"] if dry_run else configs
        set_ = [*set_, f"train.device={device}"]
        return Sweep(name, base, set_, grid or {}, variants, repeats, steps, warmup, 0, records)

    zipf = ["data.id_distribution=zipf", "data.zipf_alpha=1.05", "train.cache_fraction=0.1"]
    if dry_run:  # tiny's 4 x 1,000 rows: a cache of 10% is smaller than one batch's rows
        zipf[-1] = "train.cache_fraction=0.5"
    presets = own("gpu-presets", ["mlperf-scaled", "dlrm-benchmark", "kaggle"], ["gpu-hbm", "gpu-hbm-fp32"], [])
    placements = own("gpu-placements", ["mlperf-scaled"], PLACEMENT_VARIANTS, zipf)
    skew = own(
        "gpu-placement-skew",
        ["mlperf-scaled"],
        PLACEMENT_VARIANTS,
        zipf[:1] + zipf[2:],
        {"data.zipf_alpha": [0.8, 1.2] if dry_run else [0.6, 1.05, 1.4]},
    )
    sizes = own(
        "gpu-placement-size",
        ["dlrm-benchmark"],
        PLACEMENT_VARIANTS,
        [*zipf[:2], "train.cache_fraction=0.2" if not dry_run else zipf[2], "data.lookups_per_table=10"],
        {"model.table_rows": ["4x500", "4x1000"] if dry_run else ["8x100000", "8x1000000", "8x4000000"]},
    )
    cpu_out = out  # the CPU sweeps' specs name the points; on_gpu sends their records to GPU_RECORDS
    sensitivity = [studies.sensitivity(knob, profile, cpu_out) for knob in ("dense_features", "tables")]
    shape = [studies.sensitivity(k, profile, cpu_out) for k in ("rows", "lookups", "embedding_dim", "mlp_width")]
    shape.append(studies.sensitivity("batch_size", profile, cpu_out))
    grid = studies.dense_sparse_grid(profile, cpu_out)
    mirrored = [studies.on_gpu(spec, device) for spec in [*sensitivity, grid, *shape]]
    for spec in mirrored:
        spec.out, spec.repeats = records, repeats
    return [presets, placements, *mirrored, skew, sizes]


def run_tests(dry_run: bool) -> str:
    """The tests marked `gpu` (on the CPU they skip): pytest's last line, failures said loudly."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "tests").is_dir():
        return "tests: not found beside the package, not run"
    # Only the file holding them: collecting the others would import packages a GPU machine lacks.
    command = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", "tests/test_placements.py"]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True)
    lines = (done.stdout + done.stderr).strip().splitlines()
    print("\n".join(lines[-15:]))
    last = lines[-1] if lines else "no output"
    if done.returncode not in (0, 5):  # 5: nothing selected
        # The grid still runs: one GPU session is scarce, and each point records its own error.
        return f"GPU TESTS FAILED (pytest exit {done.returncode}): {last}"
    return f"tests: {last}"


def embedding_records(out: Path, dry_run: bool) -> None:
    """Copy bandwidths, then each placement's embedding-only benchmark on dlrm-benchmark, in repeats."""
    device = torch.device("cpu" if dry_run else "cuda")
    limits = gpu.copy_bandwidth(device, mib=16 if dry_run else 2048)
    print(f"copy bandwidth: {limits['copy_gbps']:.0f} GB/s on the device, {limits['h2d_gbps']:.1f} GB/s host->device")
    configs = {
        placement: config.load(
            "tiny" if dry_run else "dlrm-benchmark",
            [
                f"train.device={device.type}",
                "train.loop=gpu",
                f"train.placement={placement}",
                "data.id_distribution=zipf",
                "data.zipf_alpha=1.05",
                "train.cache_fraction=0.5",
            ],
        )
        for placement in ("hbm", "uvm", "cached", "host")
    }
    steps, warmup = (2, 1) if dry_run else (20, 5)

    def measure(task: runner.Task) -> dict[str, object]:
        fields = {**gpu.embedding_bench(task.cfg, steps, warmup, limits), "builds": "every repeat"}
        if device.type == "cuda":
            torch.cuda.empty_cache()
        return fields

    def say(record: dict[str, object]) -> None:
        print(
            f"embedding {record['placement']:>6}, repeat {record['repeat']}: "
            f"{record['embedding_ms_median']:8.2f} ms, {record['embedding_gbps']:7.1f} GB/s"
        )

    points = [("dlrm-benchmark", {f"embedding-{name}": cfg for name, cfg in configs.items()})]
    tasks = runner.schedule(points, 2 if dry_run else REPEATS, runner.machine_of)
    runner.run(
        tasks, measure, out / "gpu_embedding.csv", "gpu-embedding", record_errors=False, progress=False, on_record=say
    )


def run_sweep(spec: Sweep, deadline: float) -> str:
    """The sweep's measurements until done or past the deadline; a line saying how far it got."""
    try:
        counts = sweep.run(spec, progress=False, deadline=deadline)
    except Exception as err:  # one GPU session is scarce: a sweep that breaks must not stop the others
        return f"{spec.name}: STOPPED by {type(err).__name__}: {first_line(err)}"
    return f"{spec.name}: {counts}"


def first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:300] if text else ""


def summary(out: Path, dry_run: bool = False, predicted: Path | None = None) -> list[str]:
    """The GPU targets against the records in `out` (a dry run's are tiny: judged, not meaningful),
    and the pre-registered predictions in `predicted` (a results folder) scored on them."""
    presets = {"mlperf-scaled": "tiny", "dlrm-benchmark": "tiny"} if dry_run else {}
    frame = results.load(out / studies.GPU_RECORDS) if (out / studies.GPU_RECORDS).exists() else None
    lines = []
    if frame is not None and "error" in frame:
        ok = frame[frame["error"].isna()]  # the median of repeat medians
        rate = ok.groupby(["study", "config_name", "variant"])["samples_per_s"].median()
        mlperf = rate.get(("gpu-presets", presets.get("mlperf-scaled", "mlperf-scaled"), "gpu-hbm"))
        if mlperf is not None:
            verdict = "met" if mlperf >= TARGET_SAMPLES_PER_S else "missed"
            lines.append(f"mlperf-scaled bf16 hbm: {mlperf:,.0f} samples/s (target 1,000,000: {verdict})")
        place = {
            v: rate.get(("gpu-placements", presets.get("mlperf-scaled", "mlperf-scaled"), v))
            for v in PLACEMENT_VARIANTS
        }
        if place["gpu-hbm"] and place["gpu-cached"]:
            ratio = place["gpu-cached"] / place["gpu-hbm"]
            verdict = "met" if ratio >= TARGET_CACHED_OVER_HBM else "missed"
            lines.append(f"cached (10%, Zipf 1.05) / hbm: {ratio:.2f} (target 0.70: {verdict})")
        for v in ("gpu-cached-lfu", "gpu-uvm", "gpu-host"):
            if place["gpu-hbm"] and place[v]:
                lines.append(f"{v.removeprefix('gpu-')} / hbm: {place[v] / place['gpu-hbm']:.2f}")
    path = out / "gpu_embedding.csv"
    if path.exists():
        emb = results.load(path)
        hbm = emb[(emb["placement"] == "hbm") & (emb["config_name"] == presets.get("dlrm-benchmark", "dlrm-benchmark"))]
        if not hbm.empty:
            fraction = hbm["embedding_copy_fraction"].median()
            verdict = "met" if fraction >= TARGET_COPY_FRACTION else "missed"
            lines.append(
                f"dlrm-benchmark hbm embedding bytes / copy bandwidth: {fraction:.2f} (target 0.50: {verdict})"
            )
    if predicted is not None and (predicted / predictions.PREDICTIONS).exists():
        lines += predictions.summary_lines(predictions.score(predicted, records=out))
    if dry_run and lines:
        lines.insert(0, "dry run (CPU, tiny sizes): the verdicts below exercise the code, they judge nothing")
    return lines or ["no GPU records to judge yet"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dlrm_study.gpu_check", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("results/gpu-run"), help="folder for the records")
    parser.add_argument("--budget-s", type=float, default=420.0, help="stop starting new points after this")
    parser.add_argument("--dry-run", action="store_true", help="on the CPU at tiny sizes (CI)")
    parser.add_argument("--skip-tests", action="store_true")
    parser.add_argument(
        "--predictions", type=Path, default=Path("results"), help="folder of gpu_predictions.csv to score"
    )
    args = parser.parse_args(argv)
    start = time.monotonic()
    try:
        if not args.dry_run and not torch.cuda.is_available():
            raise UsageError("no CUDA GPU here: run on a GPU machine, or pass --dry-run")
        args.out.mkdir(parents=True, exist_ok=True)
        name = torch.cuda.get_device_name() if torch.cuda.is_available() and not args.dry_run else "cpu (dry run)"
        print(f"gpu_check on {name}: torch {torch.__version__}, commit {results.git_commit()}, out {args.out}")
        lines = [] if args.skip_tests else [run_tests(args.dry_run)]
        try:
            embedding_records(args.out, args.dry_run)
        except Exception as err:  # the grid still runs (see run_sweep)
            lines.append(f"embedding benchmark: STOPPED by {type(err).__name__}: {first_line(err)}")
            print(lines[-1], flush=True)
        deadline = start + args.budget_s
        for spec in sweeps(args.out, args.dry_run):
            line = run_sweep(spec, deadline)
            print(line, flush=True)
            lines.append(line)
    except UsageError as err:
        print(f"gpu_check: {err}", file=sys.stderr)
        return 2
    verdicts = summary(args.out, args.dry_run, args.predictions)
    text = "\n".join([*lines, "", *verdicts, f"total {time.monotonic() - start:.0f} s"]) + "\n"
    (args.out / "summary.txt").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
