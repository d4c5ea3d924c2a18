"""Issue 47, row 7: a step that meets NaN or inf changes nothing, in every model type.

A NaN target, a NaN ``sample_weight`` or an inf input in a ``tf.data`` pipeline stops the step
before the optimizer's update: every variable (the model's and the optimizer's) is as before
the fit, the error names the input (and, in an ``AVDGPModel``, the batch and the epoch in one
line), the model then fits clean data, and ``evaluate`` refuses instead of returning ``nan``.
"""

from __future__ import annotations

import gpflow
import numpy as np
import pytest
import reference
import tensorflow as tf
from gpflow.keras import tf_keras
from test_model_types import NUM_DATA, _data, _model

import gpflux_avdgp as ga
from gpflux_avdgp.core.anchors import REACH_MOMENTUM
from gpflux_avdgp.layers.anchor_placement import place_anchors
from gpflux_avdgp.models.finite_steps import NonFiniteStep
from gpflux_avdgp.predictive import predictive_distribution

BATCH = 40


def dataset(x, y, weights=None) -> tf.data.Dataset:
    parts = (x, y) if weights is None else (x, y, weights)
    return tf.data.Dataset.from_tensor_slices(parts).batch(BATCH)


def poisoned(kind: str) -> tf.data.Dataset:
    """The data with one bad value in the first batch (row 5)."""
    x, y, _ = (tensor.numpy() for tensor in _data())
    weights = np.ones(NUM_DATA)
    if kind == "y":
        y[5, 0] = np.nan
    elif kind == "x":
        x[5, 1] = np.inf
    else:
        weights[5] = np.nan
    return dataset(x, y, weights if kind == "sample_weight" else None)


def followed_reach(model: tf_keras.Model, reach: float, x: np.ndarray) -> float:
    """The reach of the model's one GP layer after a training batch ``x``: a running statistic
    of the layer's inputs (as batch normalisation's), which the forward pass of a batch whose
    inputs are finite may move before the step stops for its targets or gradients."""
    (layer,) = [layer for layer in model.layers if isinstance(layer, ga.AmortizedGPLayer)]
    batch_reach = reference.reach_of(x, layer.anchors.numpy())
    return REACH_MOMENTUM * reach + (1 - REACH_MOMENTUM) * batch_reach


def state(model: tf_keras.Model) -> list[np.ndarray]:
    return [v.numpy().copy() for v in model.variables + model.optimizer.variables()]


WHAT = {"y": "the targets y", "x": "the inputs x", "sample_weight": "sample_weight"}


def cases(*default: tuple[str, ...]) -> list:
    """Every model type with every bad input; those not in ``default`` run in the slow suite."""
    return [
        pytest.param(kind, bad, marks=[] if (kind, bad) in default else [pytest.mark.slow])
        for kind in ("avdgp", "sequential", "functional")
        for bad in ("y", "sample_weight", "x")
    ]


@pytest.mark.parametrize(
    "kind, bad",
    cases(("avdgp", "y")),
)
def test_a_non_finite_batch_applies_no_update_and_the_model_fits_clean_data(kind, bad):
    model = _model(kind, gpflow.likelihoods.Gaussian(variance=0.1))
    model.compile(tf_keras.optimizers.Adam(0.05), loss=ga.AVDGPLoss())
    x, y, _ = _data()
    model.fit(dataset(x, y), epochs=1, verbose=0)  # the optimizer's slots exist
    before = state(model)
    if kind == "avdgp":
        with pytest.raises(NonFiniteStep) as info:
            model.fit(poisoned(bad), epochs=2, verbose=0)
        assert info.value.in_data and isinstance(info.value, ValueError)
        message = str(info.value)
        assert "\n" not in message
        assert message.startswith(f"fit: {WHAT[bad]} hold NaN or inf in batch 1 of epoch 1;")
        assert "no update was applied" in message
    else:  # Keras' own step: the loss and the first GP layer check, inside TensorFlow's error
        with pytest.raises(tf.errors.InvalidArgumentError, match=f"\\[non-finite\\] {WHAT[bad]}"):
            model.fit(poisoned(bad), epochs=2, verbose=0)
    for variable, old, new in zip(model.variables, before, state(model)):
        if kind != "avdgp" and "draw_counter" in variable.name:
            # Keras' own step checks y in the loss, after the forward pass counted its draws;
            # a counter's update does not wait for the first layer's check of x
            assert new in (old, old + 1)
        elif kind != "avdgp" and bad != "x" and "anchor_reach" in variable.name:
            # ... nor its running statistics: the reach follows the batch's finite inputs
            followed = followed_reach(model, old, _data()[0].numpy()[:BATCH])
            assert float(new) in (old, pytest.approx(followed, rel=1e-12))
        else:
            np.testing.assert_array_equal(new, old)
    optimizer_state = zip(before[len(model.variables) :], state(model)[len(model.variables) :])
    for index, (old, new) in enumerate(optimizer_state):  # iterations first, then the moments
        if kind != "avdgp" and index == 0:
            # Keras' own step counts the iteration without waiting for the update's inputs
            assert new in (old, old + 1)
        else:
            np.testing.assert_array_equal(new, old)
    losses = model.fit(dataset(x, y), epochs=2, verbose=0).history["loss"]
    assert np.all(np.isfinite(losses))


@pytest.mark.parametrize(
    "kind", ["avdgp", pytest.param("sequential", marks=pytest.mark.slow), "functional"]
)
def test_evaluate_refuses_a_dataset_with_inf(kind):
    model = _model(kind, gpflow.likelihoods.Gaussian(variance=0.1))
    model.compile(tf_keras.optimizers.Adam(0.05), loss=ga.AVDGPLoss())
    x, y, _ = (tensor.numpy() for tensor in _data())
    y[5, 0] = np.inf
    if kind == "avdgp":
        with pytest.raises(
            ValueError, match="^evaluate: the targets y hold NaN or inf in batch 1;"
        ):
            model.evaluate(dataset(x, y), verbose=0)
    else:
        with pytest.raises(tf.errors.InvalidArgumentError, match="non-finite.*the targets y"):
            model.evaluate(dataset(x, y), verbose=0)


@pytest.mark.slow
def test_a_non_finite_gradient_applies_no_update():
    """A loss whose gradient is NaN while the loss is finite (``sqrt`` at 0): stopped by the
    check of the gradients' global norm before any update."""
    model = _model("avdgp", gpflow.likelihoods.Gaussian(variance=0.1))
    variable = model.layers[-1].likelihood.variance.unconstrained_variable

    def loss(y_true, y_pred):  # reads the distribution (a loss that does not is refused)
        return tf.reduce_mean(predictive_distribution(y_pred).mean()) * 0.0 + tf.sqrt(
            variable * 0.0
        )

    model.compile(tf_keras.optimizers.Adam(0.05), loss=loss)
    x, y, _ = _data()
    place_anchors(model, x)  # as fit does first
    before = [v.numpy().copy() for v in model.variables]
    match = "^fit: the loss or a gradient is NaN or inf in batch 1 of epoch 1; no update"
    with pytest.raises(NonFiniteStep, match=match) as info:
        model.fit(dataset(x, y), epochs=1, verbose=0)
    assert not info.value.in_data  # a divergence: the avdgp harness reports it as such
    for old, new in zip(before, model.variables):
        if "anchor_reach" in new.name:  # a running statistic of the batch's finite inputs
            followed = followed_reach(model, old, x.numpy()[:BATCH])
            assert float(new) in (old, pytest.approx(followed, rel=1e-12))
        else:
            np.testing.assert_array_equal(old, new.numpy())


@pytest.mark.slow
def test_validation_inside_fit_prints_nothing(capsys):
    """``fit`` calls ``evaluate`` with its own ``CallbackList``; the batch tracking must leave
    it alone (a list of its callbacks gave the validation a progress bar of its own)."""
    model = _model("avdgp", gpflow.likelihoods.Gaussian(variance=0.1))
    model.compile(tf_keras.optimizers.Adam(0.05), loss=ga.AVDGPLoss())
    x, y, _ = _data()
    model.fit(x, y, batch_size=40, epochs=2, verbose=0, validation_data=(x[:40], y[:40]))
    assert capsys.readouterr().out == ""
