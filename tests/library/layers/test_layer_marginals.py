"""One ``AmortizedGPLayer`` on a deterministic input against a NumPy loop reference."""

import gpflow
import numpy as np
import pytest
import reference
import tensorflow as tf
from helpers import REFERENCE_TOLERANCE

from gpflux_avdgp import AmortizedGPLayer
from gpflux_avdgp.core.mixture import unpack_numpy

RTOL, ATOL = REFERENCE_TOLERANCE
B, D, Q, M, NUM_DATA = 5, 2, 2, 3, 40
VARIANCE, LENGTHSCALE = 1.4, 0.9


def _layer(rng, **kwargs):
    """A built layer with non-default kernel hyperparameters and perturbed inference weights."""
    kwargs.setdefault("num_data", NUM_DATA)
    layer = AmortizedGPLayer(Q, M, seed=3, **kwargs)
    x = rng.normal(size=(B, D))
    layer(tf.constant(x))
    layer.kernel.variance.assign(VARIANCE)
    layer.kernel.lengthscales.assign(LENGTHSCALE)
    for variable in layer.inference.trainable_variables:
        variable.assign(variable + 0.2 * rng.normal(size=variable.shape))
    if layer.mean_function is not None:
        layer.mean_function.A.assign(layer.mean_function.A + rng.normal(size=(D, Q)))
        layer.mean_function.b.assign(rng.normal(size=Q))
    return layer, x


def _reference(layer, x):
    return reference.affine_layer_forward(
        layer,
        reference.matern52(VARIANCE, LENGTHSCALE),
        x[:, None, :],  # deterministic input: F = x, one component
        x,  # h = x
        jitter=gpflow.config.default_jitter(),
    )


CASES = [
    {"whiten": False, "full_rank": False},
    {"whiten": False, "full_rank": True},
    {"whiten": True, "full_rank": False},
    {"whiten": True, "full_rank": True},
    {"whiten": False, "full_rank": True, "mean_function": "linear"},
    {"whiten": True, "full_rank": False, "mean_function": "linear"},
]


def _id(case):
    parts = ["whiten" if case["whiten"] else "unwhitened", "full" if case["full_rank"] else "diag"]
    return "-".join(parts + ([case["mean_function"]] if "mean_function" in case else []))


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_marginals_match_reference(rng, case):
    layer, x = _layer(rng, **case)
    packed = layer(tf.constant(x)).numpy()
    assert packed.shape == (B, 1, 2 * Q + 1)
    means, variances, log_weights = unpack_numpy(packed)
    expected_means, expected_vars, _ = _reference(layer, x)
    np.testing.assert_allclose(means, expected_means, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(variances, expected_vars, rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(log_weights, np.zeros((B, 1)))
    assert np.all(variances > 0.0)


@pytest.mark.parametrize("convention", ["paper", "per_point"])
@pytest.mark.parametrize("case", CASES[:4], ids=[_id(c) for c in CASES[:4]])
def test_added_loss_is_scaled_mean_kl(rng, case, convention):
    """``paper``: ``mean_b KL_b / N``; ``per_point``: ``mean_b KL_b``."""
    layer, x = _layer(rng, kl_convention=convention, **case)
    layer(tf.constant(x))
    assert len(layer.losses) == 1
    _, _, kls = _reference(layer, x)
    assert np.all(kls > 0.0)
    expected = kls.mean() / (NUM_DATA if convention == "paper" else 1)
    np.testing.assert_allclose(layer.losses[0].numpy(), expected, rtol=RTOL, atol=ATOL)


def test_per_point_loss_does_not_need_num_data(rng):
    layer, x = _layer(rng, kl_convention="per_point", num_data=None)
    layer(tf.constant(x))
    _, _, kls = _reference(layer, x)
    np.testing.assert_allclose(layer.losses[0].numpy(), kls.mean(), rtol=RTOL, atol=ATOL)
