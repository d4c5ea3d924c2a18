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
import tensorflow as tf
from gpflow.keras import tf_keras
from test_model_types import NUM_DATA, _data, _model

import gpflux_avdgp as ga
from gpflux_avdgp.layers.anchor_placement import place_anchors

BATCH = 40


def dataset(x, y, weights=None) -> tf.data.Dataset:
    parts = (x, y) if weights is None else (x, y, weights)
    return tf.data.Dataset.from_tensor_slices(parts).batch(BATCH)


def poisoned(kind: str) -> tf.data.Dataset:
    """The data with one bad value in the third batch (row 90)."""
    x, y, _ = (tensor.numpy() for tensor in _data())
    weights = np.ones(NUM_DATA)
    if kind == "y":
        y[90, 0] = np.nan
    elif kind == "x":
        x[90, 1] = np.inf
    else:
        weights[90] = np.nan
    return dataset(x, y, weights if kind == "sample_weight" else None)


def state(model: tf_keras.Model) -> list[np.ndarray]:
    return [v.numpy().copy() for v in model.variables + model.optimizer.variables()]


WHAT = {"y": "the targets y", "x": "the inputs x", "sample_weight": "sample_weight"}


def cases(*default: tuple[str, ...]) -> list:
    """Every model type with every bad input; those not in ``default`` run in the slow suite
    (each case traces two models)."""
    return [
        pytest.param(kind, bad, marks=[] if (kind, bad) in default else [pytest.mark.slow])
        for kind in ("avdgp", "sequential", "functional")
        for bad in ("y", "sample_weight", "x")
    ]


@pytest.mark.parametrize(
    "kind, bad",
    cases(
        ("avdgp", "y"),
        ("avdgp", "sample_weight"),
        ("avdgp", "x"),
        ("functional", "sample_weight"),
        ("sequential", "y"),
    ),
)
def test_a_non_finite_batch_applies_no_update_and_the_model_fits_clean_data(kind, bad):
    model = _model(kind, gpflow.likelihoods.Gaussian(variance=0.1))
    model.compile(tf_keras.optimizers.Adam(0.05), loss=ga.AVDGPLoss())
    x, y, _ = _data()
    model.fit(dataset(x, y), epochs=1, verbose=0)  # the optimizer's slots exist
    before = state(model)
    if kind == "avdgp":
        with pytest.raises(ValueError) as info:
            model.fit(poisoned(bad), epochs=2, verbose=0)
        message = str(info.value)
        assert "\n" not in message
        assert message.startswith(f"fit: {WHAT[bad]} hold NaN or inf in batch 3 of epoch 1;")
        assert "no update was applied" in message
    else:  # Keras' own step: the loss and the first GP layer check, inside TensorFlow's error
        with pytest.raises(tf.errors.InvalidArgumentError, match=f"\\[non-finite\\] {WHAT[bad]}"):
            model.fit(poisoned(bad), epochs=2, verbose=0)
    after = state(model)
    changed = [i for i, (b, a) in enumerate(zip(before, after)) if not np.array_equal(b, a)]
    # the two batches before the bad one trained; undo them to compare the rest is not
    # possible, so the poisoned fit is compared with a clean fit of those two batches
    reference = _model(kind, gpflow.likelihoods.Gaussian(variance=0.1))
    reference.compile(tf_keras.optimizers.Adam(0.05), loss=ga.AVDGPLoss())
    reference.fit(dataset(x, y), epochs=1, verbose=0)
    reference.fit(dataset(x[:80], y[:80]), epochs=1, verbose=0)
    for variable, mine, theirs in zip(model.variables, after, state(reference)):
        if kind != "avdgp" and "draw_counter" in variable.name:
            # Keras' own step checks y in the loss, after the forward pass counted its draws
            assert mine == theirs + 1
        else:
            np.testing.assert_array_equal(mine, theirs)
    assert changed, "the batches before the bad one trained"
    assert all(np.all(np.isfinite(value)) for value in after)
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


def test_a_non_finite_gradient_applies_no_update():
    """A loss whose gradient is NaN while the loss is finite (``sqrt`` at 0): stopped by the
    gradient check, naming the variable."""
    model = _model("avdgp", gpflow.likelihoods.Gaussian(variance=0.1))
    variable = model.layers[-1].likelihood.variance.unconstrained_variable

    def loss(y_true, y_pred):
        return tf.reduce_mean(y_pred) * 0.0 + tf.sqrt(variable * 0.0)

    model.compile(tf_keras.optimizers.Adam(0.05), loss=loss)
    x, y, _ = _data()
    place_anchors(model, x)  # as fit does first
    before = [v.numpy().copy() for v in model.variables]
    with pytest.raises(ValueError, match="^fit: the gradient of .* is NaN or inf in batch 1 of"):
        model.fit(dataset(x, y), epochs=1, verbose=0)
    for old, new in zip(before, model.variables):
        np.testing.assert_array_equal(old, new.numpy())
