"""``pointwise_covariances`` against NumPy loops over datapoints and inducing points."""

import gpflow
import numpy as np
import pytest
import reference
import tensorflow as tf
from helpers import REFERENCE_TOLERANCE
from kernel_cases import KERNEL_CASES, assert_covariance_blocks

from gpflux_avdgp.core.covariances import pointwise_covariances

RTOL, ATOL = REFERENCE_TOLERANCE
B, M, P, D = 4, 3, 2, 3


def _inputs(rng):
    inducing = rng.normal(size=(B, M, D))
    locations = rng.normal(size=(B, P, D))
    return inducing, locations


@pytest.mark.parametrize("case", sorted(KERNEL_CASES))
def test_pointwise_covariances_match_loops(rng, case):
    make_kernel, make_reference = KERNEL_CASES[case]
    inducing, locations = _inputs(rng)
    actual = pointwise_covariances(make_kernel(), inducing, locations)
    expected = reference.pointwise_covariances(make_reference(), inducing, locations)
    assert_covariance_blocks(actual, expected)


def _matern_on_dim1_plus_linear_on_dims02():
    matern, lin = reference.matern52(1.2, 0.9), reference.linear(0.5, active_dims=[0, 2])
    return lambda x, y: matern(x[1:2], y[1:2]) + lin(x, y)


def _matern_ard_on_dims02():
    matern = reference.matern52(0.8, [0.6, 1.4])
    return lambda x, y: matern(x[[0, 2]], y[[0, 2]])


ACTIVE_DIMS_CASES = {
    "matern52_ard": (
        lambda: gpflow.kernels.Matern52(variance=0.8, lengthscales=[0.6, 1.4], active_dims=[0, 2]),
        _matern_ard_on_dims02,
    ),
    "linear": (
        lambda: gpflow.kernels.Linear(variance=1.1, active_dims=[0, 2]),
        lambda: reference.linear(1.1, active_dims=[0, 2]),
    ),
    "sum": (
        lambda: gpflow.kernels.Matern52(variance=1.2, lengthscales=0.9, active_dims=[1])
        + gpflow.kernels.Linear(variance=0.5, active_dims=[0, 2]),
        _matern_on_dim1_plus_linear_on_dims02,
    ),
}


@pytest.mark.parametrize("case", sorted(ACTIVE_DIMS_CASES))
def test_kernel_active_dims_are_respected(rng, case):
    """Both paths must slice the active dimensions like ``kernel(X)`` does."""
    make_kernel, make_reference = ACTIVE_DIMS_CASES[case]
    inducing, locations = _inputs(rng)
    actual = pointwise_covariances(make_kernel(), inducing, locations)
    expected = reference.pointwise_covariances(make_reference(), inducing, locations)
    assert_covariance_blocks(actual, expected)


def test_sum_of_stationary_and_linear_uses_fallback(rng):
    inducing, locations = _inputs(rng)
    kernel = gpflow.kernels.Matern52(variance=1.2, lengthscales=0.9) + gpflow.kernels.Linear(
        variance=0.4
    )
    matern, lin = reference.matern52(1.2, 0.9), reference.linear(0.4)
    actual = pointwise_covariances(kernel, inducing, locations)
    expected = reference.pointwise_covariances(
        lambda x, y: matern(x, y) + lin(x, y), inducing, locations
    )
    assert_covariance_blocks(actual, expected)


@pytest.mark.parametrize(
    "kernel",
    [gpflow.kernels.Matern52(lengthscales=[1.0, 2.0, 0.5]), gpflow.kernels.Polynomial()],
    ids=["stationary", "fallback"],
)
def test_shapes_are_per_datapoint(rng, kernel):
    """No all-pairs blocks: ``[B, M, M]``, ``[B, M, P]``, ``[B, P]``, each the diagonal block."""
    inducing, locations = _inputs(rng)
    kuu, kuf, kff = pointwise_covariances(kernel, inducing, locations)
    assert kuu.shape == (B, M, M)
    assert kuf.shape == (B, M, P)
    assert kff.shape == (B, P)
    for b in range(B):
        np.testing.assert_allclose(kuu[b], kernel(inducing[b]), rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(kuf[b], kernel(inducing[b], locations[b]), rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(
            kff[b], kernel(locations[b], full_cov=False), rtol=RTOL, atol=ATOL
        )


def test_extra_batch_dimensions(rng):
    """``[S, B, ...]`` leading dimensions broadcast like one batch."""
    inducing = rng.normal(size=(2, B, M, D))
    locations = rng.normal(size=(2, B, P, D))
    kernel = gpflow.kernels.Matern52(variance=1.3, lengthscales=0.7)
    kuu, kuf, kff = pointwise_covariances(kernel, inducing, locations)
    assert kuu.shape == (2, B, M, M) and kuf.shape == (2, B, M, P) and kff.shape == (2, B, P)
    flat = reference.pointwise_covariances(
        reference.matern52(1.3, 0.7),
        inducing.reshape(-1, M, D),
        locations.reshape(-1, P, D),
    )
    np.testing.assert_allclose(kuf.numpy().reshape(-1, M, P), flat[1], rtol=RTOL, atol=ATOL)


def test_dtype_is_preserved(rng):
    inducing, locations = _inputs(rng)
    outs = pointwise_covariances(gpflow.kernels.Matern52(), inducing, locations)
    assert all(out.dtype == tf.float64 for out in outs)


def test_kuf_near_coincident_points_stays_at_most_the_variance_in_float32(rng):
    """``Kuf`` uses ``|z|^2 + |f|^2 - 2 z.f`` clipped at 0: at far-out, nearly coincident
    points in float32 the unclipped sum goes negative (a kernel value above the variance)."""
    with gpflow.config.as_context(gpflow.config.Config(float=np.float32)):
        kernel = gpflow.kernels.SquaredExponential(variance=1.5, lengthscales=1.0)
    inducing = 10.0 + rng.normal(size=(50, 8, 16))  # |z|^2 ~ 1600
    locations = inducing + 1e-4 * rng.normal(size=inducing.shape)
    inducing, locations = tf.constant(inducing, tf.float32), tf.constant(locations, tf.float32)
    _, kuf, _ = pointwise_covariances(kernel, inducing, locations)
    assert kuf.dtype == tf.float32
    assert np.all(kuf.numpy() <= 1.5)
    diagonal = np.diagonal(kuf.numpy(), axis1=-2, axis2=-1)
    np.testing.assert_allclose(diagonal, 1.5, rtol=1e-3)
    expected = reference.squared_exponential(1.5, 1.0)
    z, f = inducing.numpy().astype(np.float64), locations.numpy().astype(np.float64)
    for b in range(3):
        exact = np.array([[expected(z[b, i], f[b, j]) for j in range(8)] for i in range(8)])
        np.testing.assert_allclose(kuf.numpy()[b], exact, rtol=1e-3, atol=1e-5)


class _DoubledScale(gpflow.kernels.SquaredExponential):
    """An isotropic kernel with its own ``scale``: the fast paths must call it."""

    def scale(self, X):
        return None if X is None else 2.0 * X / self.lengthscales


@pytest.mark.parametrize("lengthscales", [0.8, [0.5, 1.3, 2.1]], ids=["one", "per_column"])
def test_an_own_scale_method_is_used(rng, lengthscales):
    """``gram_against`` scales ``r^2`` by ``1/l^2`` instead of the points only for GPflow's
    own ``scale``; a kernel that defines another gets its own."""
    inducing, locations = _inputs(rng)
    kernel = _DoubledScale(variance=1.1, lengthscales=lengthscales)
    kuu, kuf, _ = pointwise_covariances(kernel, inducing, locations)
    for b in range(B):
        np.testing.assert_allclose(kuu.numpy()[b], kernel.K(inducing[b]).numpy(), rtol=RTOL)
        expected = kernel.K(inducing[b], locations[b]).numpy()
        np.testing.assert_allclose(kuf.numpy()[b], expected, rtol=RTOL, atol=ATOL)
