"""A step that meets NaN or inf changes nothing, and says which input of which batch it was.

Keras applies whatever gradients a step computes: one NaN target in a ``tf.data`` pipeline
made the likelihood's variance and its Adam moments NaN, and every later fit of the model
failed, blaming a layer. :class:`~gpflux_avdgp.AVDGPModel`'s steps check, in the graph and
before the update depends on them (:func:`~gpflux_avdgp.checks.checked_finite`):

* the batch's inputs ``x``, targets ``y`` and ``sample_weight`` (training and evaluation);
* the loss and the gradients (training), by their global norm.

Its ``fit`` and ``evaluate`` turn the stop into one :class:`NonFiniteStep` line (a
``ValueError``) naming the input, the batch and the epoch (:func:`non_finite_step`, with
:class:`BatchPosition`). The model's
trained weights and optimizer state are those before the batch; running statistics of the
inputs (the reach gate's ``anchor_reach``, AR1/AR2's draw counter) may follow the batch's
inputs, which are finite then, as batch normalisation's statistics would. In other model types
(``tf_keras.Sequential``, Functional) :class:`~gpflux_avdgp.AVDGPLoss` checks the targets and
``sample_weight`` and the first GP layer its input, with the same messages inside
TensorFlow's error. XLA (``jit_compile=True``) compiles the checks to nothing.
"""

from __future__ import annotations

import re
from typing import Optional

import tensorflow as tf
from gpflow.keras import tf_keras

from ..checks import NON_FINITE, checked_finite

__all__ = [
    "run_reporting_non_finite",
    "BatchPosition",
    "NonFiniteStep",
    "checked_batch",
    "gradients_check",
    "non_finite_step",
]

_WHAT = re.compile(re.escape(NON_FINITE) + r" ([^\n]+?) (?:hold|is) NaN or inf")


def checked_batch(data):
    """``data`` (``x``, ``(x, y)`` or ``(x, y, sample_weight)``) with every float tensor
    checked, each named in the message."""
    x, y, sample_weight = tf_keras.utils.unpack_x_y_sample_weight(data)
    return tf_keras.utils.pack_x_y_sample_weight(
        checked_finite(x, "the inputs x"),
        checked_finite(y, "the targets y"),
        checked_finite(sample_weight, "sample_weight"),
    )


def gradients_check(loss: tf.Tensor, gradients: list) -> tf.Tensor:
    """One op that fails when ``loss`` or any of ``gradients`` holds NaN or inf: the check of
    their global norm (a few ops however many variables; a gradient norm that overflows is a
    divergence too). The optimizer's update is made to wait for it."""
    dense = [gradient for gradient in gradients if isinstance(gradient, tf.Tensor)]
    norm = tf.linalg.global_norm(dense) if dense else tf.zeros([], loss.dtype)
    total = tf.cast(loss, norm.dtype) * 0 + norm  # NaN or inf if either is
    return tf.debugging.check_numerics(total, f"{NON_FINITE} the loss or a gradient is NaN or inf")


class BatchPosition(tf_keras.callbacks.Callback):
    """Where ``fit`` or ``evaluate`` is: the epoch and the batch (0-based). In ``fit`` the batch
    is read off the optimizer's iteration count when asked (a refused step does not count),
    so no batch hook makes Keras fetch the logs after every step."""

    def __init__(self) -> None:
        super().__init__()
        self.epoch: Optional[int] = None
        self._test_batch: Optional[int] = None
        self._first_iteration: Optional[int] = None

    def on_epoch_begin(self, epoch: int, logs=None) -> None:
        self.epoch = epoch
        self._first_iteration = int(self.model.optimizer.iterations.numpy())

    def on_test_batch_begin(self, batch: int, logs=None) -> None:
        self._test_batch = batch

    @property
    def batch(self) -> Optional[int]:
        """The batch being trained (from the iteration count) or evaluated, if known."""
        if self._first_iteration is not None:
            return int(self.model.optimizer.iterations.numpy()) - self._first_iteration
        return self._test_batch


class NonFiniteStep(ValueError):
    """A step of ``fit`` or ``evaluate`` stopped by NaN or inf, in one line.

    :ivar source: what held it: ``"the targets y"``, ``"sample_weight"``, ``"the inputs x"``
        or ``"the loss or a gradient"``.
    """

    def __init__(self, message: str, source: str):
        super().__init__(message)
        self.source = source

    @property
    def in_data(self) -> bool:
        """Whether the batch's data held it (bad input), not the loss or a gradient (the
        training diverged)."""
        return _in_data(self.source)


def _in_data(source: str) -> bool:
    return source.startswith(("the inputs", "the targets", "sample_weight"))


def non_finite_step(
    command: str, error: tf.errors.InvalidArgumentError, position: BatchPosition
) -> Optional[NonFiniteStep]:
    """The one-line error for a step stopped by a check of this module, or ``None`` for
    another error: ``"fit: the targets y hold NaN or inf in batch 3 of epoch 2; ..."``."""
    found = _WHAT.search(str(error.message))
    if found is None:
        return None
    source = found.group(1)
    where = ""
    if position.batch is not None:
        where = f" in batch {position.batch + 1}"
        if command == "fit" and position.epoch is not None:
            where += f" of epoch {position.epoch + 1}"
    in_data = _in_data(source)
    verb = "hold" if in_data else "is"
    if command == "fit":
        after = (
            "no update was applied (the model is as it was before that batch); "
            + ("drop or fix those rows and fit again" if in_data else "lower the "
               "learning rate or standardise the data")
        )  # fmt: skip
    else:
        after = "no score means anything then; drop or fix those rows"
    return NonFiniteStep(f"{command}: {source} {verb} NaN or inf{where}; {after}", source)


def run_reporting_non_finite(command: str, callbacks_at: int, run, *args, **kwargs):
    """``run(*args, **kwargs)`` with a :class:`BatchPosition` among the callbacks (unless
    they are given by position, ``args[callbacks_at]``, or as the ``CallbackList`` that
    ``fit`` passes to its validation ``evaluate``); a step stopped by NaN or inf
    becomes one :class:`~gpflux_avdgp.models.finite_steps.NonFiniteStep` line."""
    position = BatchPosition()
    given = kwargs.get("callbacks")
    if len(args) <= callbacks_at and (given is None or isinstance(given, (list, tuple))):
        kwargs["callbacks"] = [*(given or []), position]  # not fit's own validation call
    try:
        return run(*args, **kwargs)
    except tf.errors.InvalidArgumentError as error:
        stopped = non_finite_step(command, error, position)
        if stopped is None:
            raise
        raise stopped from None
