"""``avdgp bench``: the paper's regression protocol over data sets, models and seeds.

For each data set and seed: a random 8:1:1 train/validation/test split, inputs and targets
standardised with training statistics, every model trained with Adam (0.005, batch 100, or 500
for data sets over 200k rows) and scored on the test set. Every finished run is appended to
``results.csv`` at once, and its per-epoch seconds, validation and test NLL to
``curves.jsonl``; a rerun skips the runs already there, and a run stopped midway resumes from
its last backup (its folder under ``running/``, removed once its row is written). The summary is
``tables.md`` (mean +- std per data set, average ranks as in the paper's Tables 3 and 5,
seconds per epoch and test seconds as in its Table 4), one PNG per metric and, per data set,
``time_<dataset>.png``: test NLL against training seconds of every run.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional, Sequence, TextIO

import numpy as np
import tensorflow as tf

from avdgp.data import Dataset, Split, Standardizer, load_dataset, split_dataset, uci_dataset_path
from avdgp.experiments.bench.results import (
    CURVES_FILE,
    METRICS,
    append_curve,
    append_row,
    display_model,
    read_curves,
    read_results,
)
from avdgp.experiments.bench.tables import plot_time_curves, summarise
from avdgp.training import RunRecord, TrainConfig, TrainingDiverged
from avdgp.training.config import training_options
from avdgp.training.runner import SplitData
from avdgp.training.skeleton import run
from avdgp.zoo import ModelSpec, model_label, parse_model_name, split_design
from gpflux_avdgp import __version__
from gpflux_avdgp.presets import hidden_mean_function, layer_options

__all__ = [
    "BenchSettings",
    "DEFAULT_MODELS",
    "display_model",
    "plot_time_curves",
    "read_curves",
    "read_results",
    "run_bench",
    "run_version",
    "summarise",
    "synthetic_dataset",
]

#: Input columns every bench removes after loading: bike's casual and registered counts sum to
#: its target (``benchmarks/derive_bike.py`` checks it), so our bike has ``D = 15``.
DERIVED_COLUMNS = {"bike": (15, 16)}

#: Synthetic data of the shapes of the paper's high-dimensional Table 4 sets we do not have
#: (rows, inputs): for timing only, whose cost depends on the shape, not the values.
SYNTHETIC_SHAPES = {
    "ctslice-shape": (53_500, 379),
    "wec100-shape": (9_595, 200),
    "conductor-shape": (21_263, 81),
}

#: Raised by hand when a change of code (not of settings) changes what a run of the bench
#: computes; :func:`run_version` hashes the settings themselves.
BENCH_CODE_VERSION = 1

#: Beside ``results.csv``: one run folder per run in progress (``avdgp fit --save``'s backup),
#: so a stopped bench resumes each run from its last backup; removed once its row is written.
RUNNING_DIR = "running"

DEFAULT_MODELS = ("svgp", "dsdgp", "dspp", "idsgp", "avdgp-ar2p", "avdgp-ar2pp")
LARGE_DATA = 200_000


@dataclass(frozen=True)
class BenchSettings:
    """What to run.

    :param datasets: names under the UCI data root, or paths accepted by ``load_dataset``.
    :param models: model names (``avdgp-ar1`` ... ``avdgp-ar2pp``, ``svgp``, ``dsdgp``, ``dspp``,
        ``idsgp``, ``sgp-avi``).
    :param seeds: one split and initialisation per seed (paper: 5).
    :param epochs: training epochs (paper: 100; 50 for the largest sets).
    :param dtype: ``"float64"`` or ``"float32"``.
    :param data_root: folder of UCI data sets (default ``$AVDGP_DATA_ROOT`` or
        ``../shared/data/uci``).
    :param preset: ``"default"`` or ``"paper"`` (:mod:`gpflux_avdgp.presets`); rows record it
        and tables show models of another preset as ``model/preset``.
    :param training: :class:`~avdgp.training.TrainConfig` settings on top of
        the preset's (e.g. ``{"learning_rate": 0.01}``).
    :param drop_features: per data set name, input columns removed after loading (default
        :data:`DERIVED_COLUMNS`: bike's two count columns, which give its target away).
    """

    datasets: Sequence[str] = ("elevators",)
    models: Sequence[str] = DEFAULT_MODELS
    seeds: Sequence[int] = (0, 1, 2, 3, 4)
    epochs: int = 100
    dtype: str = "float64"
    data_root: Optional[str] = None
    max_rows: Optional[int] = None
    extra: dict = field(default_factory=dict)
    preset: str = "default"
    training: dict = field(default_factory=dict)
    drop_features: dict = field(default_factory=lambda: dict(DERIVED_COLUMNS))


def synthetic_dataset(name: str) -> Dataset:
    """A data set of :data:`SYNTHETIC_SHAPES`' shape ``[N, D]``: standard normal inputs (seed
    0) and ``y = sin(x_1) + 0.5 x_2 + 0.1 eps`` (a signal, so the models train as on data)."""
    rows, dim = SYNTHETIC_SHAPES[name]
    rng = np.random.default_rng(0)
    inputs = rng.standard_normal((rows, dim))
    targets = np.sin(inputs[:, 0]) + 0.5 * inputs[:, 1] + 0.1 * rng.standard_normal(rows)
    return Dataset(name=name, inputs=inputs, targets=targets)


def _load(
    name: str, root: Optional[str], max_rows: Optional[int], drop: Sequence[int] = ()
) -> Dataset:
    if name in SYNTHETIC_SHAPES:
        return synthetic_dataset(name)
    path = Path(name)
    dataset = load_dataset(path if path.exists() else uci_dataset_path(name, root))
    if drop:
        names = dataset.feature_names
        dataset = Dataset(
            name=dataset.name,
            inputs=np.delete(dataset.inputs, list(drop), axis=1),
            targets=dataset.targets,
            test_masks=dataset.test_masks,
            feature_names=None if names is None else list(np.delete(names, list(drop))),
            target_name=dataset.target_name,
        )
    if max_rows is not None and dataset.num_rows > max_rows:
        keep = np.random.default_rng(0).permutation(dataset.num_rows)[:max_rows]
        keep.sort()
        dataset = Dataset(
            name=dataset.name,
            inputs=dataset.inputs[keep],
            targets=dataset.targets[keep],
            test_masks=None,
            feature_names=dataset.feature_names,
            target_name=dataset.target_name,
        )
    return dataset


def _spec(settings: BenchSettings, label: str, seed: int) -> ModelSpec:
    kind, rule = parse_model_name(label)
    return ModelSpec(
        model=kind.value,
        rule=rule,
        seed=seed,
        preset=settings.preset,
        design=split_design(label)[1],
        **settings.extra,
    )


def run_version(settings: BenchSettings, label: str) -> str:
    """The ``version`` of ``label``'s runs under ``settings``: 10 hex digits of a hash of
    everything that decides what a run computes apart from its key's own fields (data set,
    seed, epochs, preset): the model's spec, the preset's layer and training options, the
    training settings on top, the dtype, the package version and :data:`BENCH_CODE_VERSION`.
    Rows of another version never share a cell, so a changed default starts new cells."""
    spec = _spec(settings, label, seed=0)  # the seed is the key's
    described = {
        "spec": asdict(spec),
        "layer_options": layer_options(settings.preset),
        "hidden_mean": hidden_mean_function(settings.preset),
        "training_options": training_options(settings.preset),
        "training": {
            key: value
            for key, value in settings.training.items()
            if key not in ("steps_per_execution", "backup_interval")  # speed only
        },
        "dtype": settings.dtype,
        "package": __version__,
        "code": BENCH_CODE_VERSION,
    }
    text = json.dumps(described, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def _row(record: RunRecord, dataset: str, model: str, seed: int, epochs: int, preset: str) -> dict:
    test, original = record.test, record.test_original_units or {}
    return {
        "preset": preset,
        "best_epoch": record.best_epoch,
        "stopped_epoch": record.stopped_epoch,
        "dataset": dataset,
        "model": model,
        "seed": seed,
        "epochs": epochs,
        "status": "ok",
        "n_train": record.n_train,
        "n_val": record.n_val,
        "n_test": record.n_test,
        "dim": record.dim,
        **{key: test.get(key) for key in ("nll", "rmse", "crps", "coverage_95")},
        **{f"{key}_original": original.get(key) for key in METRICS},
        "train_seconds_per_epoch": record.train_seconds_per_epoch,
        "first_epoch_seconds": record.first_epoch_seconds,
        "predict_seconds": record.predict_seconds,
    }


def _run_one(
    settings: BenchSettings,
    label: str,
    seed: int,
    dataset: str,
    split: Split,
    scaler: Standardizer,
    batch_size: int,
    out: Path,
    stream: Optional[TextIO],
) -> dict:
    """Train and score one (model, seed) on a standardised split; append its curves and
    return its ``results.csv`` row (``status`` ``ok``, or ``failed: ...`` if it diverged)."""
    spec = _spec(settings, label, seed)
    config = TrainConfig.from_preset(
        settings.preset,
        epochs=settings.epochs,
        batch_size=batch_size,
        seed=seed,
        dtype=settings.dtype,
        **settings.training,
    )
    version = run_version(settings, label)
    name = f"{dataset}-{label}-seed{seed}-e{settings.epochs}-{settings.preset}-{version}"
    save_dir = out / RUNNING_DIR / name.replace(":", "_").replace("/", "_")
    if (save_dir / "run.json").exists():  # stopped after saving, before its row: run again
        shutil.rmtree(save_dir)
    try:
        record = run(
            SplitData(split, test_curve=True),
            spec,
            config,
            dataset=dataset,
            standardizer=scaler,
            stream=stream,
            save_dir=save_dir,
        )
    except (TrainingDiverged, tf.errors.InvalidArgumentError) as error:
        shutil.rmtree(save_dir, ignore_errors=True)  # a retry starts afresh
        message = str(error).strip().splitlines()[0][:200]
        if stream is not None:
            print(f"  failed: {message}", file=stream, flush=True)
        return {
            "dataset": dataset,
            "model": label,
            "seed": seed,
            "epochs": settings.epochs,
            "preset": settings.preset,
            "version": version,
            "status": f"failed: {message}",
        }
    row = _row(record, dataset, label, seed, settings.epochs, settings.preset)
    row["version"] = version
    append_curve(out / CURVES_FILE, row, record)
    shutil.rmtree(save_dir, ignore_errors=True)  # the row keeps what the table needs
    return row


def run_bench(
    settings: BenchSettings, out_dir: Path | str, *, stream: Optional[TextIO] = sys.stderr
) -> Path:
    """Run every (data set, model, seed) not yet in ``out_dir/results.csv``; then summarise.

    :returns: the path of ``tables.md``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.csv"
    labels = list(dict.fromkeys(map(model_label, settings.models)))  # de-duplicated, in order
    seeds = list(dict.fromkeys(settings.seeds))
    names = list(dict.fromkeys(settings.datasets))
    versions = {label: run_version(settings, label) for label in labels}
    done = {  # failed runs are not done: a rerun retries them
        (row["dataset"], row["model"], int(row["seed"]), int(row["epochs"]))
        + (row["preset"], row["version"])
        for row in read_results(results_path)
        if row["status"] == "ok"
    }

    def say(text: str) -> None:
        if stream is not None:
            print(text, file=stream, flush=True)

    total = len(names) * len(labels) * len(seeds)
    count = 0
    for name in names:
        drop = settings.drop_features.get(Path(name).name, ())
        dataset = _load(name, settings.data_root, settings.max_rows, drop)
        batch_size = 500 if dataset.num_rows > LARGE_DATA else 100
        for seed in seeds:
            split = split_dataset(dataset, seed=seed)
            scaler = Standardizer.fit(split.x_train, split.y_train)
            split = scaler.transform_split(split)
            for label in labels:
                count += 1
                key = (dataset.name, label, seed, settings.epochs, settings.preset, versions[label])
                if key in done:
                    say(f"[{count}/{total}] {dataset.name} {label} seed {seed}: done, skipped")
                    continue
                say(f"[{count}/{total}] {dataset.name} {label} seed {seed}")
                row = _run_one(
                    settings, label, seed, dataset.name, split, scaler, batch_size, out, stream
                )
                append_row(results_path, row)
                done.add(key)
                if row["status"] == "ok":
                    say(
                        f"  NLL {row['nll']:.3f} RMSE {row['rmse']:.3f} CRPS {row['crps']:.3f} "
                        f"{row['train_seconds_per_epoch']:.2f} s/epoch"
                    )
    shown = [display_model(label, settings.preset) for label in labels]
    return summarise(results_path, out, models=shown, datasets=None)
