"""Inference functions against a NumPy forward pass that reads the layers' weights."""

import numpy as np
import pytest
import reference
import tensorflow as tf
from gpflow.keras import tf_keras
from helpers import REFERENCE_TOLERANCE

from gpflux_avdgp.layers.inference import AffineInference, MLPInference

RTOL, ATOL = REFERENCE_TOLERANCE
N, D, M, Q = 4, 3, 3, 2


def _dense_weights(network: tf_keras.Sequential):
    return [
        (layer.kernel.numpy(), layer.bias.numpy())
        for layer in network.layers
        if isinstance(layer, tf_keras.layers.Dense)
    ]


def _perturb(layer: tf_keras.layers.Layer, rng, scale: float = 0.3) -> None:
    """Move every weight off its initial value (zero off-diagonal scale weights included)."""
    for variable in layer.trainable_variables:
        variable.assign(variable + scale * rng.normal(size=variable.shape))


def _affine_reference(layer: AffineInference, h: np.ndarray):
    return reference.affine_inference(
        h,
        layer.affine_weights.numpy(),
        layer.affine_biases.numpy(),
        _dense_weights(layer.mean_network),
        _dense_weights(layer.scale_network),
        layer.output_dim,
        layer.full_rank,
    )


def _build(cls, rng, *, full_rank: bool, hidden_layers: int = 2, dim: int = D, m=M, q=Q, **options):
    layer = cls(
        m, q, full_rank=full_rank, hidden_layers=hidden_layers, seed=7, dtype=tf.float64, **options
    )
    h = rng.normal(size=(N, dim))
    layer(tf.constant(h))
    return layer, h


def _assert_params(actual, expected):
    for name, act, exp in zip(("Z", "q_mu", "q_sqrt"), actual, expected):
        assert act.shape == exp.shape, name
        np.testing.assert_allclose(act.numpy(), exp, rtol=RTOL, atol=ATOL, err_msg=name)


CASES = [(f, h) for f in (False, True) for h in (2, 1)]
IDS = [f"{'full' if f else 'diag'}-hidden{h}" for f, h in CASES]


@pytest.mark.parametrize("full_rank, hidden_layers", CASES, ids=IDS)
def test_affine_inference_matches_numpy_forward_pass(rng, full_rank, hidden_layers):
    layer, h = _build(AffineInference, rng, full_rank=full_rank, hidden_layers=hidden_layers)
    _perturb(layer, rng)
    actual = layer(tf.constant(h))
    expected = _affine_reference(layer, h)
    _assert_params(actual, expected)
    assert len(_dense_weights(layer.mean_network)) == hidden_layers + 1
    assert len(_dense_weights(layer.scale_network)) == hidden_layers + 1
    if full_rank:
        assert actual.q_sqrt.shape == (N, Q, M, M)
        upper = np.triu(np.ones((M, M), dtype=bool), 1)
        assert np.all(actual.q_sqrt.numpy()[..., upper] == 0.0)
        assert np.any(actual.q_sqrt.numpy()[..., upper.T] != 0.0)
    else:
        assert actual.q_sqrt.shape == (N, Q, M)


@pytest.mark.parametrize("inducing_init", [None, "global", "input"])
@pytest.mark.parametrize("full_rank", [False, True], ids=["diag", "full"])
def test_affine_inference_initialisation(rng, full_rank, inducing_init):
    """``W_m = 0`` (global, the default) or ``I`` (input, the paper); ``q_mu`` and the scales
    start equal across the ``M`` inducing points."""
    options = {} if inducing_init is None else {"inducing_init": inducing_init}
    layer, h = _build(AffineInference, rng, full_rank=full_rank, **options)
    identity = inducing_init == "input"
    np.testing.assert_array_equal(
        layer.affine_weights.numpy(), np.tile(np.eye(D) * identity, (M, 1, 1))
    )
    biases = layer.affine_biases.numpy()
    assert np.all(np.abs(biases) <= 1.0 / np.sqrt(D)) and np.unique(biases).size == M * D

    inducing, q_mu, q_sqrt = (t.numpy() for t in layer(tf.constant(h)))
    expected_inducing = h[:, None, :] * identity + biases[None]  # [N, M, D]
    np.testing.assert_allclose(inducing, expected_inducing, rtol=RTOL, atol=ATOL)
    for m in range(1, M):
        np.testing.assert_allclose(q_mu[:, m], q_mu[:, 0], rtol=RTOL, atol=ATOL)
    diag = np.diagonal(q_sqrt, axis1=-2, axis2=-1) if full_rank else q_sqrt  # [N, Q, M]
    for m in range(1, M):
        np.testing.assert_allclose(diag[..., m], diag[..., 0], rtol=RTOL, atol=ATOL)
    assert np.ptp(q_mu[:, 0]) > 0.0  # not trivially constant: varies with h and the output
    if full_rank:  # off-diagonal scale weights and biases start at zero
        np.testing.assert_array_equal(q_sqrt, diag[..., None] * np.eye(M))

    # at h = 0 the hidden units are zero: q_mu = 0, scales = softplus(softplus^-1(1)) = 1
    inducing0, q_mu0, q_sqrt0 = (t.numpy() for t in layer(tf.zeros((2, D), tf.float64)))
    np.testing.assert_allclose(inducing0, np.broadcast_to(biases, (2, M, D)), rtol=RTOL)
    np.testing.assert_allclose(q_mu0, np.zeros((2, M, Q)), atol=ATOL)
    expected_scale = np.broadcast_to(np.eye(M), (2, Q, M, M)) if full_rank else np.ones((2, Q, M))
    np.testing.assert_allclose(q_sqrt0, expected_scale, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(
    "dim, m, q, full_rank",
    [(5, 2, 1, False), (5, 3, 1, True), (2, 3, 2, False), (2, 3, 2, True)],
)
def test_affine_hidden_width_is_min_of_in_and_out(rng, dim, m, q, full_rank):
    layer, _ = _build(AffineInference, rng, full_rank=full_rank, dim=dim, m=m, q=q)
    mean_out = m * q
    scale_out = m * q + (q * m * (m - 1) // 2 if full_rank else 0)
    for network, out in ((layer.mean_network, mean_out), (layer.scale_network, scale_out)):
        dense = _dense_weights(network)
        assert [w.shape[1] for w, _ in dense] == [min(dim, out)] * 2 + [out]
        assert dense[0][0].shape[0] == dim
        leaky = [layer for layer in network.layers if isinstance(layer, tf_keras.layers.LeakyReLU)]
        assert len(leaky) == 2 and all(np.isclose(float(act.alpha), 0.2) for act in leaky)


@pytest.mark.parametrize("full_rank, hidden_layers", CASES, ids=IDS)
def test_mlp_inference_matches_numpy_forward_pass(rng, full_rank, hidden_layers):
    layer, h = _build(MLPInference, rng, full_rank=full_rank, hidden_layers=hidden_layers)
    _perturb(layer, rng)
    actual = layer(tf.constant(h))
    expected = reference.mlp_inference(h, _dense_weights(layer.network), M, Q, full_rank)
    _assert_params(actual, expected)
    total = M * D + M * Q + M * Q + (Q * M * (M - 1) // 2 if full_rank else 0)
    dense = _dense_weights(layer.network)
    assert [w.shape[1] for w, _ in dense] == [min(D, total)] * hidden_layers + [total]


def test_mlp_inference_scales_start_at_one(rng):
    layer, _ = _build(MLPInference, rng, full_rank=True)
    inducing, q_mu, q_sqrt = (t.numpy() for t in layer(tf.zeros((2, D), tf.float64)))
    np.testing.assert_allclose(inducing, np.zeros((2, M, D)), atol=ATOL)
    np.testing.assert_allclose(q_mu, np.zeros((2, M, Q)), atol=ATOL)
    np.testing.assert_allclose(q_sqrt, np.broadcast_to(np.eye(M), (2, Q, M, M)), atol=ATOL)


@pytest.mark.parametrize("full_rank", [False, True])
@pytest.mark.parametrize("dtype", [tf.float64, tf.float32])
def test_scales_stay_positive_for_extreme_raw_outputs(full_rank, dtype):
    """softplus underflows to 0 below about -745 (float64) or -104 (float32): the scale is
    bounded below, so the KL stays finite and its gradient is not NaN (protein, seed 0, epoch
    19 diverged this way before the bound)."""
    from gpflux_avdgp.core.conditionals import amortized_kl
    from gpflux_avdgp.layers.inference import MIN_SCALE, raw_to_q_sqrt, scale_output_size

    m, q = 3, 2
    raw = np.zeros((2, scale_output_size(m, q, full_rank)))
    raw[0, :] = -1000.0  # every diagonal entry of datapoint 0 underflows
    raw[1, 0] = 3.0
    raw = tf.Variable(raw, dtype=dtype)
    with tf.GradientTape() as tape:
        q_sqrt = raw_to_q_sqrt(raw, m, q, full_rank)
        chol = tf.linalg.cholesky(tf.eye(m, batch_shape=[2], dtype=dtype) * 2.0)
        kl = amortized_kl(chol, tf.zeros([2, m, q], dtype=dtype), q_sqrt, whiten=False)
        total = tf.reduce_sum(kl)
    gradient = tape.gradient(total, raw)
    diagonal = q_sqrt.numpy() if not full_rank else np.diagonal(q_sqrt.numpy(), axis1=-2, axis2=-1)
    np.testing.assert_allclose(diagonal[0], MIN_SCALE, rtol=1e-6)
    np.testing.assert_allclose(diagonal[1, 0, 0], reference.softplus(3.0), rtol=1e-6)
    assert np.all(np.isfinite(kl.numpy())) and np.all(np.isfinite(gradient.numpy()))
