"""``amortized_conditional`` and ``amortized_kl`` against explicit-inverse loop references."""

import numpy as np
import pytest
import reference
import tensorflow as tf
from helpers import REFERENCE_TOLERANCE

from gpflux_avdgp.core.conditionals import amortized_conditional, amortized_kl

RTOL, ATOL = REFERENCE_TOLERANCE
N, M, P, Q, D = 3, 4, 3, 2, 2
JITTER = 1e-6


def _problem(rng, full_rank: bool):
    """Per-datapoint ``Kuu`` (Matern52 + jitter), ``Kuf``, ``kff`` and a random ``q(u)``."""
    inducing = 1.5 * rng.normal(size=(N, M, D))
    locations = rng.normal(size=(N, P, D))
    kuu, kuf, kff = reference.pointwise_covariances(
        reference.matern52(1.3, 0.9), inducing, locations
    )
    kuu = kuu + JITTER * np.eye(M)
    q_mu = rng.normal(size=(N, M, Q))
    if full_rank:
        q_sqrt = np.tril(0.3 * rng.normal(size=(N, Q, M, M)), -1)
        q_sqrt += np.exp(0.3 * rng.normal(size=(N, Q, M)))[..., None] * np.eye(M)
    else:
        q_sqrt = np.exp(0.3 * rng.normal(size=(N, Q, M)))
    return kuu, kuf, kff, q_mu, q_sqrt


def _tf(*arrays):
    """The functions take tensors (they read ``q_sqrt.shape.rank``)."""
    return [tf.constant(a, dtype=tf.float64) for a in arrays]


CASES = [(w, f) for w in (False, True) for f in (False, True)]
IDS = [f"{'whiten' if w else 'unwhitened'}-{'full' if f else 'diag'}" for w, f in CASES]


@pytest.mark.parametrize("whiten, full_rank", CASES, ids=IDS)
def test_conditional_matches_reference(rng, whiten, full_rank):
    kuu, kuf, kff, q_mu, q_sqrt = _problem(rng, full_rank)
    mean, var = amortized_conditional(
        *_tf(np.linalg.cholesky(kuu), kuf, kff, q_mu, q_sqrt), whiten=whiten
    )
    expected_mean, expected_var = reference.conditional(kuu, kuf, kff, q_mu, q_sqrt, whiten=whiten)
    assert mean.shape == (N, P, Q) and var.shape == (N, P, Q)
    np.testing.assert_allclose(mean.numpy(), expected_mean, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(var.numpy(), expected_var, rtol=RTOL, atol=ATOL)
    assert np.all(var.numpy() > 0.0)


@pytest.mark.parametrize("whiten, full_rank", CASES, ids=IDS)
def test_kl_matches_reference(rng, whiten, full_rank):
    kuu, _, _, q_mu, q_sqrt = _problem(rng, full_rank)
    kl = amortized_kl(*_tf(np.linalg.cholesky(kuu), q_mu, q_sqrt), whiten=whiten)
    expected = reference.kl(kuu, q_mu, q_sqrt, whiten=whiten)
    assert kl.shape == (N,)
    np.testing.assert_allclose(kl.numpy(), expected, rtol=RTOL, atol=ATOL)
    assert np.all(expected > 0.0)


@pytest.mark.parametrize("whiten", [False, True], ids=["unwhitened", "whiten"])
def test_full_rank_with_diagonal_factor_equals_mean_field(rng, whiten):
    """A diagonal full-rank factor and the mean-field scale describe the same ``q(u)``."""
    kuu, kuf, kff, q_mu, q_sqrt = _problem(rng, full_rank=False)
    chol, kuf, kff, q_mu, q_sqrt_full, q_sqrt = _tf(
        np.linalg.cholesky(kuu), kuf, kff, q_mu, q_sqrt[..., None] * np.eye(M), q_sqrt
    )
    for diag, full in zip(
        amortized_conditional(chol, kuf, kff, q_mu, q_sqrt, whiten=whiten),
        amortized_conditional(chol, kuf, kff, q_mu, q_sqrt_full, whiten=whiten),
    ):
        np.testing.assert_allclose(diag.numpy(), full.numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(
        amortized_kl(chol, q_mu, q_sqrt, whiten=whiten).numpy(),
        amortized_kl(chol, q_mu, q_sqrt_full, whiten=whiten).numpy(),
        rtol=RTOL,
        atol=ATOL,
    )


@pytest.mark.parametrize("whiten", [False, True], ids=["unwhitened", "whiten"])
def test_kl_is_zero_at_the_prior(rng, whiten):
    """``q(u) = p(u)`` (``S = I`` whitened, ``Sigma = Kuu`` unwhitened, zero mean): KL = 0."""
    kuu, _, _, _, _ = _problem(rng, full_rank=True)
    chol = np.linalg.cholesky(kuu)
    q_mu = np.zeros((N, M, Q))
    factor = np.broadcast_to(np.eye(M), (N, Q, M, M)) if whiten else np.stack([chol] * Q, axis=1)
    kl = amortized_kl(*_tf(chol, q_mu, factor), whiten=whiten)
    np.testing.assert_allclose(kl.numpy(), np.zeros(N), atol=1e-9)
