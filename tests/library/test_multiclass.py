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
from gpflux_avdgp.predictive import (
    component_log_density,
    component_variational_expectations,
    component_y_moments,
)

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


def test_component_expectations_are_the_likelihoods_terms_of_each_component(rng):
    """RobustMax's terms are deterministic (Gauss-Hermite), so they can be compared with a
    loop that calls the GPflow likelihood on one component at a time."""
    likelihood = _likelihood("robustmax")
    mixture = _mixture(rng)
    labels = rng.integers(0, K, size=(6, 1)).astype(np.float64)
    ours = component_variational_expectations(likelihood, mixture, tf.constant(labels))
    loop = np.stack(
        [
            likelihood.variational_expectations(
                None, mixture.means[:, s], mixture.variances[:, s], tf.constant(labels)
            )
            for s in range(4)
        ],
        axis=1,
    )
    np.testing.assert_allclose(ours.numpy(), loop, rtol=1e-12)


def _normalised_class_probabilities(likelihood, means: np.ndarray, variances: np.ndarray):
    """Loop reference: GPflow's class probabilities of one component, divided by their sum."""
    p, _ = likelihood.predict_mean_and_var(None, tf.constant(means), tf.constant(variances))
    p = np.asarray(p)
    return p / p.sum(axis=1, keepdims=True)


def test_component_log_density_is_the_log_of_the_normalised_class_probability(rng):
    likelihood = _likelihood("robustmax")
    mixture = _mixture(rng)
    labels = rng.integers(0, K, size=(6, 1))
    ours = component_log_density(likelihood, mixture, tf.constant(labels.astype(np.float64)))
    loop = np.empty((6, 4))
    for s in range(4):
        p = _normalised_class_probabilities(
            likelihood, mixture.means[:, s].numpy(), mixture.variances[:, s].numpy()
        )
        loop[:, s] = np.log(p[np.arange(6), labels[:, 0]])
    np.testing.assert_allclose(ours.numpy(), loop, rtol=1e-12)


def test_class_probabilities_sum_to_one_where_gpflows_quadrature_does_not(rng):
    """RobustMax integrates each class with its own Gauss-Hermite rule: with small or large
    component variances GPflow's probabilities do not sum to one; ours are renormalised."""
    likelihood = _likelihood("robustmax")
    means = rng.normal(size=(500, 1, K)) * 3.0
    variances = rng.uniform(0.001, 5.0, size=(500, 1, K))
    gpflow_p, _ = likelihood.predict_mean_and_var(None, means[:, 0], variances[:, 0])
    assert np.max(np.abs(np.sum(gpflow_p, axis=1) - 1.0)) > 1e-2  # the problem is real
    probabilities, variances_y = component_y_moments(
        likelihood, tf.constant(means), tf.constant(variances)
    )
    np.testing.assert_allclose(np.sum(probabilities, axis=-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(
        probabilities[:, 0],
        _normalised_class_probabilities(likelihood, means[:, 0], variances[:, 0]),
        rtol=1e-12,
    )
    np.testing.assert_allclose(variances_y, probabilities * (1.0 - probabilities), atol=1e-15)


def test_targets_are_one_class_index_per_row(rng):
    loss = AVDGPLoss(_likelihood("robustmax"))
    with pytest.raises(ValueError, match=r"shape \[batch, 1\] to match the model's one class"):
        loss.call(tf.zeros([6, K], tf.float64), _mixture(rng).pack())


@pytest.mark.parametrize("invlink", [pytest.param("robustmax", marks=pytest.mark.slow), "softmax"])
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
