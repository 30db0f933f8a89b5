"""`dlrm-study train` and `dlrm-study bench`.

Bad input (a config, an option, a file) and faults (a full disk, a folder gone, a kernel build held too
long) end with one line on stderr and exit code 2, Ctrl-C with one line and exit code 130; so does any other
failure, in one line (DLRM_STUDY_TRACEBACK=1 shows its traceback instead).
"""

import argparse
import json
import math
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from dlrm_study import config, settings
from dlrm_study.config import Precision
from dlrm_study.config.variants import CPU_LOOPS
from dlrm_study.errors import Fault, UsageError
from dlrm_study.measure import limits as machine_limits
from dlrm_study.perfmodel import roofline
from dlrm_study.records import columns as col
from dlrm_study.records import outputs, provenance, store
from dlrm_study.records.record import make_record

USAGE_ERROR = 2
MAX_TIMEOUT_S = 86_400.0  # a day: beyond it, a silent peer is a hang (and timedelta overflows far above)


class Parser(argparse.ArgumentParser):
    """argparse that reports a bad option as a UsageError (one line, exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def common_options(parser: argparse.ArgumentParser, steps: int, out: str) -> None:
    parser.add_argument("--config", help=f"preset ({', '.join(config.PRESETS)}) or YAML file (default: tiny)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override, e.g. model.embedding_dim=32"
    )
    parser.add_argument("--steps", type=int, help=f"training steps (default {steps}, or what --set train.steps says)")
    parser.set_defaults(default_steps=steps)
    parser.add_argument("--device", choices=config.DEVICES, help="cpu, cuda or auto")
    parser.add_argument("--loop", help=f"training loop ({', '.join(config.LOOPS)})")
    parser.add_argument("--precision", help=f"{', '.join(config.PRECISIONS)} (bf16 needs --loop optimized or gpu)")
    parser.add_argument(
        "--placement",
        help=f"gpu loop: where tables live ({', '.join((*config.PLACEMENTS, *config.TORCHREC_PLACEMENTS))}, auto; "
        "or one per table, comma-separated)",
    )
    parser.add_argument("--cache-fraction", type=float, help="cached placement: share of rows cached on the device")
    parser.add_argument("--cache-policy", help=f"cached placement: {', '.join(config.CACHE_POLICIES)}")
    parser.add_argument("--seed", type=int, help="seed of initialisation and data")
    parser.add_argument("--threads", type=int, help="intra-op threads (default: torch's)")
    parser.add_argument(
        "--data", metavar="TSV", help="train on Criteo click logs: a TSV file (.gz too) or a folder of day_N[.gz] files"
    )
    parser.add_argument("--skip-bad-lines", action="store_true", help="count malformed Criteo lines instead of failing")
    parser.add_argument("--out", default=out, help="CSV the record is appended to (default %(default)s)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--distributed", action="store_true", help="hybrid-parallel over the ranks of torchrun (see README)"
    )
    parser.add_argument("--route", choices=("own", "torchrec"), default="own", help="distributed engine")
    parser.add_argument(
        "--remote-tables", action="store_true", help="under torchrun: rank 0 trains, ranks 1.. serve the tables"
    )
    parser.add_argument(
        "--timeout-s", type=float, default=120.0, help="distributed: a rank silent this long ends the run"
    )


def build_parser() -> Parser:
    parser = Parser(prog="dlrm-study", description="DLRM training efficiency study.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    train = commands.add_parser("train", help="train a config, evaluate AUC, write a record")
    common_options(train, steps=300, out="results/train.csv")
    train.add_argument(
        "--checkpoint", type=Path, help="save a checkpoint here at the end (and every --checkpoint-every)"
    )
    train.add_argument("--checkpoint-every", type=int, default=0, metavar="N")
    train.add_argument("--resume", type=Path, help="continue from this checkpoint up to --steps in total")
    train.add_argument("--log-every", type=int, default=50, metavar="N", help="print the loss every N steps")

    bench = commands.add_parser(
        "bench", help="time training steps in repeats, break them down per operator, one record per repeat"
    )
    common_options(bench, steps=20, out="results/bench.csv")
    bench.add_argument("--repeats", type=int, default=3, help="measurements, each warmed up (default %(default)s)")
    bench.add_argument("--warmup", type=int, default=3, help="untimed steps first (default %(default)s)")
    bench.add_argument("--profile-steps", type=int, default=2, help="profiled steps for the breakdown")
    bench.add_argument("--study", default="bench", help="study name in the record")
    bench.add_argument(
        "--roofline", choices=("full", "quick", "off"), default="full", help="measure the bound first (default full)"
    )
    # A study that launches this process reads one repeat's fields back from this file.
    bench.add_argument("--fields-json", type=Path, help=argparse.SUPPRESS)

    roof = commands.add_parser(
        "roofline", help="measure this machine's limits (anew: the cache keeps the best) and a config's lower bound"
    )
    roof.add_argument("--config", help="preset or YAML file (default: tiny)")
    roof.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    roof.add_argument("--loop", help=f"training loop ({', '.join(config.LOOPS)})")
    roof.add_argument("--precision", help=", ".join(config.PRECISIONS))
    roof.add_argument("--quick", action="store_true", help="a rough measurement in a few seconds")
    roof.add_argument("--out", default="results/roofline.csv", help="CSV the record is appended to")

    bound = commands.add_parser(
        "bound", help="probe this CPU's peaks and memory lines and write a config's physical bound (a record)"
    )
    bound.add_argument("--config", help="preset or YAML file (default: tiny)")
    bound.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    bound.add_argument("--precision", help=", ".join(config.PRECISIONS))
    bound.add_argument("--loop", default="optimized", help=argparse.SUPPRESS)  # any loop's bound: bf16's loop validates
    bound.add_argument("--threads", type=int, help="threads the probes use (default: torch's)")
    bound.add_argument("--quick", action="store_true", help="fewer steps of ids probed")
    bound.add_argument("--out", default="results/bounds.csv", help="CSV the record is appended to")

    compare = commands.add_parser("compare", help="reference vs optimized fp32/bf16 vs torchrec, side by side")
    compare.add_argument("--configs", default="dlrm-benchmark,mlperf-scaled,kaggle", help="comma-separated presets")
    compare.add_argument("--variants", default=",".join(CPU_LOOPS), help="comma-separated variants")
    compare.add_argument(
        "--repeats", "--rounds", type=int, default=3, help="repeats, variants interleaved (default %(default)s)"
    )
    compare.add_argument("--steps", type=int, default=10, help="timed steps per bench (default %(default)s)")
    compare.add_argument("--warmup", type=int, default=2)
    compare.add_argument("--out", default="results/bench.csv")
    compare.add_argument(
        "--roofline", choices=("full", "quick"), default="full", help="measure the bound first (default full)"
    )
    compare.add_argument("--no-progress", action="store_true")

    readme = commands.add_parser("readme", help="rewrite the README's generated section from the records")
    readme.add_argument("--readme", type=Path, default=Path("README.md"))
    readme.add_argument("--results", type=Path, default=Path("results"), help="records folder (default results)")
    readme.add_argument("--profile", default="quick", help="whose studies' records (default quick)")

    commands.add_parser(
        "fingerprint", help="today's code fingerprint of each loop, and the rules' id (what records and verdicts name)"
    )

    predict = commands.add_parser(
        "predict", help="append the GPU model's predictions (H1-H4) at the GPU script's points, before measuring"
    )
    predict.add_argument("--device", default="h200", help="a described GPU: h200 or a100-80gb (default %(default)s)")
    predict.add_argument("--results", type=Path, default=Path("results"), help="records folder (default results)")
    predict.add_argument("--profile", default="quick", help="the GPU script's points: quick, or smoke (its dry run)")
    predict.add_argument(
        "--measured-bandwidths", action="store_true", help="the GPU script's measured bandwidths, not the datasheet's"
    )

    old = commands.add_parser(
        "baseline-2020", help="the 2020 reference step on torch 1.5.1 beside today's loops (make baseline-2020)"
    )
    old.add_argument("--python", type=Path, default=None, help="the 2020 stack's Python (default .venv-2020)")
    old.add_argument("--results", type=Path, default=Path("results"), help="records folder (default results)")
    old.add_argument("--profile", default="quick", help="smoke, quick (default) or full")
    old.add_argument("--no-progress", action="store_true")

    sweep = commands.add_parser("sweep", help="run a sweep file: resumable, one record per point")
    sweep.add_argument("file", type=Path, help="sweep YAML (see dlrm_study.measure.sweep)")
    sweep.add_argument("--retry-errors", action="store_true", help="run again the points that failed")
    sweep.add_argument("--dry-run", action="store_true", help="list the points, run nothing")
    sweep.add_argument("--no-progress", action="store_true")
    return parser


def load_config(args: argparse.Namespace) -> config.Config:
    """The config from --config and --set, with the shortcut options applied last, as given (not parsed)."""
    default_steps = [f"train.steps={args.default_steps}"] if hasattr(args, "default_steps") else []
    cfg = config.load(args.config or "tiny", [*default_steps, *args.set])
    if getattr(args, "steps", None) is not None:
        config.set_field(cfg, "train.steps", steps_of(args))
    for option in ("device", "loop", "precision", "seed", "threads", "placement", "cache_fraction", "cache_policy"):
        value = getattr(args, option, None)
        if value is not None:
            config.set_field(cfg, f"train.{option}", value)
    if getattr(args, "data", None):  # a path is taken literally: `--data yes` reads the file named yes
        config.set_field(cfg, "data.source", "criteo")
        config.set_field(cfg, "data.path", args.data)
    if getattr(args, "skip_bad_lines", False):
        config.set_field(cfg, "data.skip_bad_lines", True)
    return config.validate(cfg)


def steps_of(args: argparse.Namespace) -> int:
    """--steps, or the command's default (a resumed run's total)."""
    if args.steps is not None and args.steps <= 0:
        raise UsageError(f"--steps must be positive, got {args.steps}")
    return args.default_steps if args.steps is None else args.steps


def check_setup(args: argparse.Namespace) -> None:
    """What every training command refuses before any work: its outputs, its timeout, two setups at once."""
    if getattr(args, "out", None):
        outputs.check_records_file(Path(args.out))
    if getattr(args, "checkpoint", None):
        outputs.check_writable(args.checkpoint, "--checkpoint")
    if getattr(args, "distributed", False) and args.remote_tables:
        raise UsageError("--distributed and --remote-tables are two setups: choose one")
    timeout = getattr(args, "timeout_s", 1.0)
    if not (math.isfinite(timeout) and 0 < timeout <= MAX_TIMEOUT_S):
        raise UsageError(f"--timeout-s must be a positive number of seconds up to {MAX_TIMEOUT_S:,}, got {timeout}")


def check_remote(cfg: config.Config) -> None:
    """--remote-tables: servers hold fp32 tables in CPU memory (refused here, on every rank, before rpc starts)."""
    if cfg.train.precision != Precision.FP32:
        raise UsageError("--remote-tables serves fp32 tables only (train.precision=fp32)")
    if cfg.train.device != "cpu":
        raise UsageError("--remote-tables trains on the CPU (train.device=cpu)")


def cmd_train(args: argparse.Namespace) -> None:
    if args.log_every <= 0 or args.checkpoint_every < 0:
        raise UsageError("--log-every must be positive and --checkpoint-every not negative")
    check_setup(args)
    if args.distributed:
        from dlrm_study.measure.distributed import train_main

        if args.checkpoint_every:
            raise UsageError("--checkpoint-every is for one process; --distributed saves --checkpoint at the end")

        cfg = None if args.resume else load_config(args)
        out = Path(args.out) if args.out else Path("results/train.csv")
        steps = cfg.train.steps if cfg else steps_of(args)
        train_main(cfg, steps, out, args.timeout_s, args.checkpoint, args.resume, args.route, args.log_every)
    elif args.remote_tables:
        from dlrm_study.distributed import remote

        if not args.resume:
            check_remote(load_config(args))
        remote.run(args.timeout_s, lambda make_arch: train_one(args, make_arch))
    else:
        train_one(args)


def train_one(args: argparse.Namespace, make_arch=None) -> None:
    """Training in this process (its tables local, or on parameter servers through `make_arch`)."""
    from dlrm_study.measure.training import train_and_record
    from dlrm_study.model.tables import make_sparse_arch
    from dlrm_study.train import build

    make_arch = make_arch or make_sparse_arch
    run = resumed(args, make_arch) if args.resume else build(load_config(args), make_arch)
    out = Path(args.out) if args.out else None
    train_and_record(run, out, args.checkpoint, args.checkpoint_every, args.log_every, not args.no_progress)


def resumed(args: argparse.Namespace, make_arch):  # -> train.Run
    """The run of `--resume`'s checkpoint, to be trained up to `--steps` in total; its config is its own."""
    from dlrm_study.train import checkpoint as ckpt

    names = ("config", "set", "loop", "precision", "seed", "data", "placement", "cache_fraction", "cache_policy")
    changed = [f"--{name}" for name in names if getattr(args, name) not in (None, [])]
    if changed:
        raise UsageError(f"--resume continues the checkpoint's own config: drop {', '.join(changed)}")
    run = ckpt.load(args.resume, device=args.device, make_arch=make_arch)
    run.cfg.train.steps = steps_of(args)
    if run.cfg.train.steps < run.step:
        raise UsageError(f"--steps {run.cfg.train.steps} is the total to reach; {args.resume} is at step {run.step}")
    print(f"resumed {args.resume} at step {run.step}", file=sys.stderr)
    return run


def cmd_bench(args: argparse.Namespace) -> None:
    if args.warmup < 0 or args.profile_steps < 0 or args.repeats <= 0:
        raise UsageError("--repeats must be positive, --warmup and --profile-steps not negative")
    check_setup(args)
    cfg = load_config(args)
    if args.distributed:
        from dlrm_study.measure.distributed import bench_main

        if args.route != "own":
            raise UsageError("bench --distributed measures the own route (--route own)")
        bench_main(
            cfg,
            cfg.train.steps,
            args.warmup,
            args.repeats,
            Path(args.out),
            args.timeout_s,
            args.study,
            args.fields_json,
        )
    elif args.remote_tables:
        from dlrm_study.distributed import remote

        check_remote(cfg)
        remote.run(args.timeout_s, lambda make_arch: bench_one(args, cfg, make_arch))
    else:
        bench_one(args, cfg)


def bench_one(args: argparse.Namespace, cfg: config.Config, make_arch=None) -> None:
    """The benchmark in this process (tables local, or remote through `make_arch`): repeats, one record each."""
    from dlrm_study.measure.bench import bench_repeats, measure_once
    from dlrm_study.model.tables import make_sparse_arch
    from dlrm_study.report.console import bench_summary

    limits = None
    if args.roofline != "off":  # measured first, on an idle process, before the model is built
        limits = machine_limits.measure_limits(**roofline.needs(cfg), quick=args.roofline == "quick")
    make_arch = make_arch or make_sparse_arch
    protocol = (cfg.train.steps, args.warmup, args.profile_steps)
    if args.fields_json:  # one repeat, handed back to the study that launched this process
        args.fields_json.write_text(json.dumps(measure_once(cfg, *protocol, limits, make_arch)))
        return
    out = Path(args.out) if args.out else None
    records = bench_repeats(cfg, args.repeats, *protocol, out, args.study, limits, make_arch, not args.no_progress)
    print("\n".join(bench_summary(records, args.repeats, args.profile_steps)))
    if out:
        print(f"{len(records)} records appended to {out}")


def cmd_roofline(args: argparse.Namespace) -> None:
    check_setup(args)
    cfg = load_config(args)
    limits = machine_limits.measure_limits(**roofline.needs(cfg), quick=args.quick, fresh=True)
    print(roofline.roofline_report(cfg, limits))
    paired = machine_limits.versus_embedding_bag(cfg, limits, args.quick)  # a check, not a limit
    if paired:
        print(machine_limits.paired_line(paired))
    if args.out:
        fields = {"quick": args.quick, **limits, **roofline.iteration_work(cfg), **roofline.bound_ms(cfg, limits)}
        fields |= roofline.rates(cfg, limits) | paired
        fields[col.THREADS] = int(fields[col.THREADS])
        store.append(Path(args.out), make_record("roofline", fields, cfg))
        print(f"record appended to {args.out}")


def cmd_bound(args: argparse.Namespace) -> None:
    import torch

    from dlrm_study.measure import physical

    check_setup(args)
    cfg = load_config(args)  # --threads checked there (train.threads)
    fields = physical.measure_bound(cfg, cfg.train.threads or torch.get_num_threads(), args.quick)
    print(physical.report(cfg, fields))
    if args.out:
        store.append(Path(args.out), make_record("bound", fields, cfg))
        print(f"record appended to {args.out}")


def cmd_compare(args: argparse.Namespace) -> None:
    from dlrm_study.analysis.compare import report
    from dlrm_study.config.variants import REGISTRY
    from dlrm_study.studies.compare import compare

    presets, variants = args.configs.split(","), args.variants.split(",")
    for name in presets:
        config.preset(name)  # an unknown preset fails here, before anything is measured
    unknown = [v for v in variants if v not in REGISTRY]
    if unknown:
        raise UsageError(f"unknown variant {unknown[0]!r} (choose from {', '.join(REGISTRY)})")
    if args.repeats <= 0 or args.steps <= 0 or args.warmup < 0:
        raise UsageError("--repeats and --steps must be positive, --warmup not negative")
    check_setup(args)
    out = Path(args.out) if args.out else None
    records = compare(presets, variants, args.repeats, args.steps, args.warmup, out, not args.no_progress,
                      quick_limits=args.roofline == "quick")  # fmt: skip
    print(report(records))
    if out:
        print(f"{len(records)} records appended to {out}")


def cmd_readme(args: argparse.Namespace) -> None:
    from dlrm_study.plans.profiles import profile
    from dlrm_study.report.ledger import write_readme

    if not args.results.is_dir():
        raise UsageError(f"--results {args.results}: not a folder")
    config.read_text(args.readme, "--readme")  # exists, a file, UTF-8
    outputs.check_writable(args.readme, "--readme")
    changed = write_readme(args.readme, args.results, profile(args.profile))
    print(f"{args.readme}: generated section {'rewritten' if changed else 'unchanged'}")


def cmd_fingerprint(args: argparse.Namespace) -> None:
    from dlrm_study.records import code_identity

    for loop, fp in code_identity.loop_fingerprints().items():
        code = code_identity.today(loop)
        print(f"{loop} {fp}" + (f" (declared to run its step as {code} did)" if code != fp else ""))
    print(f"rules {provenance.rules_hash() or 'unknown (src/dlrm_study/rules/ has no rules.toml or golden.json)'}")


def cmd_predict(args: argparse.Namespace) -> None:
    from dlrm_study.analysis import predictions
    from dlrm_study.perfmodel import gpu as gpu_model

    if args.device not in gpu_model.DEVICES:
        raise UsageError(f"--device {args.device!r}: no description (choose from {', '.join(gpu_model.DEVICES)})")
    if args.profile not in ("quick", "smoke"):
        raise UsageError(f"--profile {args.profile!r}: the GPU script has points for quick and smoke only")
    if not args.results.is_dir():
        raise UsageError(f"--results {args.results}: not a folder")
    for row in gpu_model.published_check():
        print(
            f"published check: {row['device']} {row['math']}, batch {row['batch']:,}: "
            f"{row['published_samples_per_s']:,.0f} samples/s = {row['efficiency']:.2f} of the bound "
            f"({row['bound_samples_per_s']:,.0f})"
        )
    path, written = predictions.predict(args.profile, args.results, args.device, args.measured_bandwidths)
    if written:
        print(f"{path}: {written} predictions appended (commit {provenance.git_commit()})")
    else:
        print(f"{path}: this commit's predictions are already there; nothing appended")


def cmd_baseline(args: argparse.Namespace) -> None:
    from dlrm_study.plans.profiles import profile
    from dlrm_study.studies import baseline

    if not args.results.is_dir():
        raise UsageError(f"--results {args.results}: not a folder")
    python = args.python or baseline.PYTHON_2020
    counts = baseline.run(profile(args.profile), args.results, python, not args.no_progress)
    print(f"baseline-2020: {counts} -> {args.results / 'baseline.csv'}")


def cmd_sweep(args: argparse.Namespace) -> None:
    from dlrm_study.measure import sweep as sweeps
    from dlrm_study.plans import sweep as sweep_plan

    spec = sweep_plan.load(args.file)
    if args.dry_run:
        for point in sweep_plan.points(spec):
            print(f"{point.variant:<16} {' '.join(point.overrides)}")
        return
    counts = sweeps.run(spec, retry_errors=args.retry_errors, progress=not args.no_progress)
    print(f"sweep {spec.name}: {counts} -> {spec.out}")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        commands = {
            "train": cmd_train,
            "bench": cmd_bench,
            "roofline": cmd_roofline,
            "bound": cmd_bound,
            "compare": cmd_compare,
            "sweep": cmd_sweep,
            "readme": cmd_readme,
            "fingerprint": cmd_fingerprint,
            "predict": cmd_predict,
            "baseline-2020": cmd_baseline,
        }
        commands[args.command](args)
    except (UsageError, Fault) as err:
        print(f"dlrm-study: error: {err}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        print("dlrm-study: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader stopped reading (`| head`): nothing is wrong, and nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush would raise again
        return 128 + signal.SIGPIPE
    except Exception as err:  # what no layer named: still one line, the file and the cause where it is a file's
        if settings.current().traceback:
            raise
        print(f"dlrm-study: error: {unexpected(err)}", file=sys.stderr)
        return USAGE_ERROR
    return 0


def unexpected(err: Exception) -> str:
    """One line for a failure no layer turned into a UsageError or a Fault."""
    if isinstance(err, OSError) and err.filename:
        return f"{err.filename}: {err.strerror or err}"
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0] if lines else 'no message'} (DLRM_STUDY_TRACEBACK=1 shows where)"


if __name__ == "__main__":
    sys.exit(main())
