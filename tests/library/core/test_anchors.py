"""Prior reversion (``core/anchors.py``) against the NumPy definitions in ``reference.py``."""

import gpflow
import numpy as np
import pytest
import reference
import tensorflow as tf
from helpers import REFERENCE_TOLERANCE

from gpflux_avdgp.core.anchors import (
    anchor_spacing,
    anchor_weight,
    nearest_anchor_distance,
    range_weight,
    reach_of,
    reach_weight,
    revert_to_prior,
    spread_rows,
)
from gpflux_avdgp.core.conditionals import amortized_conditional, amortized_kl

RTOL, ATOL = REFERENCE_TOLERANCE
N, M, P, Q, D, K = 4, 3, 2, 2, 2, 5


def _kernel():
    return gpflow.kernels.Matern52(variance=1.3, lengthscales=0.9)


def test_anchor_weight_matches_reference(rng):
    anchors = rng.normal(size=(K, D))
    inputs = np.concatenate([anchors[:2], rng.normal(size=(3, D)), [[40.0, -40.0]]])
    weight = anchor_weight(_kernel(), tf.constant(inputs), tf.constant(anchors)).numpy()
    expected = reference.anchor_weight(reference.matern52(1.3, 0.9), inputs, anchors)
    # K_CC carries a relative jitter of 1e-6 in the package: a on an anchor is 1 - O(1e-6)
    np.testing.assert_allclose(weight, expected, rtol=1e-5, atol=1e-5)
    assert np.all(weight[:2] > 1 - 1e-4), "an anchor explains itself"
    assert weight[-1] < 1e-12, "far from every anchor, nothing is explained"
    assert np.all((0.0 <= weight) & (weight <= 1.0))


def test_anchor_weight_survives_coinciding_anchors(rng):
    anchors = np.repeat(rng.normal(size=(1, D)), K, axis=0)  # the first batch may repeat rows
    weight = anchor_weight(_kernel(), tf.constant(anchors[:1]), tf.constant(anchors)).numpy()
    assert np.isfinite(weight).all() and weight[0] > 1 - 1e-4


def test_reach_gate_matches_reference(rng):
    anchors = rng.normal(size=(K, D))
    rows = rng.normal(size=(300, D))
    distances = nearest_anchor_distance(tf.constant(rows), tf.constant(anchors))
    reach = reach_of(distances, tf.constant(anchors))
    assert float(reach) == pytest.approx(reference.reach_of(rows, anchors), rel=1e-12)
    inputs = np.concatenate([anchors[:1], rows[:5], [[9.0, -9.0]]])
    weight = reach_weight(
        nearest_anchor_distance(tf.constant(inputs), tf.constant(anchors)), reach, 0.5
    ).numpy()
    expected = reference.reach_weight(inputs, anchors, float(reach), 0.5)
    np.testing.assert_allclose(weight, expected, rtol=1e-12, atol=1e-300)
    assert weight[0] == 1.0 and weight[-1] < 1e-6  # on an anchor; far away
    assert np.mean(reach_weight(distances, reach, 0.5).numpy() == 1.0) >= 0.99  # the rows


def test_range_gate_matches_reference(rng):
    lower, upper = np.array([-1.0, 0.0, 2.0]), np.array([1.0, 3.0, 2.0])
    spread = np.array([0.5, 0.8, 0.0])  # the third input constant: it does not gate
    inside = rng.uniform(lower, upper, (4, 3))
    beyond = [[1.2, 1.0, 2.0], [-2.0, 3.5, 2.0], [0.0, 1.0, 40.0], [9.0, -9.0, 2.0]]
    inputs = np.concatenate([inside, beyond])
    weight = range_weight(*(tf.constant(a) for a in (inputs, lower, upper, spread)), 0.5).numpy()
    expected = reference.range_weight(inputs, lower, upper, spread, 0.5)
    np.testing.assert_allclose(weight, expected, rtol=1e-12, atol=1e-300)
    np.testing.assert_array_equal(weight[:4], 1.0)  # within the range
    assert weight[4] == pytest.approx(np.exp(-0.5 * (0.2 / 0.5 / 0.5) ** 2), rel=1e-12)
    assert weight[5] == pytest.approx(np.exp(-0.5 * (2.0 / 0.5) ** 2), rel=1e-12)  # the worst
    assert weight[6] == 1.0 and weight[7] < 1e-100


def test_with_no_more_rows_than_anchors_the_reach_is_half_their_spacing(rng):
    """``N <= K`` puts an anchor on every row (rows repeat): no row tells how far the data
    reach, so the reach is half the anchors' spacing and a gap no wider than the rows' spacing
    does not revert."""
    rows = rng.uniform(-2.0, 2.0, (K - 1, 1))
    anchors = rows[np.arange(K) * len(rows) // K]  # spread_rows of the rows: one repeats
    distances = nearest_anchor_distance(tf.constant(rows), tf.constant(anchors))
    assert np.all(distances.numpy() < 1e-100)  # every row is an anchor
    spacing = float(anchor_spacing(tf.constant(anchors)))
    assert spacing == pytest.approx(reference.anchor_spacing(anchors), rel=1e-12) and spacing > 0
    reach = float(reach_of(distances, tf.constant(anchors)))
    assert reach == pytest.approx(reference.reach_of(rows, anchors), rel=1e-12)
    assert reach == pytest.approx(0.5 * spacing, rel=1e-12)


def test_rows_on_anchors_are_left_out_of_the_reach(rng):
    """Placed on ``K`` of ``K + 3`` rows, the anchors would make the 0.99 quantile of all rows
    a row on an anchor (0); the reach is the quantile of the three others (the middle one)."""
    anchors = rng.normal(size=(K, D))
    others = anchors[:3] + np.array([[0.1, 0.0], [0.0, 0.3], [0.2, 0.0]])
    rows = np.concatenate([anchors, others])
    distances = nearest_anchor_distance(tf.constant(rows), tf.constant(anchors))
    reach = float(reach_of(distances, tf.constant(anchors)))
    assert reach == pytest.approx(reference.reach_of(rows, anchors), rel=1e-12)
    assert reach == pytest.approx(0.2, rel=1e-12)  # the middle of 0.1, 0.2, 0.3


def test_every_row_and_anchor_at_one_place_leaves_the_reach_unmeasured():
    anchors = np.ones((K, D))
    distances = nearest_anchor_distance(tf.constant(anchors[:3]), tf.constant(anchors))
    reach = float(reach_of(distances, tf.constant(anchors)))
    assert reach == reference.reach_of(anchors[:3], anchors) == 0.0


def test_a_reach_not_measured_yet_turns_the_gate_off(rng):
    """A layer's reach is 0 until its anchors are placed: the gate then keeps everything."""
    anchors = rng.normal(size=(K, D))
    reach = tf.constant(0.0, tf.float64)
    far = nearest_anchor_distance(tf.constant(np.array([[9.0, -9.0]])), tf.constant(anchors))
    with tf.GradientTape() as tape:
        tape.watch(far)
        weight = reach_weight(far, reach, 1.0)
    assert weight.numpy().tolist() == [1.0]
    assert np.isfinite(tape.gradient(weight, far).numpy()).all()


def test_reach_gate_gradient_is_finite_on_an_anchor(rng):
    anchors = tf.Variable(rng.normal(size=(K, D)))
    inputs = tf.Variable(np.concatenate([anchors.numpy()[:2], rng.normal(size=(3, D)) * 4]))
    with tf.GradientTape() as tape:
        distances = nearest_anchor_distance(inputs, anchors)
        total = tf.reduce_sum(reach_weight(distances, tf.constant(0.5, tf.float64), 1.0))
    gradients = tape.gradient(total, [inputs, anchors])
    assert all(np.isfinite(g.numpy()).all() for g in gradients)
    assert np.abs(gradients[0].numpy()[2:]).sum() > 0  # rows beyond the reach pull


def _q(rng, full_rank: bool):
    q_mu = rng.normal(size=(N, M, Q))
    if full_rank:
        q_sqrt = np.tril(0.3 * rng.normal(size=(N, Q, M, M)), -1)
        q_sqrt += np.exp(0.3 * rng.normal(size=(N, Q, M)))[..., None] * np.eye(M)
    else:
        q_sqrt = np.exp(0.3 * rng.normal(size=(N, Q, M)))
    return q_mu, q_sqrt


WEIGHTS = np.array([1.0, 0.7, 0.05, 0.0])


@pytest.mark.parametrize("full_rank", [False, True], ids=["diag", "full"])
def test_revert_to_prior_matches_definition(rng, full_rank):
    q_mu, q_sqrt = _q(rng, full_rank)
    mean, sqrt = revert_to_prior(tf.constant(q_mu), tf.constant(q_sqrt), tf.constant(WEIGHTS))
    assert sqrt.shape == q_sqrt.shape, "mean-field stays mean-field"
    expected_mean, expected_cov = reference.reverted_q(q_mu, q_sqrt, WEIGHTS)
    covariance = np.array([[reference.q_covariance(s) for s in row] for row in sqrt.numpy()])
    np.testing.assert_allclose(mean.numpy(), expected_mean, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(covariance, expected_cov, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("full_rank", [False, True], ids=["diag", "full"])
def test_reverted_marginals_blend_posterior_and_prior(rng, full_rank):
    """``mean = sqrt(a) mean_q``, ``var = a var_q + (1 - a) k_ff`` (docs/maths.md), and the KL
    of the reverted q vanishes at ``a = 0``."""
    q_mu, q_sqrt = _q(rng, full_rank)
    kuu, kuf, kff = reference.pointwise_covariances(
        reference.matern52(1.3, 0.9), rng.normal(size=(N, M, D)), rng.normal(size=(N, P, D))
    )
    chol = tf.constant(np.linalg.cholesky(kuu + 1e-6 * np.eye(M)))
    kuf, kff = tf.constant(kuf), tf.constant(kff)
    mean_q, var_q = amortized_conditional(
        chol, kuf, kff, tf.constant(q_mu), tf.constant(q_sqrt), whiten=True
    )
    reverted = revert_to_prior(tf.constant(q_mu), tf.constant(q_sqrt), tf.constant(WEIGHTS))
    mean, var = amortized_conditional(chol, kuf, kff, *reverted, whiten=True)
    a = WEIGHTS[:, None, None]
    np.testing.assert_allclose(mean.numpy(), np.sqrt(a) * mean_q.numpy(), rtol=RTOL, atol=ATOL)
    expected_var = a * var_q.numpy() + (1 - a) * kff.numpy()[..., None]
    np.testing.assert_allclose(var.numpy(), expected_var, rtol=RTOL, atol=ATOL)
    kl = amortized_kl(chol, *reverted, whiten=True).numpy()
    expected_kl = reference.kl(None, *(x.numpy() for x in reverted), whiten=True)
    np.testing.assert_allclose(kl, expected_kl, rtol=RTOL, atol=ATOL)
    assert abs(kl[-1]) < 1e-10


def test_gradients_finite_where_nothing_is_explained(rng):
    """``sqrt(a)``'s gradient is infinite at ``a = 0``; the clamp keeps it finite."""
    q_mu, q_sqrt = (tf.constant(x) for x in _q(rng, False))
    anchors = tf.Variable(rng.normal(size=(K, D)))
    inputs = tf.constant([[0.0, 0.0], [1e3, 1e3], [0.5, 1.0], [-1e3, 0.0]], dtype=tf.float64)
    with tf.GradientTape() as tape:
        weight = anchor_weight(_kernel(), inputs, anchors)
        mean, sqrt = revert_to_prior(q_mu, q_sqrt, weight)
        total = tf.reduce_sum(mean) + tf.reduce_sum(sqrt)
    assert np.isfinite(tape.gradient(total, anchors).numpy()).all()


@pytest.mark.parametrize("rows, count", [(6, 4), (2, 5), (1024, 32), (7, 7)])
def test_spread_rows_takes_row_floor_k_n_over_k(rows, count):
    inputs = np.arange(rows * 2, dtype=np.float64).reshape(rows, 2)
    expected = inputs[[k * rows // count for k in range(count)]]  # the loop, in NumPy
    np.testing.assert_array_equal(spread_rows(tf.constant(inputs), count).numpy(), expected)
