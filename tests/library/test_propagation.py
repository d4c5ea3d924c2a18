"""Amortization rules: sigma-point (AR2P) propagation through a stack, and AR1/AR2 sampling."""

import gpflow
import numpy as np
import pytest
import reference
import tensorflow as tf
from gpflow.keras import tf_keras
from helpers import REFERENCE_TOLERANCE
from scipy import stats

from gpflux_avdgp import AmortizedGPLayer, GaussianMixture, PropagationRule
from gpflux_avdgp.checks import check_choice
from gpflux_avdgp.core.mixture import unpack_numpy
from gpflux_avdgp.propagation import propagate
from gpflux_avdgp.rules import ModelRule, Objective

RTOL, ATOL = REFERENCE_TOLERANCE
B, D, S, NUM_DATA = 4, 2, 4, 50
UNITS, INDUCING = (3, 2, 1), (3, 2, 2)
KERNEL_PARAMS = ((1.3, 0.8), (0.9, 1.2), (1.1, 0.7))  # (variance, lengthscale) per layer
LAYER_OPTIONS = (
    {},
    {"full_rank": True, "mean_function": "linear"},
    {"whiten": True},
)


def _set_weights(layer, rng, kernel_params):
    layer.kernel.variance.assign(kernel_params[0])
    layer.kernel.lengthscales.assign(kernel_params[1])
    for variable in layer.inference.trainable_variables:
        variable.assign(variable + 0.2 * rng.normal(size=variable.shape))


def _ar2p_model(rng):
    layers = [
        AmortizedGPLayer(q, m, NUM_DATA, rule="ar2p", num_points=S, seed=10 + i, **options)
        for i, (q, m, options) in enumerate(zip(UNITS, INDUCING, LAYER_OPTIONS))
    ]
    model = tf_keras.Sequential([tf_keras.Input((D,), dtype=tf.float64), *layers])
    for layer, params in zip(layers, KERNEL_PARAMS):
        _set_weights(layer, rng, params)
    layers[1].weight_logits.assign(rng.normal(size=S))  # unequal sigma-point weights
    return model, layers


def _log_softmax(logits):
    shifted = logits - logits.max()
    return shifted - np.log(np.exp(shifted).sum())


def _forward(layer, params, locations, h):
    return reference.affine_layer_forward(
        layer,
        reference.matern52(*params),
        locations,
        h,
        jitter=gpflow.config.default_jitter(),
    )


def test_ar2p_stack_matches_layer_by_layer_reference(rng):
    model, (layer1, layer2, layer3) = _ar2p_model(rng)
    x = rng.normal(size=(B, D))
    means, variances, log_weights = unpack_numpy(model(tf.constant(x)).numpy())
    assert means.shape == (B, S, UNITS[-1])

    assert layer1.sigma_points is None and layer1.weight_logits is None
    assert layer3.weight_logits is None  # later layers reuse the expanding layer's weights
    xi2, xi3 = layer2.sigma_points.numpy(), layer3.sigma_points.numpy()  # [S, 3], [S, 2]
    assert xi2.shape == (S, UNITS[0]) and xi3.shape == (S, UNITS[1])
    log_w = _log_softmax(layer2.weight_logits.numpy())
    w = np.exp(log_w)

    # layer 1: deterministic input, F = h = x
    m1, v1, kl1 = _forward(layer1, KERNEL_PARAMS[0], x[:, None, :], x)
    # layer 2: expands the one-component mixture with sigma points, h = m1
    f2 = np.zeros((B, S, UNITS[0]))
    for b in range(B):
        for s in range(S):
            f2[b, s] = m1[b, 0] + xi2[s] * np.sqrt(v1[b, 0])
    m2, v2, kl2 = _forward(layer2, KERNEL_PARAMS[1], f2, m1[:, 0])
    # layer 3: paired propagation (component s uses node s), h = sum_s w_s m2_s
    f3 = np.zeros((B, S, UNITS[1]))
    h3 = np.zeros((B, UNITS[1]))
    for b in range(B):
        for s in range(S):
            f3[b, s] = m2[b, s] + xi3[s] * np.sqrt(v2[b, s])
            h3[b] += w[s] * m2[b, s]
    m3, v3, kl3 = _forward(layer3, KERNEL_PARAMS[2], f3, h3)

    np.testing.assert_allclose(means, m3, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(variances, v3, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(log_weights, np.tile(log_w, (B, 1)), rtol=RTOL, atol=ATOL)
    expected_losses = [kl.mean() / NUM_DATA for kl in (kl1, kl2, kl3)]
    np.testing.assert_allclose(
        [loss.numpy() for loss in model.losses], expected_losses, rtol=RTOL, atol=ATOL
    )
    # the sigma points are deterministic: training mode gives the same mixture
    np.testing.assert_allclose(
        model(tf.constant(x), training=True).numpy(),
        model(tf.constant(x)).numpy(),
        rtol=RTOL,
        atol=ATOL,
    )


def _random_mixture(rng, num_components, *, uniform: bool = False, batch=B, dim=D):
    means = rng.normal(size=(batch, num_components, dim))
    variances = np.exp(rng.normal(size=(batch, num_components, dim)))
    logits = np.zeros(num_components) if uniform else rng.normal(size=num_components)
    log_weights = np.tile(_log_softmax(logits), (batch, 1))
    return means, variances, log_weights


def _mixture(means, variances, log_weights):
    return GaussianMixture(tf.constant(means), tf.constant(variances), tf.constant(log_weights))


@pytest.mark.parametrize("rule", ["ar1", "ar2"])
def test_sampled_rules_expand_one_component(rng, rule):
    means, variances, log_weights = _random_mixture(rng, 1)
    num_points = 5
    out = propagate(_mixture(means, variances, log_weights), rule, num_points=num_points, seed=3)
    locations = out.locations.numpy()
    assert locations.shape == (B, num_points, D)
    np.testing.assert_allclose(out.log_weights.numpy(), np.full((B, num_points), -np.log(5)))
    if rule == "ar1":  # each sample is its own amortization input
        np.testing.assert_array_equal(out.amortization_input.numpy(), locations)
    else:  # the mixture mean
        np.testing.assert_allclose(out.amortization_input.numpy(), means[:, 0], rtol=RTOL)
    eps = (locations - means) / np.sqrt(variances)
    assert np.unique(np.round(eps, 12)).size == eps.size  # fresh draw for every entry


@pytest.mark.parametrize("rule", ["ar1", "ar2"])
def test_sampled_rules_keep_components_and_weights(rng, rule):
    """A mixture with ``S`` components is propagated component by component."""
    means, variances, log_weights = _random_mixture(rng, S, uniform=True)
    out = propagate(_mixture(means, variances, log_weights), rule, num_points=S, seed=3)
    assert out.locations.shape == (B, S, D)
    np.testing.assert_allclose(out.log_weights.numpy(), log_weights, rtol=RTOL, atol=ATOL)
    if rule == "ar1":
        np.testing.assert_array_equal(out.amortization_input.numpy(), out.locations.numpy())
    else:  # AR2: h is the mean of the (equally weighted) component means
        np.testing.assert_allclose(
            out.amortization_input.numpy(), means.mean(axis=1), rtol=RTOL, atol=ATOL
        )


@pytest.mark.parametrize("rule", ["ar1", "ar2"])
def test_sampled_locations_are_standard_normal_draws(rng, rule):
    """``eps = (F - m) / sqrt(v)`` is i.i.d. N(0, 1) over datapoints, components and dims.

    The draws are seeded (global and op seed), so the bounds below (about 4 standard errors)
    are deterministic, not flaky; they would catch a wrong scale (``v`` instead of
    ``sqrt(v)``), a shared draw across datapoints or components, or a missing mean.
    """
    batch, num_points, dim = 1000, 6, 2
    means, variances, log_weights = _random_mixture(
        rng, num_points, uniform=True, batch=batch, dim=dim
    )
    variances *= 4.0  # far from one, so sqrt(v) vs v matters
    out = propagate(_mixture(means, variances, log_weights), rule, num_points=num_points, seed=5)
    eps = (out.locations.numpy() - means) / np.sqrt(variances)  # [batch, S, dim]
    flat = eps.reshape(-1)
    n = flat.size
    assert abs(flat.mean()) < 4.0 / np.sqrt(n)
    assert abs(flat.var() - 1.0) < 4.0 * np.sqrt(2.0 / n)
    assert stats.kstest(flat, "norm").pvalue > 1e-3
    # independence across components, datapoints and dimensions
    bound = 4.0 / np.sqrt(batch)
    assert abs(np.corrcoef(eps[:, 0, 0], eps[:, 1, 0])[0, 1]) < bound
    assert abs(np.corrcoef(eps[:-1, 0, 0], eps[1:, 0, 0])[0, 1]) < bound
    assert abs(np.corrcoef(eps[:, 0, 0], eps[:, 0, 1])[0, 1]) < bound


def test_ar2p_propagate_uses_paired_sigma_points(rng):
    means, variances, log_weights = _random_mixture(rng, S)
    xi = rng.normal(size=(S, D))
    out = propagate(
        _mixture(means, variances, log_weights),
        PropagationRule.AR2P,
        num_points=S,
        sigma_points=tf.constant(xi),
    )
    expected = np.zeros((B, S, D))
    for b in range(B):
        for s in range(S):
            expected[b, s] = means[b, s] + xi[s] * np.sqrt(variances[b, s])
    np.testing.assert_allclose(out.locations.numpy(), expected, rtol=RTOL, atol=ATOL)
    weighted_mean = np.einsum("bs,bsd->bd", np.exp(log_weights), means)
    np.testing.assert_allclose(out.amortization_input.numpy(), weighted_mean, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(out.log_weights.numpy(), log_weights, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("rule", ["ar1", "ar2"])
def test_sampled_layer_on_zero_variance_mixture(rng, rule):
    """At zero input variance every rule is deterministic: ``F = m_s``; check the GP maths.

    AR1: every (datapoint, component) pair is its own problem with ``h = F = m_s``, and the
    layer's KL is ``mean_b sum_s w_s KL_bs``; AR2: ``h = sum_s w_s m_s`` for all components.
    """
    params = (1.2, 0.9)
    means, variances, log_weights = _random_mixture(rng, S)
    variances[:] = 0.0
    packed = np.concatenate([means, variances, log_weights[..., None]], axis=-1)
    layer = AmortizedGPLayer(2, 3, NUM_DATA, rule=rule, full_rank=True, seed=4)
    layer(tf.constant(packed))
    _set_weights(layer, rng, params)
    out_means, out_vars, out_log_weights = unpack_numpy(layer(tf.constant(packed)).numpy())
    np.testing.assert_allclose(out_log_weights, log_weights, rtol=RTOL, atol=ATOL)

    weights = np.exp(log_weights)
    if rule == "ar1":
        expected_means = np.zeros((B, S, 2))
        expected_vars = np.zeros((B, S, 2))
        kls = np.zeros(B)
        for b in range(B):
            for s in range(S):
                m, v, kl = _forward(layer, params, means[b, s][None, None], means[b, s][None])
                expected_means[b, s], expected_vars[b, s] = m[0, 0], v[0, 0]
                kls[b] += weights[b, s] * kl[0]
    else:
        h = np.einsum("bs,bsd->bd", weights, means)
        expected_means, expected_vars, kls = _forward(layer, params, means, h)
    np.testing.assert_allclose(out_means, expected_means, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(out_vars, expected_vars, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(layer.losses[0].numpy(), kls.mean() / NUM_DATA, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(
    "rule, layer_rule, objective",
    [
        ("ar1", PropagationRule.AR1, Objective.ELBO),
        ("AR2", PropagationRule.AR2, Objective.ELBO),
        ("ar2p", PropagationRule.AR2P, Objective.ELBO),
        ("ar2pp", PropagationRule.AR2P, Objective.PREDICTIVE),
        (ModelRule.AR2PP, PropagationRule.AR2P, Objective.PREDICTIVE),
    ],
)
def test_a_model_rule_gives_its_layer_rule_and_objective(rule, layer_rule, objective):
    model_rule = check_choice("rule", rule, ModelRule)
    assert (model_rule.layer_rule, model_rule.objective) == (layer_rule, objective)
    assert [r.value for r in ModelRule] == ["ar1", "ar2", "ar2p", "ar2pp"]


def test_unknown_model_rule_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"^rule: expected one of 'ar1', .*, got 'ar3'$"):
        check_choice("rule", "ar3", ModelRule)


@pytest.mark.parametrize(
    "rule, components, common_draws, shared",
    [
        ("ar2p", 1, False, True),  # sigma points on an expanded mixture
        ("ar2", 1, True, True),  # common draws (prediction)
        ("ar2", 1, False, False),  # every datapoint draws its own
        ("ar2p", S, False, False),  # paired: each component has its own centre and scale
    ],
)
def test_shared_points_factor_the_locations(rng, rule, components, common_draws, shared):
    """``Propagated.shared_points`` is given exactly when ``F[b, s] = c_b + p_s * sigma_b``
    with one set of points, and then reproduces ``F``."""
    means, variances, log_weights = _random_mixture(rng, components)
    out = propagate(
        _mixture(means, variances, log_weights),
        rule,
        num_points=S,
        sigma_points=tf.constant(rng.normal(size=(S, D))),
        log_weights=tf.constant(np.full(S, -np.log(S))),
        seed=3,
        common_draws=common_draws,
    )
    assert (out.shared_points is not None) is shared
    if shared:
        centres, scales, points = (t.numpy() for t in out.shared_points)
        formed = centres[:, None, :] + points[None] * scales[:, None, :]
        np.testing.assert_allclose(formed, out.locations.numpy(), rtol=1e-15, atol=1e-15)
