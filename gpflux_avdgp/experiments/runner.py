"""Train one model on one split and measure it: the harness shared by ``fit``, ``bench``, ``demo``.

Every model goes through the same steps: build under the requested float type, stream the
standardised training set through ``tf.data`` (seeded shuffling, no float32 cast of float64
data), ``model.fit`` with Adam, then predict the test set as a Gaussian mixture and score it
with :mod:`gpflux_avdgp.metrics`, in standardised units (the paper's) and in original units.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator, Optional, TextIO

import gpflow
import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from .. import metrics
from ..prediction import PredictiveMixture, predict_mixture
from ..validation import check_choice, check_positive_int
from .data import Split, Standardizer
from .zoo import BuiltModel, ModelSpec, Task, build_model

__all__ = [
    "EpochProgress",
    "TrainConfig",
    "TrainingDiverged",
    "float_type",
    "fit_model",
    "run",
    "score_prediction",
    "standardise_split",
]

FLOAT_TYPES = {"float32": np.float32, "float64": np.float64}
#: Cholesky jitter per float type (float32 needs more to stay positive definite).
JITTER = {"float32": 1e-5, "float64": 1e-6}


class TrainingDiverged(RuntimeError):
    """The training loss became NaN or infinite."""


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings (paper: Adam 0.005, batch 100, 100 epochs).

    :param epochs: passes over the training set.
    :param batch_size: rows per step (paper: 100; 500 for data sets over 200k rows).
    :param learning_rate: Adam's step size.
    :param seed: seeds Keras/TF/NumPy, the shuffling and the model.
    :param dtype: ``"float64"`` (default, GPflow's) or ``"float32"``.
    """

    epochs: int = 100
    batch_size: int = 100
    learning_rate: float = 0.005
    seed: int = 0
    dtype: str = "float64"

    def __post_init__(self) -> None:
        check_positive_int("epochs", self.epochs)
        check_positive_int("batch_size", self.batch_size)
        if not (isinstance(self.learning_rate, (int, float)) and self.learning_rate > 0):
            raise ValueError(f"learning_rate: expected a positive number, got {self.learning_rate}")
        if self.dtype not in FLOAT_TYPES:
            raise ValueError(f"dtype: expected one of {sorted(FLOAT_TYPES)}, got {self.dtype!r}")


@contextlib.contextmanager
def float_type(name: str) -> Iterator[None]:
    """Set GPflow's default float and jitter for the models built and trained inside."""
    previous_float, previous_jitter = gpflow.default_float(), gpflow.default_jitter()
    gpflow.config.set_default_float(FLOAT_TYPES[name])
    gpflow.config.set_default_jitter(JITTER[name])
    try:
        yield
    finally:
        gpflow.config.set_default_float(previous_float)
        gpflow.config.set_default_jitter(previous_jitter)


class EpochProgress(tf_keras.callbacks.Callback):
    """One line per epoch (loss, seconds, ETA) and the wall-clock time of each epoch.

    Raises :class:`TrainingDiverged` at the end of an epoch whose loss is not finite.

    :param label: printed in front of every line.
    :param stream: where to print; ``None`` prints nothing.
    """

    def __init__(self, label: str, stream: Optional[TextIO] = sys.stderr):
        super().__init__()
        self.label, self.stream = label, stream
        self.seconds: list[float] = []
        self.losses: list[float] = []

    def on_epoch_begin(self, epoch: int, logs: Optional[dict] = None) -> None:
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        self.seconds.append(time.perf_counter() - self._start)
        loss = float((logs or {}).get("loss", math.nan))
        self.losses.append(loss)
        total = self.params.get("epochs", len(self.seconds))
        if self.stream is not None:
            steady = self.seconds[1:] or self.seconds
            eta = np.mean(steady) * (total - len(self.seconds))
            print(
                f"[{self.label}] epoch {epoch + 1}/{total} loss {loss:.4f} "
                f"{self.seconds[-1]:.1f} s (ETA {eta:.0f} s)",
                file=self.stream,
                flush=True,
            )
        if not math.isfinite(loss):
            self.model.stop_training = True
            raise TrainingDiverged(
                f"{self.label}: the training loss became {loss} in epoch {epoch + 1}"
            )


def _training_dataset(
    inputs: np.ndarray, targets: np.ndarray, batch_size: int, seed: int, dtype
) -> tf.data.Dataset:
    data = tf.data.Dataset.from_tensor_slices(
        (tf.constant(inputs, dtype=dtype), tf.constant(targets, dtype=dtype))
    )
    data = data.shuffle(len(inputs), seed=seed, reshuffle_each_iteration=True)
    return data.batch(batch_size).prefetch(tf.data.AUTOTUNE)


def fit_model(
    built: BuiltModel,
    inputs: np.ndarray,
    targets: np.ndarray,
    config: TrainConfig,
    *,
    progress: Optional[EpochProgress] = None,
    callbacks: tuple = (),
) -> EpochProgress:
    """Compile ``built.model`` with Adam and its loss and fit ``(inputs [N, D], targets [N, 1])``.

    :returns: the progress callback, holding per-epoch seconds and losses.
    """
    model = built.model
    optimizer = tf_keras.optimizers.Adam(config.learning_rate)
    optimizer.build(model.trainable_variables)  # slots up front: one trace of the train step
    model.compile(optimizer=optimizer, loss=built.loss)
    progress = progress or EpochProgress(built.spec.label, stream=None)
    dtype = model.inputs[0].dtype
    data = _training_dataset(inputs, targets, config.batch_size, config.seed, dtype)
    model.fit(data, epochs=config.epochs, verbose=0, callbacks=[progress, *callbacks])
    return progress


def score_prediction(
    prediction: PredictiveMixture,
    targets: np.ndarray,
    task: Task,
    standardizer: Optional[Standardizer] = None,
) -> tuple[dict, Optional[dict]]:
    """Metrics of a prediction, in model units and (regression) in the targets' original units.

    :param targets: ``[N, 1]`` targets in model (standardised) units.
    :returns: ``(metrics, metrics_in_original_units or None)``.
    """
    y = np.asarray(targets, dtype=np.float64).reshape(-1)
    weights = prediction.weights
    if task is Task.CLASSIFICATION:
        probabilities = metrics.probit_mixture_probability(
            weights, prediction.f_means[..., 0], prediction.f_variances[..., 0]
        )
        return metrics.classification_metrics(y, probabilities), None
    means, variances = prediction.y_means[..., 0], prediction.y_variances[..., 0]
    scored = metrics.regression_metrics(y, weights, means, variances)
    if standardizer is None:
        return scored, None
    scale, shift = standardizer.y_std, standardizer.y_mean
    original_means, original_variances = metrics.rescale_mixture(means, variances, scale, shift)
    original = metrics.regression_metrics(
        y * scale + shift, weights, original_means, original_variances
    )
    return scored, original


def standardise_split(split: Split, scaler: Standardizer) -> Split:
    """``split`` with inputs and targets transformed by ``scaler`` (fitted on its train part)."""
    return Split(
        x_train=scaler.transform_x(split.x_train),
        y_train=scaler.transform_y(split.y_train),
        x_val=scaler.transform_x(split.x_val),
        y_val=scaler.transform_y(split.y_val),
        x_test=scaler.transform_x(split.x_test),
        y_test=scaler.transform_y(split.y_test),
    )


def _timed_prediction(built: BuiltModel, inputs: np.ndarray, batch_size: int):
    warm = inputs[: min(len(inputs), batch_size)]
    predict_mixture(built.model, warm, likelihood=built.likelihood, batch_size=batch_size)
    start = time.perf_counter()
    prediction = predict_mixture(
        built.model, inputs, likelihood=built.likelihood, batch_size=batch_size
    )
    return prediction, time.perf_counter() - start


def run(
    spec: ModelSpec,
    split: Split,
    config: TrainConfig,
    *,
    dataset: str,
    standardizer: Optional[Standardizer] = None,
    stream: Optional[TextIO] = sys.stderr,
    save_dir: Optional[Path] = None,
    predict_batch_size: int = 1000,
) -> dict:
    """Train ``spec`` on ``split`` (already standardised) and return the result record.

    The record holds ``model``, ``rule``, ``dataset``, ``n_train``, ``n_test``, ``dim``,
    ``test`` (``nll``, ``rmse``, ``crps``, ``coverage_95`` or ``nll``, ``error_rate``,
    ``brier``, ``ece``), ``test_original_units`` (regression), ``val``,
    ``train_seconds_per_epoch`` (epochs after the first, which includes tracing),
    ``first_epoch_seconds``, ``predict_seconds``, ``epochs``, ``seed`` and the settings.
    """
    task = check_choice("task", spec.task, Task)
    tf_keras.backend.clear_session()
    tf_keras.utils.set_random_seed(config.seed)
    with float_type(config.dtype):
        built = build_model(spec, split.x_train.shape[1], len(split.x_train), inputs=split.x_train)
        progress = EpochProgress(spec.label, stream=stream)
        fit_model(built, split.x_train, split.y_train, config, progress=progress)
        prediction, predict_seconds = _timed_prediction(built, split.x_test, predict_batch_size)
        test, test_original = score_prediction(prediction, split.y_test, task, standardizer)
        val = None
        if len(split.x_val):
            val_prediction = predict_mixture(
                built.model, split.x_val, likelihood=built.likelihood, batch_size=1000
            )
            val, _ = score_prediction(val_prediction, split.y_val, task, standardizer)
        steady = progress.seconds[1:] or progress.seconds
        record = {
            "model": spec.kind.value,
            "label": spec.label,
            "rule": spec.rule if spec.kind.value == "avdgp" else None,
            "task": task.value,
            "dataset": dataset,
            "n_train": int(len(split.x_train)),
            "n_val": int(len(split.x_val)),
            "n_test": int(len(split.x_test)),
            "dim": int(split.x_train.shape[1]),
            "test": test,
            "test_original_units": test_original,
            "val": val,
            "train_seconds_per_epoch": float(np.mean(steady)),
            "first_epoch_seconds": float(progress.seconds[0]),
            "predict_seconds": float(predict_seconds),
            "final_train_loss": float(progress.losses[-1]),
            "epochs": config.epochs,
            "batch_size": config.batch_size,
            "learning_rate": config.learning_rate,
            "dtype": config.dtype,
            "seed": config.seed,
            "layers": spec.resolved_layers(),
            "dims": spec.resolved_dims(),
            "num_inducing": spec.resolved_inducing(),
            "num_points": spec.num_points,
            "num_parameters": int(
                sum(int(np.prod(v.shape)) for v in built.model.trainable_variables)
            ),
        }
        if save_dir is not None:
            save_run(built, record, standardizer, Path(save_dir))
    return record


def save_run(
    built: BuiltModel, record: dict, standardizer: Optional[Standardizer], directory: Path
) -> None:
    """Write ``weights`` (TF checkpoint), ``model.keras`` where serialisable, ``run.json``."""
    directory.mkdir(parents=True, exist_ok=True)
    built.model.save_weights(str(directory / "weights"))
    saved_keras = True
    try:
        built.model.save(directory / "model.keras")
    except NotImplementedError:
        saved_keras = False  # wrapped GPflux layers cannot be serialised to a config yet
    info = {
        "spec": asdict(built.spec),
        "standardizer": None if standardizer is None else asdict(standardizer),
        "keras_file": "model.keras" if saved_keras else None,
        "result": record,
    }
    (directory / "run.json").write_text(json.dumps(info, indent=2, default=_jsonable))


def _jsonable(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)
