"""Pin the fixes of the public reference code's mistakes that live in the core (docs/design.md,
"Reference-code mistakes we do not repeat").

* AR1 must draw independent Monte Carlo samples for every datapoint and component (the
  reference code pairs datapoint ``b`` with node ``b mod S``, collapsing the quadrature).
* The predictive (AR2PP) objective is one log-sum-exp over components of the log-density
  summed over outputs, not a log-sum-exp per output.
* The classification predictive density is ``E[Phi]``, not the bound ``exp(E[log Phi])``.
* Inference MLPs have two hidden layers of width ``min(in, out)`` with LeakyReLU(0.2); sigma
  points are not squashed by ``5 tanh(xi / 2)``; sigma-point weights start uniform.

The CRPS mistake is pinned with the metrics, outside the core.
"""

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras
from scipy.special import logsumexp
from scipy.stats import norm

import gpflux_avdgp
from gpflux_avdgp import GaussianMixture, PropagationRule
from gpflux_avdgp.predictive import output_mixture


def _distinct_rows(values: np.ndarray, atol: float = 1e-9) -> bool:
    """Whether all rows of ``values`` ``[K, D]`` are pairwise different."""
    gaps = np.abs(values[:, None, :] - values[None, :, :]).max(axis=-1)  # [K, K]
    np.fill_diagonal(gaps, np.inf)
    return bool(gaps.min() > atol)


def _identical_mixture(batch: int, components: int, dim: int) -> GaussianMixture:
    means = np.broadcast_to(np.linspace(-1.0, 1.0, dim), (batch, components, dim))
    variances = np.broadcast_to(np.linspace(0.5, 2.0, dim), (batch, components, dim))
    return GaussianMixture(
        means=tf.constant(means),
        variances=tf.constant(variances),
        log_weights=tf.fill([batch, components], tf.constant(-np.log(components), tf.float64)),
    )


# ----------------------------------------------------------------- AR1 Monte Carlo draws
@pytest.mark.parametrize("input_components", [1, 4], ids=["expanding", "paired"])
def test_ar1_draws_differ_across_datapoints_and_components(input_components):
    batch, num_points, dim = 7, 4, 2
    mixture = _identical_mixture(batch, input_components, dim)
    propagated = gpflux_avdgp.propagation.propagate(
        mixture, PropagationRule.AR1, num_points=num_points
    )
    locations = propagated.locations.numpy()
    assert locations.shape == (batch, num_points, dim)
    # every (datapoint, component) pair has its own draw: no b mod S pairing, no sharing
    assert _distinct_rows(locations.reshape(-1, dim))
    # under AR1 each sample is its own amortization input
    np.testing.assert_array_equal(propagated.amortization_input.numpy(), locations)
    np.testing.assert_allclose(np.exp(propagated.log_weights.numpy()), 1.0 / num_points)


def test_ar1_draws_have_the_input_moments():
    """Independent draws per datapoint: the draws over identical rows are N(m, v)."""
    batch, dim = 4000, 2
    mixture = _identical_mixture(batch, 1, dim)
    locations = gpflux_avdgp.propagation.propagate(
        mixture, PropagationRule.AR1, num_points=1, seed=3
    ).locations.numpy()[:, 0, :]
    mean, var = mixture.means.numpy()[0, 0], mixture.variances.numpy()[0, 0]
    np.testing.assert_array_less(np.abs(locations.mean(0) - mean), 4.0 * np.sqrt(var / batch))
    # sample variance of a Gaussian: standard error var * sqrt(2 / (batch - 1))
    np.testing.assert_array_less(
        np.abs(locations.var(0, ddof=1) - var), 4.0 * var * np.sqrt(2.0 / (batch - 1))
    )


def test_ar1_model_outputs_differ_across_identical_rows():
    batch, num_points = 6, 3
    # The paper's start (W_m = I): the second layer's inducing points follow its sampled
    # inputs. With W_m = 0 the untrained first layer's variance at this far-out x is large
    # (about 80), every sample lands far from the second layer's shared points and all outputs
    # are the prior's: identical for a reason that has nothing to do with sample pairing.
    model = gpflux_avdgp.build_avdgp(
        2,
        [2, 1],
        3,
        num_data=50,
        likelihood=gpflow.likelihoods.Gaussian(),
        rule="ar1",
        num_points=num_points,
        num_train_samples=num_points,  # AR1 trains on one sample unless told otherwise
        seed=5,
        preset="paper",
    )
    x = np.tile([[0.3, -0.7]], (batch, 1))
    first = GaussianMixture.unpack(model.layers[0](x, training=True))
    # the first layer is deterministic in x: identical rows give identical outputs
    np.testing.assert_allclose(
        first.means.numpy(), np.broadcast_to(first.means.numpy()[:1], first.means.shape)
    )
    output = output_mixture(model(x, training=True))
    assert output.means.shape == (batch, num_points, 1)
    means = output.means.numpy().reshape(batch * num_points, -1)
    variances = output.variances.numpy().reshape(batch * num_points, -1)
    assert _distinct_rows(means)
    assert _distinct_rows(variances)


# ----------------------------------------------------------------- predictive objective
def _component_log_density(y, means, variances, noise):
    """``log N(y_d | m_sd, v_sd + noise)``, ``[B, S, Q]``."""
    return norm.logpdf(y[:, None, :], means, np.sqrt(variances + noise))


def test_predictive_objective_is_joint_over_outputs():
    noise = 0.05
    likelihood = gpflow.likelihoods.Gaussian(variance=noise)
    # component 0 explains output 0 only, component 1 explains output 1 only: the joint
    # density is small, the per-output product of mixtures is large.
    y = np.array([[0.0, 0.0], [1.0, -1.0]])
    means = np.array([[[0.0, 3.0], [3.0, 0.0]], [[1.0, 2.0], [-2.0, -1.0]]])  # [B, S, Q]
    variances = np.full_like(means, 0.1)
    log_weights = np.log(np.array([[0.5, 0.5], [0.3, 0.7]]))
    packed = GaussianMixture(
        tf.constant(means), tf.constant(variances), tf.constant(log_weights)
    ).pack()
    loss = gpflux_avdgp.AVDGPLoss(
        likelihood, objective="predictive", reduction=tf_keras.losses.Reduction.NONE
    )(y, packed).numpy()

    log_density = _component_log_density(y, means, variances, noise)  # [B, S, Q]
    joint = -logsumexp(log_weights + log_density.sum(-1), axis=-1)  # [B]
    per_output = -logsumexp(log_weights[..., None] + log_density, axis=1).sum(-1)  # [B]
    np.testing.assert_allclose(loss, joint, rtol=1e-12)
    assert np.all(loss - per_output > 5.0), (loss, per_output)


def test_predictive_objective_random_mixture(rng):
    noise = 0.3
    batch, components, outputs = 5, 4, 3
    y = rng.standard_normal((batch, outputs))
    means = rng.standard_normal((batch, components, outputs))
    variances = rng.uniform(0.1, 1.0, (batch, components, outputs))
    log_weights = np.log(rng.dirichlet(np.ones(components), batch))
    packed = GaussianMixture(
        tf.constant(means), tf.constant(variances), tf.constant(log_weights)
    ).pack()
    loss = gpflux_avdgp.AVDGPLoss(
        gpflow.likelihoods.Gaussian(variance=noise), objective="predictive"
    )(y, packed).numpy()
    log_density = _component_log_density(y, means, variances, noise)
    expected = -logsumexp(log_weights + log_density.sum(-1), axis=-1).mean()
    np.testing.assert_allclose(loss, expected, rtol=1e-12)


# ----------------------------------------------------------------- classification density
def _gpflow_probit(x: np.ndarray) -> np.ndarray:
    """GPflow's ``inv_probit``: ``Phi`` squashed into ``[1e-3, 1 - 1e-3]``."""
    return norm.cdf(x) * (1.0 - 2e-3) + 1e-3


def _check_bernoulli_log_density(prediction: gpflux_avdgp.PredictiveMixture, y: np.ndarray):
    weights = prediction.weights  # [N, S]
    means, variances = prediction.f_means[..., 0], prediction.f_variances[..., 0]  # [N, S]
    assert variances.min() > 0.05, "the check needs non-degenerate latent variances"

    # E[Phi(f)] under N(m, v) is Phi(m / sqrt(1 + v)); the mixture averages it over s
    prob_one = np.sum(weights * _gpflow_probit(means / np.sqrt(1.0 + variances)), axis=-1)
    expected = np.where(y[:, 0] == 1.0, np.log(prob_one), np.log1p(-prob_one))
    log_density = prediction.log_density(y)
    np.testing.assert_allclose(log_density, expected, rtol=1e-10)
    np.testing.assert_allclose(prediction.class_probabilities()[:, 0], prob_one, rtol=1e-10)

    # the reference code's exp(E[log Phi]) per component (Gauss-Hermite, 100 nodes)
    nodes, node_weights = np.polynomial.hermite_e.hermegauss(100)
    f = means[..., None] + np.sqrt(variances)[..., None] * nodes  # [N, S, H]
    phi = _gpflow_probit(f)
    phi_y = np.where(y[:, :, None] == 1.0, phi, 1.0 - phi)
    expected_log_phi = (np.log(phi_y) * node_weights).sum(-1) / np.sqrt(2.0 * np.pi)  # [N, S]
    bound = np.log(np.sum(weights * np.exp(expected_log_phi), axis=-1))  # [N]
    return log_density - bound


def test_bernoulli_log_density_uses_expected_probit_in_a_model():
    likelihood = gpflow.likelihoods.Bernoulli()
    model = gpflux_avdgp.build_avdgp(
        2, [2, 1], 3, num_data=30, likelihood=likelihood, rule="ar2p", num_points=5, seed=2
    )
    x = np.random.default_rng(0).uniform(-2.0, 2.0, (9, 2))
    y = (np.arange(9) % 2).astype(np.float64)[:, None]  # both classes
    prediction = gpflux_avdgp.predict_mixture(model, x)
    assert prediction.weights.shape == (9, 5)
    gap = _check_bernoulli_log_density(prediction, y)
    assert np.all(gap > 1e-3), gap


def test_bernoulli_log_density_uses_expected_probit(rng):
    num_test, components = 12, 4
    means = 2.0 * rng.standard_normal((num_test, components, 1))
    variances = rng.uniform(0.2, 3.0, (num_test, components, 1))
    likelihood = gpflow.likelihoods.Bernoulli()
    y_means, y_variances = likelihood.predict_mean_and_var(None, means, variances)
    prediction = gpflux_avdgp.PredictiveMixture(
        weights=rng.dirichlet(np.ones(components), num_test),
        f_means=means,
        f_variances=variances,
        y_means=y_means.numpy(),
        y_variances=y_variances.numpy(),
        likelihood=likelihood,
    )
    y = rng.integers(0, 2, (num_test, 1)).astype(np.float64)
    gap = _check_bernoulli_log_density(prediction, y)
    assert np.all(gap > 1e-2), gap


# ----------------------------------------------------------------- network shapes
@pytest.mark.parametrize("input_dim", [5, 8])
@pytest.mark.parametrize("full_rank", [False, True])
def test_affine_inference_networks_follow_the_paper(input_dim, full_rank):
    num_inducing, output_dim = 3, 2
    inference = gpflux_avdgp.layers.inference.AffineInference(
        num_inducing, output_dim, full_rank=full_rank, dtype=tf.float64
    )
    inference.build((None, input_dim))
    mean_size = num_inducing * output_dim
    scale_size = mean_size + (output_dim * 3 if full_rank else 0)  # M (M - 1) / 2 = 3
    for network, out_size in (
        (inference.mean_network, mean_size),
        (inference.scale_network, scale_size),
    ):
        _assert_paper_mlp(network, input_dim, out_size)


@pytest.mark.parametrize("input_dim", [2, 6])
def test_mlp_inference_network_follows_the_paper(input_dim):
    num_inducing, output_dim = 2, 3
    inference = gpflux_avdgp.layers.inference.MLPInference(
        num_inducing, output_dim, dtype=tf.float64
    )
    inference.build((None, input_dim))
    out_size = num_inducing * input_dim + 2 * num_inducing * output_dim
    _assert_paper_mlp(inference.network, input_dim, out_size)


@pytest.mark.parametrize("inference", ["affine", "mlp"])
def test_layer_default_is_two_hidden_layers(inference):
    layer = gpflux_avdgp.AmortizedGPLayer(2, 3, 10, inference=inference)
    assert layer.hidden_layers == 2
    layer.build((None, 4))
    networks = (
        [layer.inference.mean_network, layer.inference.scale_network]
        if inference == "affine"
        else [layer.inference.network]
    )
    for network in networks:
        dense = [lay for lay in network.layers if isinstance(lay, tf_keras.layers.Dense)]
        assert len(dense) == 3  # two hidden layers and the output layer


def _assert_paper_mlp(network: tf_keras.Sequential, input_dim: int, out_size: int) -> None:
    width = min(input_dim, out_size)
    kinds = [type(lay) for lay in network.layers]
    assert kinds == [
        tf_keras.layers.Dense,
        tf_keras.layers.LeakyReLU,
        tf_keras.layers.Dense,
        tf_keras.layers.LeakyReLU,
        tf_keras.layers.Dense,
    ]
    hidden_0, act_0, hidden_1, act_1, output = network.layers
    assert hidden_0.kernel.shape == (input_dim, width)
    assert hidden_1.kernel.shape == (width, width)
    assert output.kernel.shape == (width, out_size)
    for dense in (hidden_0, hidden_1, output):
        assert dense.activation is tf_keras.activations.linear
    for act in (act_0, act_1):
        np.testing.assert_allclose(act(tf.constant([-1.0, 2.0], tf.float64)).numpy(), [-0.2, 2.0])


# ----------------------------------------------------------------- sigma points
def test_sigma_points_are_not_squashed():
    """F = m + xi sqrt(v) for any xi (the reference code bounds xi by 5 tanh(xi / 2))."""
    mixture = _identical_mixture(3, 1, 2)
    sigma_points = tf.constant([[7.0, -9.0], [0.5, 0.0], [-12.0, 3.0]], tf.float64)
    log_weights = tf.math.log(tf.constant([0.2, 0.3, 0.5], tf.float64))
    propagated = gpflux_avdgp.propagation.propagate(
        mixture,
        PropagationRule.AR2P,
        num_points=3,
        sigma_points=sigma_points,
        log_weights=log_weights,
    )
    expected = mixture.means.numpy() + sigma_points.numpy()[None] * np.sqrt(
        mixture.variances.numpy()
    )
    np.testing.assert_allclose(propagated.locations.numpy(), expected, rtol=1e-14)
    np.testing.assert_allclose(propagated.log_weights.numpy(), np.log([[0.2, 0.3, 0.5]] * 3))


def test_sigma_point_weights_start_uniform():
    num_points = 5
    model = gpflux_avdgp.build_avdgp(
        2,
        [2, 2, 1],
        2,
        num_data=10,
        likelihood=gpflow.likelihoods.Gaussian(),
        num_points=num_points,
        seed=0,
    )
    second, third = model.layers[1], model.layers[2]
    np.testing.assert_array_equal(second.weight_logits.numpy(), np.zeros(num_points))
    assert third.weight_logits is None  # later layers reuse the shared weights
    output = output_mixture(model(np.zeros((4, 2)), training=True))
    np.testing.assert_allclose(output.weights.numpy(), np.full((4, num_points), 1 / num_points))
