"""The ``avdgp`` command line: ``demo``, ``fit`` and ``bench`` (also ``python -m gpflux_avdgp``).

Bad input (missing file, malformed data, unknown option, impossible setting) ends with a
one-line message on stderr and exit status 2, never a traceback. Set ``AVDGP_DEBUG=1`` to see
the traceback of an unexpected error.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Optional, Sequence

__all__ = ["main", "build_parser"]

EXIT_BAD_INPUT = 2
EXIT_DIVERGED = 3
EXIT_INTERNAL = 1


class UsageError(Exception):
    """Bad command-line input; the message is printed as one line."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line (no usage dump) and exit status 2."""

    def error(self, message: str):  # noqa: D401 - argparse API
        raise UsageError(f"{self.prog}: {message} (see '{self.prog} --help')")


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        values = []
    if not values:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")
    return values


def _checked(convert, accept, expected: str):
    """An argparse type: ``convert`` the text, then require ``accept(value)``."""

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not accept(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


_positive_int = _checked(int, lambda v: v > 0, "a positive integer")
_positive_float = _checked(float, lambda v: 0 < v < float("inf"), "a positive number")
_fraction = _checked(float, lambda v: 0 <= v < 1, "a number in [0, 1)")


def _target(text: str) -> int | str:
    try:
        return int(text)
    except ValueError:
        return text


MODEL_CHOICES = ("avdgp", "sgp-avi", "idsgp", "svgp", "dsdgp", "dspp")
RULE_CHOICES = ("ar1", "ar2", "ar2p", "ar2pp")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="avdgp",
        description="Amortized variational deep Gaussian processes: demo, fit and benchmark.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    demo = commands.add_parser(
        "demo",
        help="the paper's toy 'DGP' classification problem (no download)",
        description="Train SGP-AVI and AVDGP with 2 and 3 layers on the toy 'DGP' letters "
        "problem, print test error rates and write PNG figures.",
    )
    demo.add_argument("--out", default="avdgp-demo", help="output folder (default: avdgp-demo)")
    demo.add_argument(
        "--full",
        action="store_true",
        help="the paper's settings: 40000 training points, 100 epochs, S = 32 (slow on CPU)",
    )
    demo.add_argument("--epochs", type=_positive_int, help="epochs per model (default 40)")
    demo.add_argument(
        "--num-points", type=_positive_int, help="rows generated, split 3:2:1 (default 12000)"
    )
    demo.add_argument(
        "--total-inducing", type=_positive_int, help="|M| summed over layers (default 32)"
    )
    demo.add_argument("--seed", type=int, default=0, help="data and model seed (default 0)")
    demo.add_argument("--quiet", action="store_true", help="no progress output")

    fit = commands.add_parser(
        "fit",
        help="train one model on your data and report test metrics",
        description="Train one model on DATA: a CSV/CSV.gz file (header optional), an .npz "
        "with X and y, or a folder with data.csv.gz and test_mask.csv.gz. Inputs (and "
        "regression targets) are standardised with training statistics; metrics are "
        "reported in standardised units and in original units.",
    )
    fit.add_argument("data", metavar="DATA")
    fit.add_argument(
        "--target", type=_target, default=-1, help="target column: index or header name (-1)"
    )
    fit.add_argument("--task", choices=("regression", "classification"), default="regression")
    fit.add_argument("--model", choices=MODEL_CHOICES, default="avdgp")
    fit.add_argument("--rule", choices=RULE_CHOICES, default="ar2p", help="avdgp rule (ar2p)")
    fit.add_argument("--layers", type=_positive_int, default=3, help="GP layers (deep models)")
    fit.add_argument("--hidden-dims", type=_int_list, help="intermediate widths (16,4)")
    fit.add_argument("--inducing", type=_int_list, help="inducing points per layer (8,4,4)")
    fit.add_argument("--points", type=_positive_int, default=32, help="S, sigma points (32)")
    fit.add_argument("--epochs", type=_positive_int, default=100)
    fit.add_argument("--batch-size", type=_positive_int, default=100)
    fit.add_argument("--learning-rate", type=_positive_float, default=0.005)
    fit.add_argument("--seed", type=int, default=0)
    fit.add_argument("--split", type=int, help="test-mask column of a UCI folder")
    fit.add_argument("--test-fraction", type=_fraction, default=0.1)
    fit.add_argument("--val-fraction", type=_fraction, default=0.1)
    fit.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    fit.add_argument("--save", metavar="DIR", help="save weights, model and run.json here")
    fit.add_argument("--json", metavar="FILE", help="write the result record as JSON")
    fit.add_argument("--quiet", action="store_true", help="no progress output")

    bench = commands.add_parser(
        "bench",
        help="the paper's benchmark protocol (resumable)",
        description="Train and score models over data sets and seeds with the paper's "
        "protocol (8:1:1 splits, Adam 0.005, batch 100/500); writes results.csv, tables.md "
        "and PNG plots; finished runs are skipped when rerun.",
    )
    bench.add_argument("--datasets", default="elevators", help="comma-separated names or paths")
    bench.add_argument(
        "--models",
        default="svgp,dsdgp,dspp,idsgp,avdgp-ar2p,avdgp-ar2pp",
        help="comma-separated models (avdgp-ar1|ar2|ar2p|ar2pp, svgp, dsdgp, dspp, idsgp, "
        "sgp-avi)",
    )
    bench.add_argument("--seeds", type=_int_list, default=[0, 1, 2, 3, 4])
    bench.add_argument("--epochs", type=_positive_int, default=100)
    bench.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    bench.add_argument("--max-rows", type=_positive_int, help="subsample larger data sets")
    bench.add_argument("--data-root", help="folder of UCI data sets (../shared/data/uci)")
    bench.add_argument("--out", default="avdgp-bench", help="output folder (avdgp-bench)")
    bench.add_argument("--quiet", action="store_true", help="no progress output")
    return parser


def _stream(args) -> Optional[object]:
    return None if args.quiet else sys.stderr


def _demo(args) -> int:
    from .experiments.demo import demo_settings, run_demo

    settings = demo_settings(
        args.full,
        epochs=args.epochs,
        num_points=args.num_points,
        total_inducing=args.total_inducing,
        seed=args.seed,
    )
    run_demo(settings, args.out, stream=_stream(args))
    return 0


def _fit(args) -> int:
    from .experiments.data import Standardizer, check_binary_targets, load_dataset, split_dataset
    from .experiments.runner import TrainConfig, run, standardise_split
    from .experiments.zoo import ModelSpec

    _check_output_paths(args.json, args.save)
    dataset = load_dataset(args.data, target=args.target)
    classification = args.task == "classification"
    if classification:
        dataset = dataclasses.replace(dataset, targets=check_binary_targets(dataset.targets))
    split = split_dataset(
        dataset,
        seed=args.seed,
        split=args.split,
        test_fraction=args.test_fraction,
        val_fraction=args.val_fraction,
    )
    scaler = Standardizer.fit(split.x_train, split.y_train, standardize_targets=not classification)
    split = standardise_split(split, scaler)
    spec = ModelSpec(
        model=args.model,
        rule=args.rule if args.model == "avdgp" else None,
        task=args.task,
        num_layers=args.layers,
        hidden_dims=args.hidden_dims,
        num_inducing=args.inducing,
        num_points=args.points,
        seed=args.seed,
    )
    spec.resolved_dims(), spec.resolved_inducing()  # validate before loading TF graphs
    config = TrainConfig(
        epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        seed=args.seed,
        dtype=args.dtype,
    )
    record = run(
        spec,
        split,
        config,
        dataset=dataset.name,
        standardizer=None if classification else scaler,
        stream=_stream(args),
        save_dir=Path(args.save) if args.save else None,
    )
    _print_record(record)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(record, indent=2))
    return 0


def _check_output_paths(json_file: Optional[str], save_dir: Optional[str]) -> None:
    """Fail before training, not after, when an output cannot be written."""
    if json_file is not None:
        path = Path(json_file)
        if path.is_dir():
            raise UsageError(f"avdgp fit: --json {json_file}: is a folder, expected a file name")
        parent = path.parent if str(path.parent) else Path(".")
        if parent.exists() and not os.access(parent, os.W_OK):
            raise UsageError(f"avdgp fit: --json {json_file}: folder {parent} is not writable")
    if save_dir is not None:
        path = Path(save_dir)
        if path.exists() and not path.is_dir():
            raise UsageError(f"avdgp fit: --save {save_dir}: is a file, expected a folder")
        existing = next((p for p in [path, *path.parents] if p.exists()), Path("."))
        if not os.access(existing, os.W_OK):
            raise UsageError(f"avdgp fit: --save {save_dir}: {existing} is not writable")


def _print_record(record: dict) -> None:
    test = record["test"]
    scores = ", ".join(f"{key} {value:.4f}" for key, value in test.items())
    print(
        f"{record['label']} on {record['dataset']} (n_train {record['n_train']}, n_test "
        f"{record['n_test']}, D {record['dim']}, {record['epochs']} epochs)"
    )
    print(f"  test (standardised units): {scores}")
    if record.get("test_original_units"):
        original = ", ".join(
            f"{key} {value:.4f}" for key, value in record["test_original_units"].items()
        )
        print(f"  test (original units):     {original}")
    print(
        f"  {record['train_seconds_per_epoch']:.2f} s/epoch (first epoch "
        f"{record['first_epoch_seconds']:.1f} s), predict {record['predict_seconds']:.2f} s"
    )


def _bench(args) -> int:
    from .experiments.bench import BenchSettings, run_bench
    from .experiments.zoo import parse_model_name

    models = [name for name in args.models.split(",") if name.strip()]
    for name in models:
        parse_model_name(name)  # unknown names fail before any training
    datasets = [name.strip() for name in args.datasets.split(",") if name.strip()]
    if not datasets:
        raise UsageError("avdgp bench: --datasets is empty")
    settings = BenchSettings(
        datasets=datasets,
        models=models,
        seeds=args.seeds,
        epochs=args.epochs,
        dtype=args.dtype,
        data_root=args.data_root,
        max_rows=args.max_rows,
    )
    tables = run_bench(settings, args.out, stream=_stream(args))
    print(tables.read_text())
    print(f"Results in {Path(args.out)}/ (results.csv, tables.md, nll/rmse/crps.png)")
    return 0


COMMANDS = {"demo": _demo, "fit": _fit, "bench": _bench}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit status."""
    try:  # TF_CPP_MIN_LOG_LEVEL is set for the CLI by gpflux_avdgp._quiet_tensorflow
        import tensorflow as tf

        tf.get_logger().setLevel("ERROR")  # retracing notices are not the user's concern
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except UsageError as error:
        print(str(error), file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("avdgp: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - the CLI turns every error into one line
        if os.environ.get("AVDGP_DEBUG"):
            raise
        return _report(error)


def _report(error: Exception) -> int:
    from .experiments.data import DataError
    from .experiments.runner import TrainingDiverged

    message = " ".join(str(error).split()) or type(error).__name__
    if isinstance(error, TrainingDiverged):
        print(f"avdgp: training diverged: {message}", file=sys.stderr)
        return EXIT_DIVERGED
    if isinstance(error, (DataError, ValueError, OSError)):
        print(f"avdgp: error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(
        f"avdgp: internal error: {type(error).__name__}: {message[:500]} "
        "(set AVDGP_DEBUG=1 for the traceback)",
        file=sys.stderr,
    )
    return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
