"""The ``avdgp`` command line: ``demo``, ``fit``, ``bench``, ``predict`` and ``export`` (also
``python -m gpflux_avdgp``).

Bad input (missing file, malformed data, unknown option, impossible setting) ends with a
one-line message on stderr and exit status 2, never a traceback. Set ``AVDGP_DEBUG=1`` to see
the traceback of an unexpected error.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from .distribute import STRATEGY_NAMES

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
_non_negative_int = _checked(int, lambda v: v >= 0, "a non-negative integer")
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
        description="Amortized variational deep Gaussian processes: demo, fit, benchmark, "
        "predict with and export saved models.",
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
    demo.add_argument(
        "--preset",
        choices=("default", "paper"),
        default="default",
        help="'default': the package's defaults; 'paper': the paper's settings (inducing points "
        "start as noisy copies of the input, constant learning rate)",
    )
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
    _add_preset_arguments(fit)
    _add_steps_per_execution(fit)
    fit.add_argument("--seed", type=int, default=0)
    fit.add_argument("--split", type=int, help="test-mask column of a UCI folder")
    fit.add_argument("--test-fraction", type=_fraction, default=0.1)
    fit.add_argument("--val-fraction", type=_fraction, default=0.1)
    fit.add_argument(
        "--test-data",
        metavar="SHARDS",
        help="test CSV shards (glob pattern, folder or file); streams DATA as training shards",
    )
    fit.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    fit.add_argument("--save", metavar="DIR", help="save weights, model and run.json here")
    fit.add_argument("--json", metavar="FILE", help="write the result record as JSON")
    fit.add_argument("--quiet", action="store_true", help="no progress output")
    fit.add_argument(
        "--strategy",
        choices=STRATEGY_NAMES,
        default="default",
        help="data-parallel training with the loss trajectory of one device: 'mirrored' over "
        "this machine's GPUs (without GPUs: its CPU, split into $AVDGP_CPU_DEVICES logical "
        "devices), 'multiworker' over the cluster in $TF_CONFIG (run the same command on "
        "every worker; the chief prints and saves); default: one device",
    )

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
    _add_preset_arguments(bench)
    _add_steps_per_execution(bench)
    bench.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    bench.add_argument("--max-rows", type=_positive_int, help="subsample larger data sets")
    bench.add_argument("--data-root", help="folder of UCI data sets (../shared/data/uci)")
    bench.add_argument("--out", default="avdgp-bench", help="output folder (avdgp-bench)")
    bench.add_argument("--quiet", action="store_true", help="no progress output")

    predict = commands.add_parser(
        "predict",
        help="predict DATA with a model saved by 'avdgp fit --save'",
        description="Predict every row of DATA (the formats of 'fit') with the model in "
        "MODEL_DIR, in the targets' original units. DATA has the model's D feature columns, "
        "or D + 1 with the target column (dropped; --target picks it, default: the one "
        "used by 'fit'). Writes CSV: mean,std,lower_95,upper_95 (regression) or "
        "probability,label (classification), one row per DATA row.",
    )
    predict.add_argument("model_dir", metavar="MODEL_DIR")
    predict.add_argument("data", metavar="DATA")
    predict.add_argument("--out", metavar="FILE", help="CSV file to write (default: stdout)")
    predict.add_argument(
        "--target", type=_target, help="target column of DATA with D + 1 columns (as in fit)"
    )
    predict.add_argument("--batch-size", type=_positive_int, default=1000)

    export = commands.add_parser(
        "export",
        help="export a model saved by 'avdgp fit --save' as a TensorFlow SavedModel",
        description="Write a TensorFlow SavedModel with the signatures predict_f, predict_y "
        "and log_density that serves with TensorFlow alone (no gpflux_avdgp, GPflow or "
        "GPflux). It takes raw features and answers in the targets' original units.",
    )
    export.add_argument("model_dir", metavar="MODEL_DIR")
    export.add_argument("export_dir", metavar="EXPORT_DIR")
    return parser


def _add_steps_per_execution(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--steps-per-execution",
        type=_positive_int,
        default=1,
        metavar="K",
        help="training steps per call of Keras' train function: same results, less per-step "
        "overhead (1; e.g. 10 for small models; a NaN is then located to K batches)",
    )


def _add_preset_arguments(parser: argparse.ArgumentParser) -> None:
    """``--preset`` and the optimisation settings it sets, each overridable."""
    parser.add_argument(
        "--preset",
        choices=("default", "paper"),
        default="default",
        help="'default': the package's defaults (inducing points start global, cosine "
        "learning-rate decay, weights of the epoch with the best validation NLL); 'paper': "
        "the AVDGP paper's exact settings (docs/experiments/learning.md lists the differences)",
    )
    parser.add_argument(
        "--learning-rate", type=_positive_float, help="Adam's (initial) step size (0.005)"
    )
    parser.add_argument(
        "--schedule",
        choices=("constant", "cosine"),
        help="learning-rate schedule (default: cosine; paper: constant)",
    )
    parser.add_argument(
        "--restore-best",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="end with the weights of the epoch of lowest validation NLL (default: yes; "
        "paper: no); needs validation rows",
    )
    parser.add_argument(
        "--patience",
        type=_non_negative_int,
        metavar="N",
        help="with --restore-best, stop after N epochs without a better validation NLL "
        "(default: 20; paper: 0, train all epochs)",
    )


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
        preset=args.preset,
    )
    run_demo(settings, args.out, stream=_stream(args))
    return 0


def _fit(args) -> int:
    if _streams(args):
        return _fit_streaming(args)
    from .data import Standardizer, check_binary_targets, load_dataset, split_dataset
    from .distribute import is_chief, worker_name
    from .experiments.runner import run, standardise_split

    _check_output_paths(args.json, args.save)
    strategy = _fit_strategy(args.strategy)  # before TensorFlow runs any operation
    chief = strategy is None or is_chief(strategy)
    dataset = load_dataset(args.data, target=args.target)
    classification = args.task == "classification"
    classes = None
    if classification:
        classes = np.unique(dataset.targets).tolist()  # checked to be 2 just below
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
    spec = _model_spec(args)
    spec.resolved_dims(), spec.resolved_inducing()  # validate before loading TF graphs
    config = _train_config(args)
    with _one_line_warnings():
        record = run(
            spec,
            split,
            config,
            dataset=dataset.name,
            standardizer=scaler,  # classification: inputs only (y_mean 0, y_std 1)
            stream=_stream(args) if chief else None,
            save_dir=Path(args.save) if args.save else None,
            strategy=strategy,
        )
    if not chief:  # the chief prints the record and writes the files
        if not args.quiet:
            print(f"avdgp fit: {worker_name(strategy)} finished", file=sys.stderr)
        return 0
    if args.save:
        _record_data_columns(Path(args.save), args, dataset, classes)
    _print_record(record)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(record, indent=2))
    return 0


ENV_CPU_DEVICES = "AVDGP_CPU_DEVICES"


def _model_spec(args):
    """The :class:`~gpflux_avdgp.experiments.zoo.ModelSpec` of ``avdgp fit``."""
    from .experiments.zoo import ModelSpec

    return ModelSpec(
        model=args.model,
        rule=args.rule if args.model == "avdgp" else None,
        task=args.task,
        num_layers=args.layers,
        hidden_dims=args.hidden_dims,
        num_inducing=args.inducing,
        num_points=args.points,
        seed=args.seed,
        preset=args.preset,
    )


def _train_config(args):
    """The :class:`~gpflux_avdgp.experiments.runner.TrainConfig` of ``avdgp fit``."""
    from .experiments.runner import TrainConfig

    return TrainConfig.from_preset(
        args.preset,
        epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        schedule=args.schedule,
        restore_best=args.restore_best,
        patience=args.patience,
        seed=args.seed,
        dtype=args.dtype,
        steps_per_execution=args.steps_per_execution,
    )


@contextlib.contextmanager
def _one_line_warnings():
    """Show an :class:`~gpflux_avdgp.distribute.UnevenBatchesWarning` as one line."""
    from .distribute import UnevenBatchesWarning

    with warnings.catch_warnings():
        show = warnings.showwarning

        def one_line(message, category, filename, lineno, file=None, line=None):
            if not issubclass(category, UnevenBatchesWarning):
                return show(message, category, filename, lineno, file, line)
            print(f"avdgp fit: warning: {_one_line(message)}", file=sys.stderr)

        warnings.showwarning = one_line
        yield


def _fit_strategy(name: str):
    """The ``--strategy`` of ``fit`` (``None`` for ``default``); with ``$AVDGP_CPU_DEVICES``
    set, the CPU is first split into that many logical devices (MirroredStrategy on a machine
    without GPUs)."""
    from .distribute import TFConfigError, configure_cpu_devices, strategy_from_name

    cpus = os.environ.get(ENV_CPU_DEVICES, "").strip()
    if cpus:
        count = _checked(int, lambda v: v > 0, "a positive integer")
        try:
            configure_cpu_devices(count(cpus))
        except (argparse.ArgumentTypeError, ValueError) as error:
            raise UsageError(f"avdgp fit: ${ENV_CPU_DEVICES}: {_one_line(error)}") from None
    if name == "default":
        return None
    try:
        return strategy_from_name(name)
    except (TFConfigError, ValueError) as error:
        raise UsageError(f"avdgp fit: --strategy {name}: {_one_line(error)}") from None


def _streams(args) -> bool:
    """Whether ``fit`` streams DATA as CSV shards: with ``--test-data``, or when DATA is a glob
    pattern or a folder of CSV files without the UCI layout's ``data.csv(.gz)``."""
    from .data import has_glob_characters

    if args.test_data is not None:
        return True
    path = Path(args.data)
    if path.is_dir():
        uci = (path / "data.csv.gz").is_file() or (path / "data.csv").is_file()
        return not uci and any(
            child.is_file() and child.name.lower().endswith((".csv", ".csv.gz"))
            for child in path.iterdir()
        )
    return has_glob_characters(args.data) and not path.exists()


def _fit_streaming(args) -> int:
    """``fit`` on CSV shards streamed from disk: the training shards are scanned once (rows,
    standardiser) and streamed every epoch; the test shards (``--test-data``, else the last
    ``ceil(--test-fraction x shards)`` of DATA's) are streamed and scored chunk by chunk."""
    import math

    from .data import DataError, resolve_shards, scan_csv_shards
    from .experiments.streaming_runner import run_streaming

    _check_output_paths(args.json, args.save)
    if args.split is not None:
        raise UsageError(
            "avdgp fit: --split picks a test mask of a UCI folder; with CSV shards give "
            "--test-data or --test-fraction"
        )
    if getattr(args, "strategy", "default") != "default":
        raise UsageError("avdgp fit: --strategy is not supported with streamed CSV shards")
    if args.restore_best:
        raise UsageError(
            "avdgp fit: --restore-best needs a validation split, which streamed CSV shards do "
            "not have; leave it out (the last epoch's weights are kept)"
        )
    classification = args.task == "classification"
    spec = _model_spec(args)
    spec.resolved_dims(), spec.resolved_inducing()  # validate before reading the shards
    if args.patience:
        raise UsageError(
            "avdgp fit: --patience stops on the validation NLL, which streamed CSV shards do not "
            "have; leave it out"
        )
    config = dataclasses.replace(_train_config(args), restore_best=False, patience=None)
    shards = resolve_shards(args.data)
    if args.test_data is not None:
        train_shards, test_shards = shards, resolve_shards(args.test_data)
    else:
        if len(shards) < 2:
            raise UsageError(
                f"avdgp fit: DATA {args.data} names 1 CSV shard; give --test-data, or 2 or more "
                "shards (the last ceil(test fraction x shards) are the test set)"
            )
        num_test = max(1, math.ceil(args.test_fraction * len(shards) - 1e-9))
        if num_test >= len(shards):
            raise UsageError(
                f"avdgp fit: --test-fraction {args.test_fraction} of {len(shards)} shards leaves "
                "no training shard"
            )
        train_shards, test_shards = shards[:-num_test], shards[-num_test:]
    train = scan_csv_shards(train_shards, target=args.target)
    test = scan_csv_shards(test_shards, target=args.target)
    classes = None
    if classification:
        classes = train.target_classes()
        unseen = sorted(set(test.target_values) - set(classes))
        if unseen:
            raise DataError(
                f"{test.shards[0]}: the test targets take values the training targets do not: "
                f"{', '.join(f'{value:g}' for value in unseen[:10])}"
            )
    record = run_streaming(
        spec,
        train,
        test,
        config,
        dataset=args.data,
        standardizer=train.standardizer(standardize_targets=not classification),
        classes=classes,
        stream=_stream(args),
        save_dir=Path(args.save) if args.save else None,
    )
    if args.save:
        labels = None if classes is None else list(classes)
        _record_data_columns(Path(args.save), args, train, labels)
    _print_record(record)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(record, indent=2))
    return 0


def _record_data_columns(directory: Path, args, dataset, classes: Optional[list]) -> None:
    """Add the data layout to ``run.json``, for ``predict`` and ``export``: the target column,
    the feature and target names and (classification) the two original label values."""
    path = directory / "run.json"
    info = json.loads(path.read_text())
    info["data"] = {
        "target": args.target,
        "feature_names": dataset.feature_names,
        "target_name": dataset.target_name,
        "classes": classes,
    }
    path.write_text(json.dumps(info, indent=2))


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
        preset=args.preset,
        training={
            key: value
            for key, value in (
                ("learning_rate", args.learning_rate),
                ("schedule", args.schedule),
                ("restore_best", args.restore_best),
                ("patience", args.patience),
                ("steps_per_execution", args.steps_per_execution),
            )
            if value is not None
        },
    )
    tables = run_bench(settings, args.out, stream=_stream(args))
    print(tables.read_text())
    print(f"Results in {Path(args.out)}/ (results.csv, tables.md, nll/rmse/crps.png)")
    return 0


# ---------------------------------------------------------------------------------------------
# predict and export: models saved by ``fit --save``
# ---------------------------------------------------------------------------------------------

#: Levels of the central 95% predictive interval written by ``predict``.
INTERVAL_95 = (0.025, 0.975)


@dataclass
class SavedRun:
    """A model saved by ``avdgp fit --save`` with what ``run.json`` says about it.

    :param model: the Keras model, loaded from ``model.keras``.
    :param standardizer: the inputs' (and regression targets') standardiser.
    :param task: ``"regression"`` or ``"classification"``.
    :param dtype: ``"float64"`` or ``"float32"``.
    :param label: the model's label, e.g. ``"avdgp-ar2p"``.
    :param data: the data layout recorded by ``fit`` (``target``, ``feature_names``,
        ``target_name``, ``classes``); empty for runs saved before it was recorded.
    """

    model: Any
    standardizer: Any
    task: str
    dtype: str
    label: str
    data: dict

    @property
    def num_features(self) -> int:
        return int(self.model.inputs[0].shape[-1])


def _load_keras_model(path: Path, command: str):
    """``path`` (a ``.keras`` file) as a model; a file that does not load is a UsageError."""
    try:
        from .saving import ModelFileError, load_model
    except ImportError:  # before gpflux_avdgp.saving existed
        from gpflow.keras import tf_keras

        ModelFileError, load_model = (), tf_keras.models.load_model
    try:
        return load_model(str(path))
    except ModelFileError as error:
        raise UsageError(f"avdgp {command}: {_one_line(error)}") from error
    except Exception as error:  # noqa: BLE001 - a corrupt file fails in many ways
        raise UsageError(
            f"avdgp {command}: {path}: could not load the model ({type(error).__name__}: "
            f"{_one_line(error)[:300]})"
        ) from error


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _load_saved_run(model_dir: str, command: str) -> SavedRun:
    """Read ``MODEL_DIR`` (``run.json`` and ``model.keras``) or raise a one-line UsageError."""
    from .data import Standardizer
    from .experiments.runner import FLOAT_TYPES, float_type

    where = f"avdgp {command}: MODEL_DIR {model_dir}"
    directory = Path(model_dir)
    if not directory.exists():
        raise UsageError(f"{where}: no such folder")
    if not directory.is_dir():
        raise UsageError(f"{where}: is a file, expected a folder written by 'avdgp fit --save'")
    run_file = directory / "run.json"
    if not run_file.is_file():
        raise UsageError(
            f"avdgp {command}: {run_file}: missing; MODEL_DIR must be a folder written by "
            "'avdgp fit --save'"
        )
    try:
        info = json.loads(run_file.read_text())
        spec, result = info["spec"], info.get("result") or {}
        task, dtype = spec["task"], result.get("dtype", "float64")
        keras_file = info.get("keras_file", "model.keras")
        scaling = info.get("standardizer")
        data = info.get("data") or {}
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise UsageError(
            f"avdgp {command}: {run_file}: not a run description written by 'avdgp fit "
            f"--save' ({type(e).__name__}: {_one_line(e)[:200]})"
        ) from None
    if task not in ("regression", "classification") or dtype not in FLOAT_TYPES:
        raise UsageError(f"avdgp {command}: {run_file}: unknown task {task!r} or dtype {dtype!r}")
    label = result.get("label") or spec.get("model", "model")
    if keras_file is None:
        raise UsageError(
            f"{where}: holds no model.keras (the {label} model could not be serialised when it "
            "was saved); fit it again with a newer 'avdgp fit --save'"
        )
    model_file = directory / keras_file
    if not model_file.is_file():
        raise UsageError(f"avdgp {command}: {model_file}: missing")
    if scaling is None:
        raise UsageError(
            f"avdgp {command}: {run_file}: records no standardiser (saved by an older 'avdgp "
            "fit' for classification), so raw features cannot be mapped; fit it again with "
            "--save"
        )
    with float_type(dtype):
        model = _load_keras_model(model_file, command)
    try:
        standardizer = Standardizer(
            x_mean=np.asarray(scaling["x_mean"], dtype=np.float64),
            x_std=np.asarray(scaling["x_std"], dtype=np.float64),
            y_mean=float(scaling["y_mean"]),
            y_std=float(scaling["y_std"]),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise UsageError(
            f"avdgp {command}: {run_file}: bad standardizer ({type(e).__name__}: {e})"
        ) from None
    saved = SavedRun(model, standardizer, task, dtype, label, data)
    if standardizer.x_mean.shape != (saved.num_features,):
        raise UsageError(
            f"avdgp {command}: {run_file}: the standardizer has {standardizer.x_mean.size} "
            f"input means, the model takes {saved.num_features} features"
        )
    return saved


def _feature_columns(data: str, num_features: int, target) -> np.ndarray:
    """Read DATA's feature columns ``[N, D]``: DATA holds exactly the ``D`` features, or
    ``D + 1`` columns one of which is the target (chosen by ``target``), which is dropped."""
    from .data import DataError, load_dataset

    lower = data.lower()
    try:
        dataset = load_dataset(data, min_rows=1)  # target -1: the last column
    except DataError as error:
        if "found 1 column" not in str(error):
            raise
        if num_features != 1:
            raise UsageError(
                f"avdgp predict: DATA {data} has 1 column, the model expects {num_features} "
                f"features (or {num_features + 1} with the target)"
            ) from None
        return _single_column(data)  # the one feature of a one-feature model
    if lower.endswith(".npz"):
        if dataset.num_features != num_features:
            raise UsageError(
                f"avdgp predict: DATA {data}: array 'X' has {dataset.num_features} columns, "
                f"the model expects {num_features} features"
            )
        return np.asarray(dataset.inputs)
    columns = dataset.num_features + 1
    if columns == num_features:  # no target: every column is a feature, in file order
        return np.column_stack([dataset.inputs, dataset.targets])
    if columns != num_features + 1:
        raise UsageError(
            f"avdgp predict: DATA {data} has {columns} columns, the model expects "
            f"{num_features} features (or {num_features + 1} with the target)"
        )
    if target in (None, -1, columns - 1):
        return np.asarray(dataset.inputs)
    return np.asarray(load_dataset(data, target=target, min_rows=1).inputs)


def _single_column(data: str) -> np.ndarray:
    """A one-column CSV file as ``[N, 1]`` (``load_dataset`` needs a target column too)."""
    from .data.tables import check_finite_table, read_csv

    path = Path(data)
    table = read_csv(path, data)
    check_finite_table(table, path, data)
    return table.values


def _check_output_file(command: str, option: str, value: Optional[str]) -> None:
    if value is None:
        return
    path = Path(value)
    if path.is_dir():
        raise UsageError(f"avdgp {command}: {option} {value}: is a folder, expected a file name")
    existing = next((p for p in path.absolute().parents if p.exists()), Path("."))
    if not existing.is_dir() or not os.access(existing, os.W_OK):
        raise UsageError(f"avdgp {command}: {option} {value}: {existing} is not writable")


def _format(value: float) -> str:
    return repr(float(value))


def _format_label(value: float) -> str:
    """A class label as the data wrote it: ``2.0`` -> ``"2"``, ``0.5`` -> ``"0.5"``."""
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)


def _prediction_rows(saved: SavedRun, inputs: np.ndarray, batch_size: int) -> list[list[str]]:
    """The CSV rows (header first) of ``predict`` for raw features ``inputs`` ``[N, D]``."""
    from . import metrics
    from .experiments.runner import float_type
    from .prediction import predict_mixture

    scaler = saved.standardizer
    with float_type(saved.dtype):
        prediction = predict_mixture(saved.model, scaler.transform_x(inputs), batch_size=batch_size)
    if prediction.y_means.shape[-1] != 1:
        raise UsageError(
            f"avdgp predict: the model has {prediction.y_means.shape[-1]} outputs; predict "
            "writes one target per row"
        )
    if saved.task == "classification":
        probability = prediction.class_probabilities()[:, 0]  # [N]
        classes = saved.data.get("classes") or [0.0, 1.0]
        labels = [classes[1] if p > 0.5 else classes[0] for p in probability]
        rows = [["probability", "label"]]
        rows += [[_format(p), _format_label(label)] for p, label in zip(probability, labels)]
        return rows
    weights = prediction.weights  # [N, S]
    means, variances = metrics.rescale_mixture(
        prediction.y_means[..., 0], prediction.y_variances[..., 0], scaler.y_std, scaler.y_mean
    )  # [N, S] each, original units
    mean, variance = metrics.mixture_mean_and_variance(weights, means, variances)  # [N]
    bounds = metrics.mixture_quantiles(weights, means, variances, INTERVAL_95)  # [N, 2]
    rows = [["mean", "std", "lower_95", "upper_95"]]
    rows += [
        [_format(m), _format(np.sqrt(v)), _format(lo), _format(hi)]
        for m, v, (lo, hi) in zip(mean, variance, bounds)
    ]
    return rows


def _predict(args) -> int:
    import csv

    _check_output_file("predict", "--out", args.out)
    saved = _load_saved_run(args.model_dir, "predict")
    target = args.target if args.target is not None else saved.data.get("target")
    inputs = _feature_columns(args.data, saved.num_features, target)
    rows = _prediction_rows(saved, inputs, args.batch_size)
    if args.out is None:
        try:
            csv.writer(sys.stdout, lineterminator="\n").writerows(rows)
            sys.stdout.flush()
        except BrokenPipeError:  # e.g. '| head': the reader has all it wants
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle, lineterminator="\n").writerows(rows)
    print(f"{saved.label}: {len(rows) - 1} predictions ({', '.join(rows[0])}) in {out}")
    return 0


def _check_export_dir(value: str) -> None:
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise UsageError(f"avdgp export: EXPORT_DIR {value}: is a file, expected a folder")
    if path.is_dir() and any(path.iterdir()) and not (path / "saved_model.pb").is_file():
        raise UsageError(
            f"avdgp export: EXPORT_DIR {value}: is a non-empty folder that holds no export; "
            "choose a new folder (a previous export is overwritten)"
        )
    existing = next((p for p in [path, *path.absolute().parents] if p.exists()), Path("."))
    if not os.access(existing, os.W_OK):
        raise UsageError(f"avdgp export: EXPORT_DIR {value}: {existing} is not writable")


def _export(args) -> int:
    from .experiments.runner import float_type
    from .serving import SIGNATURES, export

    _check_export_dir(args.export_dir)
    saved = _load_saved_run(args.model_dir, "export")
    extra = {
        "task": saved.task,
        "label": saved.label,
        "feature_names": saved.data.get("feature_names"),
        "target_name": saved.data.get("target_name"),
        "classes": saved.data.get("classes"),
    }
    with float_type(saved.dtype):
        path = export(saved.model, args.export_dir, standardizer=saved.standardizer, metadata=extra)
    print(
        f"{saved.label}: exported to {path} (signatures {', '.join(SIGNATURES)}; input x "
        f"[N, {saved.num_features}] {saved.dtype} raw features, outputs in original units)"
    )
    return 0


COMMANDS = {
    "demo": _demo,
    "fit": _fit,
    "bench": _bench,
    "predict": _predict,
    "export": _export,
}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit status."""
    args = None
    try:  # TF_CPP_MIN_LOG_LEVEL is set for the CLI by gpflux_avdgp._quiet_tensorflow
        import tensorflow as tf

        tf.get_logger().setLevel("ERROR")  # retracing notices are not the user's concern
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except UsageError as error:
        print(str(error), file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        hint = ""
        if getattr(args, "save", None):
            hint = "; run the same command again to resume from the last finished epoch"
        print(f"avdgp: interrupted{hint}", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - the CLI turns every error into one line
        if os.environ.get("AVDGP_DEBUG"):
            raise
        return _report(error)


def _is_lost_worker(error: Exception) -> bool:
    """Whether ``error`` is TensorFlow's report that another worker of a multi-worker run
    stopped (its heartbeats ended) or cannot be reached."""
    import tensorflow as tf

    return isinstance(error, tf.errors.UnavailableError)


def _report(error: Exception) -> int:
    from .data import DataError
    from .experiments.runner import TrainingDiverged

    message = " ".join(str(error).split()) or type(error).__name__
    if isinstance(error, TrainingDiverged):
        print(f"avdgp: training diverged: {message}", file=sys.stderr)
        return EXIT_DIVERGED
    if isinstance(error, (DataError, ValueError, OSError)):
        print(f"avdgp: error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if _is_lost_worker(error):
        start = message.find("Collective ops is aborted")  # after TF's graph traceback
        reason = (message[start:] if start >= 0 else message[-300:])[:300]
        print(
            f"avdgp: a worker of the cluster stopped or cannot be reached ({reason}); start "
            "every worker again (a run with --save resumes from its last finished epoch)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    print(
        f"avdgp: internal error: {type(error).__name__}: {message[:500]} "
        "(set AVDGP_DEBUG=1 for the traceback)",
        file=sys.stderr,
    )
    return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
