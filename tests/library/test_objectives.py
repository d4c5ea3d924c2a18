"""``AVDGPLoss``, mixture moments and ``mixture_log_density`` against NumPy loop references."""

import gpflow
import numpy as np
import pytest
import reference
import tensorflow as tf
from helpers import REFERENCE_TOLERANCE

from gpflux_avdgp import AVDGPLoss, GaussianMixture
from gpflux_avdgp.core.mixture import mixture_moments
from gpflux_avdgp.predictive import mixture_log_density

RTOL, ATOL = REFERENCE_TOLERANCE
B, S, Q = 5, 3, 2
NOISE_VARIANCE = 0.3
#: GPflow's ``inv_probit`` keeps probabilities in ``[1e-3, 1 - 1e-3]``.
PROBIT_JITTER = 1e-3
#: Non-Gaussian likelihoods' ELL is GPflow's Gauss-Hermite rule with this many nodes.
GPFLOW_GH_NODES = 20


@pytest.fixture
def mixture_arrays(rng):
    """``Q = 2`` outputs, ``S = 3`` components with unequal weights, and targets."""
    means = rng.normal(size=(B, S, Q))
    variances = np.exp(rng.normal(size=(B, S, Q)))
    logits = np.array([0.7, -0.4, 0.1])
    log_weights = np.tile(logits - np.log(np.exp(logits).sum()), (B, 1))
    y = rng.normal(size=(B, Q))
    return means, variances, log_weights, y


def _packed(means, variances, log_weights):
    return tf.constant(np.concatenate([means, variances, log_weights[..., None]], axis=-1))


def _mixture(means, variances, log_weights):
    return GaussianMixture(tf.constant(means), tf.constant(variances), tf.constant(log_weights))


def test_gaussian_elbo_loss_matches_reference(mixture_arrays):
    means, variances, log_weights, y = mixture_arrays
    loss = AVDGPLoss(gpflow.likelihoods.Gaussian(NOISE_VARIANCE), objective="elbo")
    actual = loss.call(tf.constant(y), _packed(means, variances, log_weights)).numpy()
    expected = reference.gaussian_elbo_loss(
        y, np.exp(log_weights), means, variances, NOISE_VARIANCE
    )
    assert actual.shape == (B,)
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL)
    # the Keras reduction is the batch mean of the per-datapoint losses
    reduced = loss(tf.constant(y), _packed(means, variances, log_weights)).numpy()
    np.testing.assert_allclose(reduced, expected.mean(), rtol=RTOL, atol=ATOL)


def test_gaussian_predictive_loss_matches_reference(mixture_arrays):
    means, variances, log_weights, y = mixture_arrays
    loss = AVDGPLoss(gpflow.likelihoods.Gaussian(NOISE_VARIANCE), objective="predictive")
    actual = loss.call(tf.constant(y), _packed(means, variances, log_weights)).numpy()
    expected = -reference.gaussian_mixture_log_density(
        y, log_weights, means, variances, NOISE_VARIANCE
    )
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL)

    # pins the reference code's mistake: a log-sum-exp per output is a different quantity
    per_output = np.zeros(B)
    for d in range(Q):
        per_output -= reference.gaussian_mixture_log_density(
            y[:, d : d + 1],
            log_weights,
            means[..., d : d + 1],
            variances[..., d : d + 1],
            NOISE_VARIANCE,
        )
    assert np.all(np.abs(actual - per_output) > 1e-3)


def test_predictive_loss_is_stable_far_from_the_data(mixture_arrays):
    """Every component density underflows in float64; the log-sum-exp must not."""
    means, _, log_weights, y = mixture_arrays
    variances = np.full((B, S, Q), 1e-3)
    y_far = y + 60.0
    noise = 1e-3
    loss = AVDGPLoss(gpflow.likelihoods.Gaussian(noise), objective="predictive")
    actual = loss.call(tf.constant(y_far), _packed(means, variances, log_weights)).numpy()
    expected = -reference.gaussian_mixture_log_density(y_far, log_weights, means, variances, noise)
    assert np.all(expected > 1e5)  # exp(-expected) == 0 in float64
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL)


def test_elbo_loss_single_output_accepts_rank_one_targets(rng):
    means = rng.normal(size=(B, S, 1))
    variances = np.exp(rng.normal(size=(B, S, 1)))
    log_weights = np.full((B, S), -np.log(S))
    y = rng.normal(size=B)
    loss = AVDGPLoss(gpflow.likelihoods.Gaussian(NOISE_VARIANCE))
    actual = loss.call(tf.constant(y), _packed(means, variances, log_weights)).numpy()
    expected = reference.gaussian_elbo_loss(
        y[:, None], np.exp(log_weights), means, variances, NOISE_VARIANCE
    )
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL)


def test_bernoulli_elbo_loss_matches_quadrature_reference(mixture_arrays):
    """Non-Gaussian ELL: GPflow's Gauss-Hermite rule, reproduced node by node."""
    means, variances, log_weights, y = mixture_arrays
    labels = (y > 0).astype(float)
    loss = AVDGPLoss(gpflow.likelihoods.Bernoulli(), objective="elbo")
    actual = loss.call(tf.constant(labels), _packed(means, variances, log_weights)).numpy()
    expected = reference.probit_elbo_loss(
        labels,
        np.exp(log_weights),
        means,
        variances,
        jitter=PROBIT_JITTER,
        num_nodes=GPFLOW_GH_NODES,
    )
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL)


def test_mixture_moments_follow_law_of_total_variance(mixture_arrays):
    means, variances, log_weights, _ = mixture_arrays
    mixture = _mixture(means, variances, log_weights)
    expected_mean, expected_var = reference.mixture_moments(np.exp(log_weights), means, variances)
    np.testing.assert_allclose(mixture.mean().numpy(), expected_mean, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(mixture.variance().numpy(), expected_var, rtol=RTOL, atol=ATOL)
    mean, variance = mixture_moments(tf.exp(log_weights), means, variances)  # the function form
    np.testing.assert_allclose(mean.numpy(), expected_mean, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(variance.numpy(), expected_var, rtol=RTOL, atol=ATOL)
    # not the average of the variances: the spread of the means adds to it
    average_var = np.einsum("bs,bsd->bd", np.exp(log_weights), variances)
    assert np.all(expected_var - average_var > 1e-6)


def test_mixture_moments_of_a_deterministic_input(rng):
    x = rng.normal(size=(B, Q))
    mixture = GaussianMixture.deterministic(tf.constant(x))
    np.testing.assert_array_equal(mixture.mean().numpy(), x)
    np.testing.assert_array_equal(mixture.variance().numpy(), np.zeros((B, Q)))


def test_gaussian_mixture_log_density_matches_reference(mixture_arrays):
    means, variances, log_weights, y = mixture_arrays
    actual = mixture_log_density(
        gpflow.likelihoods.Gaussian(NOISE_VARIANCE),
        _mixture(means, variances, log_weights),
        tf.constant(y),
    ).numpy()
    expected = reference.gaussian_mixture_log_density(
        y, log_weights, means, variances, NOISE_VARIANCE
    )
    assert actual.shape == (B,)
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL)


def test_bernoulli_mixture_log_density_matches_reference(mixture_arrays):
    """Predictive probability ``sum_s w_s Phi(m_s / sqrt(1 + v_s))``, not ``exp(E[log Phi])``."""
    means, variances, log_weights, y = mixture_arrays
    labels = (y > 0).astype(float)
    actual = mixture_log_density(
        gpflow.likelihoods.Bernoulli(),
        _mixture(means, variances, log_weights),
        tf.constant(labels),
    ).numpy()
    expected = reference.probit_mixture_log_density(
        labels, log_weights, means, variances, jitter=PROBIT_JITTER
    )
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL)
    # strictly above the bound -ELBO would give (Jensen), so it is not the bound
    bound = -reference.probit_elbo_loss(
        labels,
        np.exp(log_weights),
        means,
        variances,
        jitter=PROBIT_JITTER,
        num_nodes=GPFLOW_GH_NODES,
    )
    assert np.all(actual > bound + 1e-6)
