"""Training settings: :class:`TrainConfig` (optimiser, schedule, best-epoch selection) and the
float type (GPflow's default float and jitter) models are built and trained in."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Iterator, Optional

import gpflow
import numpy as np
from gpflow.keras import tf_keras

from gpflux_avdgp.checks import check_choice, check_positive_int
from gpflux_avdgp.presets import Preset

from ..errors import TrainingDiverged

__all__ = [
    "DEFAULT_PATIENCE",
    "FLOAT_TYPES",
    "JITTER",
    "SCHEDULES",
    "TRAINING_DIFFERENCES",
    "TrainConfig",
    "TrainingDiverged",
    "float_type",
    "training_options",
]

FLOAT_TYPES = {"float32": np.float32, "float64": np.float64}


#: Cholesky jitter per float type (float32 needs more to stay positive definite).
JITTER = {"float32": 1e-5, "float64": 1e-6}


#: Learning-rate schedules of :class:`TrainConfig`.
SCHEDULES = ("constant", "cosine")


#: Largest learning rate: Adam keeps it in a float32 variable (a larger one is ``inf`` there).
MAX_LEARNING_RATE = float(np.finfo(np.float32).max)


#: Seconds between the backups of a run (:attr:`TrainConfig.backup_interval`).
DEFAULT_BACKUP_INTERVAL = 30.0

#: Epochs without a better validation NLL after which the default preset stops training.
DEFAULT_PATIENCE = 20

#: ``setting: (default, paper, why)`` where the default training departs from the paper's (the
#: layers' differences: :data:`gpflux_avdgp.presets.PAPER_DIFFERENCES`).
TRAINING_DIFFERENCES: dict[str, tuple[str, str, str]] = {
    "schedule": (
        "cosine decay to 10 % over all epochs",
        "constant learning rate",
        "damps the late-training swings of the minibatch loss (toy 2-layer, 3 seeds: final "
        "error 4.2-5.1 % instead of 3.5-11.5 %)",
    ),
    "restore_best": (
        "weights of the epoch with the lowest validation NLL",
        "weights of the last epoch",
        "the validation split exists in the paper's protocol; selecting on it guards against "
        "the late overfitting measured on UCI sets",
    ),
    "patience": (
        "stop after 20 epochs without a better validation NLL",
        "train all epochs",
        "on elevators the best epoch is 12-27 of 100 and no better epoch followed a gap of 10; "
        "stopping trains 32-47 of the 100 epochs for the same result",
    ),
}


def training_options(preset: str | Preset = Preset.DEFAULT) -> dict:
    """Optimisation settings (fields of :class:`TrainConfig`) that ``preset`` sets."""
    preset = check_choice("preset", preset, Preset)
    if preset is Preset.PAPER:
        return {
            "learning_rate": 0.005,
            "schedule": "constant",
            "restore_best": False,
            "patience": None,
        }
    return {
        "learning_rate": 0.005,
        "schedule": "cosine",
        "restore_best": True,
        "patience": DEFAULT_PATIENCE,
    }


#: The default preset's settings: ``TrainConfig()``'s defaults.
_DEFAULT_PRESET = training_options("default")


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings. ``TrainConfig()`` is the default preset (Adam 0.005 with a cosine
    decay, batch 100, 100 epochs, the best validation epoch with patience 20);
    ``TrainConfig.from_preset("paper")`` the paper's (a constant rate, the last epoch).

    :param epochs: passes over the training set.
    :param batch_size: rows per step (paper: 100; 500 for data sets over 200k rows).
    :param learning_rate: Adam's step size.
    :param seed: seeds Keras/TF/NumPy, the shuffling and the model.
    :param dtype: ``"float64"`` (default, GPflow's) or ``"float32"``.
    :param steps_per_execution: training steps run by one call of Keras' train function
        (``model.compile(steps_per_execution=...)``): more steps per call spread Keras'
        per-call work (callbacks, iterator, loop) over them, with the same results up to
        floating-point rounding. A speed setting only: it is not part of a saved run's
        settings, so a run may resume with another value.
    :param backup_interval: seconds between the backups of a run that has a backup folder
        (``avdgp fit --save``): after an epoch the run backs up if at least this long has passed
        since its last backup, and always after its last epoch; ``0`` backs up every epoch. An
        interrupted run resumes from its last backup and trains the epochs after it again, to
        the same result. A backup writes the model and the optimizer (about 0.1 s for the
        default model): on 400 rows, backing up every epoch made an epoch 0.21 s instead of
        0.11 s (``benchmarks/results/small_jobs/results.md``). A speed setting, as
        ``steps_per_execution`` is: a run may resume with another value.
    :param schedule: ``"constant"`` (the paper) or ``"cosine"``: the learning rate follows a
        half cosine from ``learning_rate`` down to ``final_learning_fraction`` of it over all
        ``epochs`` (a ``tf_keras`` ``CosineDecay`` of the optimizer's step counter, so a resumed
        run continues on the same curve). It damps the late-training noise of the minibatch
        gradients (``docs/experiments/learning.md``).
    :param final_learning_fraction: the cosine schedule's last rate over its first, in [0, 1].
    :param restore_best: score the validation split's predictive NLL after every epoch
        (:class:`~gpflux_avdgp.callbacks.ValidationNLL`) and end with the weights of the best
        epoch, an input guard's last (:class:`~gpflux_avdgp.callbacks.BestEpochStopping`);
        needs a validation split. The record holds ``best_epoch``, ``stopped_epoch`` and the
        validation curve.
    :param patience: with ``restore_best``, stop once the validation NLL has not improved for
        this many epochs (``None``: train all ``epochs``). The cosine schedule still spans all
        ``epochs``, so stopping early gives the same best epoch as the full run whenever no
        better epoch comes after a gap of ``patience`` epochs (measured on elevators, where 10
        sufficed: ``docs/experiments/learning.md``).
    """

    epochs: int = 100
    batch_size: int = 100
    learning_rate: float = _DEFAULT_PRESET["learning_rate"]
    seed: int = 0
    dtype: str = "float64"
    steps_per_execution: int = 1
    backup_interval: float = DEFAULT_BACKUP_INTERVAL
    schedule: str = _DEFAULT_PRESET["schedule"]
    final_learning_fraction: float = 0.1
    restore_best: bool = _DEFAULT_PRESET["restore_best"]
    patience: Optional[int] = _DEFAULT_PRESET["patience"]

    def __post_init__(self) -> None:
        check_positive_int("epochs", self.epochs)
        check_positive_int("batch_size", self.batch_size)
        check_positive_int("steps_per_execution", self.steps_per_execution)
        interval = self.backup_interval
        if isinstance(interval, bool) or not (
            isinstance(interval, (int, float)) and 0 <= interval < math.inf
        ):
            raise ValueError(f"backup_interval: expected seconds >= 0, got {interval!r}")
        if not (
            isinstance(self.learning_rate, (int, float))
            and 0 < self.learning_rate <= MAX_LEARNING_RATE
        ):
            raise ValueError(
                "learning_rate: expected a positive number up to 3.4e38 (Adam keeps it in "
                f"float32), got {self.learning_rate}"
            )
        if self.dtype not in FLOAT_TYPES:
            raise ValueError(f"dtype: expected one of {sorted(FLOAT_TYPES)}, got {self.dtype!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule: expected one of {list(SCHEDULES)}, got {self.schedule!r}")
        if not isinstance(self.restore_best, bool):
            raise TypeError(f"restore_best: expected a bool, got {self.restore_best!r}")
        if self.patience is not None:
            check_positive_int("patience", self.patience)
            if not self.restore_best:
                raise ValueError(
                    f"patience: stopping early needs restore_best=True, got patience="
                    f"{self.patience} with restore_best=False"
                )
        fraction = self.final_learning_fraction
        if not (isinstance(fraction, (int, float)) and 0.0 <= fraction <= 1.0):
            raise ValueError(
                f"final_learning_fraction: expected a number in [0, 1], got {fraction}"
            )

    @classmethod
    def from_preset(cls, preset: str = "default", **settings) -> "TrainConfig":
        """The settings of ``preset`` (:func:`training_options`) with
        ``settings`` on top; ``None`` values are ignored, ``patience=0`` means "train all
        epochs" (``patience=None``). Turning ``restore_best`` off also turns off the preset's
        ``patience`` (there is nothing to stop on), unless ``patience`` is given too."""
        options = training_options(preset)
        given = {key: value for key, value in settings.items() if value is not None}
        options.update(given)
        if options.get("patience") == 0 or (
            not options["restore_best"] and "patience" not in given
        ):
            options["patience"] = None
        return cls(**options)

    def learning_rate_for(self, steps_per_epoch: int):
        """Adam's learning rate: the number, or the schedule over ``epochs * steps_per_epoch``."""
        if self.schedule == "constant":
            return self.learning_rate
        return tf_keras.optimizers.schedules.CosineDecay(
            self.learning_rate,
            decay_steps=max(
                1, self.epochs * check_positive_int("steps_per_epoch", steps_per_epoch)
            ),
            alpha=self.final_learning_fraction,
        )


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
