"""Multi-class classification with GPflow's ``MultiClass`` (``RobustMax``) and ``Softmax``
likelihoods: the loss, the log density and the class probabilities of a mixture."""

from __future__ import annotations

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras

import gpflux_avdgp
from gpflux_avdgp import AVDGPLoss, GaussianMixture, predict_mixture
from gpflux_avdgp.objectives import component_log_density, component_variational_expectations

K = 3


def _likelihood(name: str) -> gpflow.likelihoods.Likelihood:
    if name == "robustmax":
        return gpflow.likelihoods.MultiClass(K, invlink=gpflow.likelihoods.RobustMax(K))
    return gpflow.likelihoods.Softmax(K)


def _mixture(rng, batch: int = 6, components: int = 4) -> GaussianMixture:
    logits = rng.normal(size=(batch, components))
    return GaussianMixture(
        means=tf.constant(rng.normal(size=(batch, components, K))),
        variances=tf.constant(rng.uniform(0.1, 1.0, size=(batch, components, K))),
        log_weights=tf.constant(logits - np.log(np.exp(logits).sum(1, keepdims=True))),
    )


@pytest.mark.parametrize("function", ["variational_expectations", "predict_log_density"])
def test_component_terms_are_the_likelihoods_terms_of_each_component(rng, function):
    """RobustMax's terms are deterministic (Gauss-Hermite), so they can be compared with a
    loop that calls the GPflow likelihood on one component at a time."""
    likelihood = _likelihood("robustmax")
    mixture = _mixture(rng)
    labels = rng.integers(0, K, size=(6, 1)).astype(np.float64)
    ours = {
        "variational_expectations": component_variational_expectations,
        "predict_log_density": component_log_density,
    }[function](likelihood, mixture, tf.constant(labels))
    method = getattr(likelihood, function)
    loop = np.stack(
        [
            method(None, mixture.means[:, s], mixture.variances[:, s], tf.constant(labels))
            for s in range(4)
        ],
        axis=1,
    )
    np.testing.assert_allclose(ours.numpy(), loop, rtol=1e-12)


def test_targets_are_one_class_index_per_row(rng):
    loss = AVDGPLoss(_likelihood("robustmax"))
    with pytest.raises(ValueError, match=r"shape \[batch, 1\] to match the model's one class"):
        loss.call(tf.zeros([6, K], tf.float64), _mixture(rng).pack())


@pytest.mark.parametrize("invlink", ["robustmax", "softmax"])
def test_a_multiclass_avdgp_trains_and_predicts_class_probabilities(rng, invlink):
    x = rng.uniform(-2.0, 2.0, size=(150, 2))
    scores = np.stack([x[:, 0], x[:, 1], -x[:, 0] - x[:, 1]], axis=1)
    y = np.argmax(scores, axis=1).astype(np.float64)[:, None]
    likelihood = _likelihood(invlink)
    model = gpflux_avdgp.build_avdgp(2, [K], 6, len(x), likelihood, num_points=3, seed=0)
    model.compile(tf_keras.optimizers.Adam(0.05), loss=AVDGPLoss(likelihood))
    history = model.fit(x, y, batch_size=50, epochs=15, verbose=0)
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]
    prediction = predict_mixture(model, x)
    probabilities = prediction.class_probabilities()
    assert probabilities.shape == (150, K)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-6)
    error_rate = np.mean(np.argmax(probabilities, axis=1) != y[:, 0])
    assert error_rate < 0.3, error_rate  # chance is 2/3
    log_density = prediction.log_density(y)
    assert log_density.shape == (150,) and np.all(np.isfinite(log_density))
