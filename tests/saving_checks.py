"""What the saving tests of both packages share: toy data, moving a model's state away from its
start, and the round-trip assertions (``tests/library/io/test_saving.py``,
``tests/application/zoo/test_saving_zoo.py``)."""

from __future__ import annotations

import contextlib
import pickle
from typing import Iterator
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras
from tf_keras.src.utils import generic_utils

from gpflux_avdgp import AVDGPLoss, TrainableLikelihood, predict_mixture
from gpflux_avdgp.predictive import predictive_distribution

# "" is the TensorFlow SavedModel format (a directory); saving one traces every layer, so its
# round trips run in the slow suite (test_saving_zoo keeps one SavedModel case by default)
FORMATS = [".keras", ""]
FORMAT_CASES = [".keras", pytest.param("", marks=pytest.mark.slow)]
NUM_DATA = 16


def toy_data(rng: np.random.Generator, task: str = "regression") -> tuple[np.ndarray, np.ndarray]:
    """``N = 16`` points in 2-D; binary labels in ``{0, 1}`` for classification."""
    x = rng.normal(size=(NUM_DATA, 2))
    y = np.sin(2.0 * x[:, :1]) + 0.5 * x[:, 1:] ** 2
    if task == "classification":
        y = (y > 0.5).astype(np.float64)
    return x, y


def perturb_state(model: tf_keras.Model, rng: np.random.Generator) -> None:
    """Move every model variable away from its current value (step counters by 3) and, if
    the model is compiled, give its optimizer a non-trivial iteration count and slots."""
    for variable in model.weights:
        if variable.dtype.is_floating:
            noise = 0.05 * rng.standard_normal(variable.shape)
            variable.assign(variable + tf.constant(noise, variable.dtype))
        else:
            variable.assign_add(tf.constant(3, variable.dtype))
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None:
        optimizer.build(model.trainable_variables)
        optimizer.iterations.assign(optimizer.iterations + 5)
        for slot in optimizer.variables()[1:]:  # [0] is the iteration count
            value = 1e-3 * np.abs(rng.standard_normal(slot.shape))  # valid Adam moments
            slot.assign(slot + tf.constant(value, slot.dtype))


def assert_same_weights(model: tf_keras.Model, reloaded: tf_keras.Model) -> None:
    """Same variables, in the same order, with bit-for-bit equal values."""
    weights, reloaded_weights = model.get_weights(), reloaded.get_weights()
    assert len(weights) == len(reloaded_weights)
    for index, (value, reloaded_value) in enumerate(zip(weights, reloaded_weights)):
        np.testing.assert_array_equal(reloaded_value, value, err_msg=f"weight {index}")


def assert_same_optimizer_state(model: tf_keras.Model, reloaded: tf_keras.Model) -> None:
    """Same optimizer class and config, iteration count and (Adam) slot values."""
    assert type(reloaded.optimizer) is type(model.optimizer)
    assert reloaded.optimizer.get_config() == model.optimizer.get_config()
    assert reloaded.optimizer.iterations.numpy() == model.optimizer.iterations.numpy() > 0
    slots, reloaded_slots = model.optimizer.variables(), reloaded.optimizer.variables()
    assert len(reloaded_slots) == len(slots) == 1 + 2 * len(model.trainable_variables)
    for index, (slot, reloaded_slot) in enumerate(zip(slots, reloaded_slots)):
        np.testing.assert_array_equal(reloaded_slot.numpy(), slot.numpy(), err_msg=f"slot {index}")


def assert_same_predictions(model: tf_keras.Model, reloaded: tf_keras.Model, x: np.ndarray):
    """Bit-for-bit equal predictive mixtures (AR1/AR2 predict with fixed draws too)."""
    expected, actual = predict_mixture(model, x), predict_mixture(reloaded, x)
    for field in ("weights", "f_means", "f_variances", "y_means", "y_variances"):
        np.testing.assert_array_equal(getattr(actual, field), getattr(expected, field), field)


def assert_loss_shares_likelihood(reloaded: tf_keras.Model) -> None:
    """The reloaded compiled loss holds no likelihood of its own: it scores the one the
    reloaded model's output carries, its TrainableLikelihood's."""
    layer = reloaded.layers[-1]
    assert isinstance(layer, TrainableLikelihood)
    assert isinstance(reloaded.loss, AVDGPLoss) and reloaded.loss.likelihood is None
    width = reloaded.inputs[0].shape[-1]
    outputs = reloaded(tf.zeros([2, width], reloaded.inputs[0].dtype))
    assert predictive_distribution(outputs).likelihood is layer.likelihood


@contextlib.contextmanager
def refusing_unpickling() -> Iterator[None]:
    """Fail if the code inside runs pickled or marshalled Python code (``pickle.loads``, as
    in tfp's ``DistributionLambda.from_config``, or Keras' ``func_load`` for lambdas)."""

    def refuse(*args, **kwargs):
        raise AssertionError("loading a model must not unpickle or unmarshal code")

    with (
        mock.patch.object(pickle, "loads", refuse),
        mock.patch.object(generic_utils, "func_load", refuse),
    ):
        yield
