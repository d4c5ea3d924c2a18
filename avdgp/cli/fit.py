"""``avdgp fit``: train one model on a data set held in memory or on CSV shards streamed from
disk, print its test scores and optionally save it."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Optional

from ..errors import CommandLineError
from .arguments import checked
from .common import (
    check_output_paths,
    load_tensorflow,
    one_line,
    print_next_commands,
    print_record,
    progress_stream,
    writing_atomically,
)

__all__ = ["fit_command"]

ENV_CPU_DEVICES = "AVDGP_CPU_DEVICES"


def fit_command(args) -> int:
    if _streams(args):
        load_tensorflow()
        return _fit_streaming(args)
    from ..data import Standardizer, load_dataset, split_dataset

    check_output_paths(args.json, args.save)
    classification = args.task == "classification"
    # classification: targets are class indices, ``classes`` the labels (numbers or text)
    dataset = _hinting_task(args, load_dataset, args.data)  # read with NumPy, before TensorFlow
    _check_target_choice(args, dataset)
    classes = list(dataset.classes) if classification else None
    split = split_dataset(
        dataset,
        seed=args.seed,
        split=args.split,
        test_fraction=args.test_fraction,
        val_fraction=args.val_fraction,
    )
    scaler = Standardizer.fit(split.x_train, split.y_train, standardize_targets=not classification)
    load_tensorflow()
    from avdgp.training.runner import SplitData
    from avdgp.training.skeleton import run

    from ..training.distribute import is_chief, worker_name

    strategy = _fit_strategy(args.strategy)  # before TensorFlow runs any operation
    chief = strategy is None or is_chief(strategy)
    split = scaler.transform_split(split)
    spec = model_spec(args, num_classes=len(classes) if classes else 2)  # sizes checked
    config = train_config(args)
    check_step_memory(spec, split.x_train.shape[1], config.batch_size)
    if chief:  # every input checked: what is read, before the first epoch
        _check_save_dir_free(args)
        _announce_data(args, dataset, len(dataset.inputs))
    with _one_line_warnings():
        record = run(
            SplitData(split),
            spec,
            config,
            dataset=dataset.name,
            standardizer=scaler,  # classification: inputs only (y_mean 0, y_std 1)
            stream=progress_stream(args) if chief else None,
            save_dir=Path(args.save) if args.save else None,
            strategy=strategy,
            data_columns=_data_columns(args, dataset, classes),
        )
    if not chief:  # the chief prints the record and writes the files
        if not args.quiet:
            print(f"avdgp fit: {worker_name(strategy)} finished", file=sys.stderr)
        return 0
    return _finish(args, record, _columns_line(args, dataset))


def _hinting_task(args, read, data):
    """``read(data, target=..., class_labels=...)`` as ``--task`` asks; a regression read that
    fails on text which is valid as class labels says ``--task classification`` is the fix."""
    from ..data import DataError

    classification = args.task == "classification"
    try:
        return read(data, target=args.target, class_labels=classification)
    except DataError as error:
        if classification or "is not a number" not in str(error):
            raise
        try:
            read(data, target=args.target, class_labels=True)
        except DataError:
            raise error from None
        raise DataError(
            f"{error}; the target column holds text: for class labels give --task classification"
        ) from None


#: Header names that say "target": passed over as an input only when ``--target`` says so.
TARGET_LIKE_NAMES = ("y", "target", "label", "class")


def _check_target_choice(args, dataset) -> None:
    """Refuse a header that names a column like a target (:data:`TARGET_LIKE_NAMES`) which the
    default target, the last column, would turn into an input."""
    if args.target not in (None, -1) or not dataset.feature_names:  # -1: the default, last
        return
    suspect = [name for name in dataset.feature_names if name.lower() in TARGET_LIKE_NAMES]
    if suspect:
        last = dataset.target_name or "the last column"
        raise CommandLineError(
            f"avdgp fit: DATA {args.data}: column {suspect[0]!r} looks like the target, but "
            f"without --target the last column {last!r} is; give --target {suspect[0]} (or "
            f"--target {last} to keep it)"
        )


def _check_save_dir_free(args) -> None:
    """Refuse ``--save`` of a folder another run holds before saying anything else (the run
    takes the folder's lock itself; this only orders the lines)."""
    if args.save:
        from ..training.rundir import holding_run_dir

        with holding_run_dir(Path(args.save)):
            pass


def _announce_data(args, dataset, rows: int) -> None:
    """Before training, on stderr (unless ``--quiet``): the rows, the target, how to pick
    another, and the inputs, so a wrong target is seen before the first epoch."""
    if args.quiet:
        return
    line = _columns_line(args, dataset).strip()
    if args.target in (None, -1):
        line += " (the target is the last column; --target NAME picks another)"
    print(f"avdgp fit: {rows} rows; {line}", file=sys.stderr, flush=True)


def _columns_line(args, dataset) -> str:
    """``data: target 'price', inputs width, height``: what ``fit`` read as target and inputs."""
    if dataset.target_name:
        target = repr(dataset.target_name)
    elif args.target in (None, -1):
        target = "the last column"
    else:
        target = f"column {args.target}"
    names = dataset.feature_names
    if names and len(names) <= 8:
        inputs = ", ".join(names)
    elif names:
        inputs = ", ".join(names[:6]) + f", ... ({len(names)} columns)"
    else:
        inputs = f"{dataset.num_features} columns"
    return f"  data: target {target}, inputs {inputs}"


def _size(count: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if count < 1024 or unit == "PiB":
            return f"{count:.0f} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def check_step_memory(spec, input_dim: int, batch_size: int) -> None:
    """Refuse, before any graph is built, sizes whose training step cannot fit in memory."""
    from avdgp.training.memory import available_bytes, step_bytes

    needed, available = step_bytes(spec, input_dim, batch_size), available_bytes()
    if available is not None and needed > available:
        inducing = ",".join(map(str, spec.resolved_inducing()))
        raise CommandLineError(
            f"avdgp fit: --inducing {inducing} --points {spec.num_points} --batch-size "
            f"{batch_size}: a training step needs about {_size(needed)}, more than the "
            f"{_size(available)} of memory here; lower --inducing, --points or --batch-size"
        )


def model_spec(args, num_classes: int = 2):
    """The :class:`~avdgp.zoo.ModelSpec` of ``avdgp fit`` (``num_classes``:
    the classes found in the data, for classification)."""
    from avdgp.zoo import ModelSpec

    guard = getattr(args, "guard", False)
    if guard and args.model != "avdgp":
        raise ValueError(f"--guard: an input guard is for --model avdgp, got --model {args.model}")
    return ModelSpec(
        model=args.model,
        rule=args.rule if args.model == "avdgp" else None,
        task=args.task,
        num_classes=num_classes,
        num_layers=args.layers,
        hidden_dims=args.hidden_dims,
        num_inducing=args.inducing,
        num_points=args.points,
        seed=args.seed,
        preset=args.preset,
        design="guard" if guard else None,
    )


def train_config(args):
    """The :class:`~avdgp.training.TrainConfig` of ``avdgp fit``."""
    from ..training import TrainConfig

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
        backup_interval=args.backup_interval,
    )


@contextlib.contextmanager
def _one_line_warnings():
    """Show an :class:`~avdgp.training.distribute.UnevenBatchesWarning` as one line."""
    from ..training.distribute import UnevenBatchesWarning

    with warnings.catch_warnings():
        show = warnings.showwarning

        def show_in_one_line(message, category, filename, lineno, file=None, line=None):
            if not issubclass(category, UnevenBatchesWarning):
                return show(message, category, filename, lineno, file, line)
            print(f"avdgp fit: warning: {one_line(message)}", file=sys.stderr)

        warnings.showwarning = show_in_one_line
        yield


def _fit_strategy(name: str):
    """The ``--strategy`` of ``fit`` (``None`` for ``default``); with ``$AVDGP_CPU_DEVICES``
    set, the CPU is first split into that many logical devices (MirroredStrategy on a machine
    without GPUs)."""
    from ..training.distribute import TFConfigError, configure_cpu_devices, strategy_from_name

    cpus = os.environ.get(ENV_CPU_DEVICES, "").strip()
    if cpus:
        count = checked(int, lambda v: v > 0, "a positive integer")
        try:
            configure_cpu_devices(count(cpus))
        except (argparse.ArgumentTypeError, ValueError) as error:
            raise CommandLineError(f"avdgp fit: ${ENV_CPU_DEVICES}: {one_line(error)}") from None
    if name == "default":
        return None
    try:
        return strategy_from_name(name)
    except (TFConfigError, ValueError) as error:
        raise CommandLineError(f"avdgp fit: --strategy {name}: {one_line(error)}") from None


def _streams(args) -> bool:
    """Whether ``fit`` streams DATA as CSV shards: with ``--test-data``, or when DATA is a glob
    pattern or a folder of CSV files without the UCI layout's ``data.csv(.gz)``."""
    from ..data import has_glob_characters

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
    from avdgp.training.skeleton import run
    from avdgp.training.streaming import ShardData

    from ..data import DataError
    from ..data.shards import scan_csv_shards

    check_output_paths(args.json, args.save)
    if args.split is not None:
        raise CommandLineError(
            "avdgp fit: --split picks a test mask of a UCI folder; with CSV shards give "
            "--test-data or --test-fraction"
        )
    if getattr(args, "strategy", "default") != "default":
        raise CommandLineError("avdgp fit: --strategy is not supported with streamed CSV shards")
    if args.restore_best:
        raise CommandLineError(
            "avdgp fit: --restore-best needs a validation split, which streamed CSV shards do "
            "not have; leave it out (the last epoch's weights are kept)"
        )
    classification = args.task == "classification"
    spec = model_spec(args)  # sizes checked before the shards are read
    if args.patience:
        raise CommandLineError(
            "avdgp fit: --patience stops on the validation NLL, which streamed CSV shards do not "
            "have; leave it out"
        )
    config = dataclasses.replace(train_config(args), restore_best=False, patience=None)
    train_shards, test_shards = _train_and_test_shards(args)
    train = _hinting_task(args, scan_csv_shards, train_shards)
    _check_target_choice(args, train)
    test = _hinting_task(args, scan_csv_shards, test_shards)
    classes = None
    if classification:
        classes = train.target_classes()
        spec = dataclasses.replace(spec, num_classes=len(classes))
        unseen = sorted(set(test.target_values) - set(classes))
        if unseen:
            raise DataError(
                f"{test.shards[0]}: the test targets take values the training targets do not: "
                f"{', '.join(f'{value:g}' for value in unseen[:10])}"
            )
    _check_save_dir_free(args)
    _announce_data(args, train, train.num_rows)
    standardizer = train.standardizer(standardize_targets=not classification)
    record = run(
        ShardData(train, test, standardizer=standardizer, classes=classes),
        spec,
        config,
        dataset=args.data,
        standardizer=standardizer,
        stream=progress_stream(args),
        save_dir=Path(args.save) if args.save else None,
        data_columns=_data_columns(args, train, None if classes is None else list(classes)),
    )
    return _finish(args, record, _columns_line(args, train))


def _train_and_test_shards(args) -> tuple[list, list]:
    """The training and test shards of a streamed fit: DATA's and ``--test-data``'s, else
    DATA's split by ``--test-fraction`` (the last shards by name are the test set)."""
    import math

    from ..data import resolve_shards

    shards = resolve_shards(args.data)
    if args.test_data is not None:
        return shards, resolve_shards(args.test_data)
    if len(shards) < 2:
        raise CommandLineError(
            f"avdgp fit: DATA {args.data} names 1 CSV shard; give --test-data, or 2 or more "
            "shards (the last ceil(test fraction x shards) are the test set)"
        )
    num_test = max(1, math.ceil(args.test_fraction * len(shards) - 1e-9))
    if num_test >= len(shards):
        raise CommandLineError(
            f"avdgp fit: --test-fraction {args.test_fraction} of {len(shards)} shards leaves "
            "no training shard"
        )
    return shards[:-num_test], shards[-num_test:]


def _finish(args, record, columns_line: Optional[str] = None) -> int:
    """Print the record (and what was read as target and inputs) and write ``--json``; exit 0."""
    print_record(record)
    if columns_line is not None:
        print(columns_line)
    if args.save:
        print_next_commands(args.save, args.data)
    if args.json:
        with writing_atomically(Path(args.json), "fit", "--json") as handle:
            handle.write(json.dumps(record.as_dict(), indent=2))
    return 0


def _data_columns(args, dataset, classes: Optional[list]):
    """The data layout ``run.json`` keeps for ``predict`` and ``export``: the target column,
    the feature and target names and (classification) the original labels in class order."""
    from ..training.record import DataColumns

    return DataColumns(
        target=args.target,
        feature_names=None if dataset.feature_names is None else list(dataset.feature_names),
        target_name=dataset.target_name,
        classes=classes,
    )
