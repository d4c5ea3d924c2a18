"""Covariances and the linear mean function at shared points ``F[b, s] = c_b + p_s * sigma_b``
from the factors: against NumPy loops, and the gradients of ``F`` formed."""

import gpflow
import numpy as np
import pytest
import reference
import tensorflow as tf
from helpers import REFERENCE_TOLERANCE
from kernel_cases import KERNEL_CASES, assert_covariance_blocks

from gpflux_avdgp.core.covariances import pointwise_covariances
from gpflux_avdgp.core.shared_points import (
    mean_at_shared_points,
    shared_point_covariances,
    shared_points_available,
)

RTOL, ATOL = REFERENCE_TOLERANCE
B, M, D, S, Q = 4, 3, 3, 5, 2


def _shared_inputs(rng):
    inducing = rng.normal(size=(B, M, D))
    centres, scales = rng.normal(size=(B, D)), rng.uniform(0.1, 2.0, size=(B, D))
    points = rng.normal(size=(S, D))
    locations = centres[:, None, :] + points[None] * scales[:, None, :]  # [B, S, D]
    return inducing, centres, scales, points, locations


@pytest.mark.parametrize(
    "case", ["matern52_isotropic", "matern52_ard", "squared_exponential_isotropic"]
)
def test_shared_point_covariances_match_loops(rng, case):
    make_kernel, make_reference = KERNEL_CASES[case]
    inducing, centres, scales, points, locations = _shared_inputs(rng)
    kernel = make_kernel()
    assert shared_points_available(kernel)
    actual = shared_point_covariances(kernel, inducing, centres, scales, points)
    expected = reference.pointwise_covariances(make_reference(), inducing, locations)
    assert_covariance_blocks(actual, expected)


@pytest.mark.parametrize("lengthscales", [0.8, [0.5, 1.3, 2.1]], ids=["one", "per_column"])
def test_shared_point_covariances_have_the_gradients_of_formed_locations(rng, lengthscales):
    """Same values and gradients (inducing points, centres, scales, points, kernel parameters)
    as :func:`pointwise_covariances` on ``F`` formed from them."""
    inducing, centres, scales, points, _ = (tf.constant(a) for a in _shared_inputs(rng))
    kernel = gpflow.kernels.Matern52(variance=1.3, lengthscales=lengthscales)
    weights = [tf.constant(rng.normal(size=shape)) for shape in ((B, M, M), (B, M, S), (B, S))]

    def objective(factored: bool):
        with tf.GradientTape() as tape:
            tape.watch([inducing, centres, scales, points])
            if factored:
                blocks = shared_point_covariances(kernel, inducing, centres, scales, points)
            else:
                locations = centres[:, None, :] + points[None] * scales[:, None, :]
                blocks = pointwise_covariances(kernel, inducing, locations)
            value = sum(tf.reduce_sum(w * block) for w, block in zip(weights, blocks))
        sources = [inducing, centres, scales, points, *kernel.trainable_variables]
        return value, tape.gradient(value, sources)

    (value, gradients), (expected_value, expected_gradients) = objective(True), objective(False)
    np.testing.assert_allclose(value.numpy(), expected_value.numpy(), rtol=1e-12)
    for actual, expected in zip(gradients, expected_gradients):
        np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-9, atol=1e-12)


def test_shared_points_need_an_isotropic_kernel_on_all_columns():
    assert not shared_points_available(gpflow.kernels.Cosine())
    assert not shared_points_available(gpflow.kernels.Linear())
    assert not shared_points_available(gpflow.kernels.Matern52(active_dims=[0, 1]))
    assert not shared_points_available(_DoubledScale())
    assert shared_points_available(gpflow.kernels.RationalQuadratic())


class _DoubledScale(gpflow.kernels.SquaredExponential):
    def scale(self, X):
        return None if X is None else 2.0 * X / self.lengthscales


def test_linear_mean_matches_loops(rng):
    _, centres, scales, points, locations = _shared_inputs(rng)
    linear = gpflow.mean_functions.Linear(A=rng.normal(size=(D, Q)), b=rng.normal(size=Q))
    actual = mean_at_shared_points(linear, centres, scales, points).numpy()
    expected = np.zeros((B, S, Q))
    for b in range(B):
        for s in range(S):
            expected[b, s] = locations[b, s] @ linear.A.numpy() + linear.b.numpy()
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL)


def test_other_mean_functions_see_the_formed_locations(rng):
    _, centres, scales, points, locations = _shared_inputs(rng)
    assert mean_at_shared_points(None, centres, scales, points) is None
    mean_function = gpflow.mean_functions.Linear(
        A=np.ones((D, 1))
    ) + gpflow.mean_functions.Constant(
        np.array([0.5])
    )  # a Sum: not the Linear fast path
    actual = mean_at_shared_points(mean_function, centres, scales, points).numpy()
    np.testing.assert_allclose(actual, locations.sum(-1, keepdims=True) + 0.5, rtol=RTOL)
