"""A one-layer AVDGP whose inference function is frozen to constants is GPflow's SVGP.

With ``Z_n = Z``, ``q_mu_n = q_mu`` and ``q_sqrt_n = q_sqrt`` for every datapoint, the
amortized layer's marginals, its per-datapoint KL (``"paper"`` convention: the batch mean of
identical KLs over ``N``) and the Gaussian expected log-likelihood must reproduce
``gpflow.models.SVGP`` with the same kernel, likelihood, inducing points and ``q(u)``.
"""

import dataclasses
from typing import Optional

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras
from helpers import REFERENCE_TOLERANCE

import gpflux_avdgp
from gpflux_avdgp.layers.inference import raw_to_q_sqrt, scale_output_size
from gpflux_avdgp.predictive import output_mixture

NUM_DATA, INPUT_DIM, NUM_INDUCING, OUTPUT_DIM = 15, 3, 5, 2
NUM_TEST = 11
RTOL, ATOL = REFERENCE_TOLERANCE


def _svgp_jitter(kernel: gpflow.kernels.Stationary):
    """GPflow adds an absolute jitter to ``K_uu``; the layer adds ``jitter * mean(diag K_uu)``,
    which for a stationary kernel is ``jitter * variance``: run SVGP with that jitter."""
    matched = gpflow.config.default_jitter() * float(kernel.variance.numpy())
    return gpflow.config.as_context(dataclasses.replace(gpflow.config.config(), jitter=matched))


def _inverse_softplus(x: np.ndarray) -> np.ndarray:
    return np.log(np.expm1(x))


def _raw_scale(q_sqrt: np.ndarray) -> np.ndarray:
    """The raw scale-network output that :func:`raw_to_q_sqrt` maps to ``q_sqrt`` ``[Q, M, M]``."""
    num_outputs, num_inducing, _ = q_sqrt.shape
    diag = np.stack([np.diag(q_sqrt[q]) for q in range(num_outputs)])  # [Q, M]
    rows, cols = np.tril_indices(num_inducing, -1)
    off = q_sqrt[:, rows, cols]  # [Q, pairs]
    return np.concatenate([_inverse_softplus(diag.T).reshape(-1), off.reshape(-1)])


def _freeze_inference(
    layer: gpflux_avdgp.AmortizedGPLayer, inducing: np.ndarray, q_mu: np.ndarray, q_sqrt: np.ndarray
) -> None:
    """Make ``layer.inference`` return the same ``(Z, q_mu, q_sqrt)`` for every input."""
    inference = layer.inference
    assert isinstance(inference, gpflux_avdgp.layers.inference.AffineInference)
    inference.affine_weights.assign(np.zeros(inference.affine_weights.shape))
    inference.affine_biases.assign(inducing)
    mean_out = inference.mean_network.layers[-1]
    mean_out.kernel.assign(np.zeros(mean_out.kernel.shape))
    mean_out.bias.assign(q_mu.reshape(-1))  # [M, Q] order
    scale_out = inference.scale_network.layers[-1]
    scale_out.kernel.assign(np.zeros(scale_out.kernel.shape))
    scale_out.bias.assign(_raw_scale(q_sqrt))


def _problem(rng: np.random.Generator, mean_function: Optional[str]):
    x = rng.uniform(-2.0, 2.0, (NUM_DATA, INPUT_DIM))
    y = rng.standard_normal((NUM_DATA, OUTPUT_DIM))
    x_test = rng.uniform(-2.5, 2.5, (NUM_TEST, INPUT_DIM))
    inducing = rng.uniform(-2.0, 2.0, (NUM_INDUCING, INPUT_DIM))
    q_mu = rng.standard_normal((NUM_INDUCING, OUTPUT_DIM))
    q_sqrt = np.tril(0.3 * rng.standard_normal((OUTPUT_DIM, NUM_INDUCING, NUM_INDUCING)), -1)
    for q in range(OUTPUT_DIM):
        q_sqrt[q][np.diag_indices(NUM_INDUCING)] = rng.uniform(0.2, 0.9, NUM_INDUCING)
    kernel = gpflow.kernels.Matern52(variance=1.7, lengthscales=1.3)
    likelihood = gpflow.likelihoods.Gaussian(variance=0.15)
    if mean_function == "linear":
        mean = gpflow.mean_functions.Linear(
            A=rng.standard_normal((INPUT_DIM, OUTPUT_DIM)), b=rng.standard_normal(OUTPUT_DIM)
        )
    else:
        mean = None
    return x, y, x_test, inducing, q_mu, q_sqrt, kernel, likelihood, mean


def test_raw_scale_layout_round_trips(rng):
    """The helper inverts the documented raw layout (guards the test itself)."""
    q_sqrt = np.tril(rng.standard_normal((3, 4, 4)), -1)
    for q in range(3):
        q_sqrt[q][np.diag_indices(4)] = rng.uniform(0.1, 2.0, 4)
    raw = _raw_scale(q_sqrt)
    assert raw.shape == (scale_output_size(4, 3, True),)
    rebuilt = raw_to_q_sqrt(tf.constant(raw[None]), 4, 3, True).numpy()[0]
    np.testing.assert_allclose(rebuilt, q_sqrt, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("whiten", [False, True], ids=["unwhitened", "whitened"])
@pytest.mark.parametrize("mean_function", [None, "linear"], ids=["zero_mean", "linear_mean"])
def test_frozen_amortizer_matches_gpflow_svgp(rng, whiten, mean_function):
    x, y, x_test, inducing, q_mu, q_sqrt, kernel, likelihood, mean = _problem(rng, mean_function)
    svgp = gpflow.models.SVGP(
        kernel,
        likelihood,
        inducing.copy(),
        mean_function=mean,
        q_diag=False,
        whiten=whiten,
        num_latent_gps=OUTPUT_DIM,
        q_mu=q_mu,
        q_sqrt=q_sqrt,
    )
    layer = gpflux_avdgp.AmortizedGPLayer(
        OUTPUT_DIM,
        NUM_INDUCING,
        NUM_DATA,
        kernel=kernel,
        mean_function=mean,
        full_rank=True,
        whiten=whiten,
        kl_convention="paper",
    )
    model = tf_keras.Sequential(
        [
            tf_keras.Input((INPUT_DIM,), dtype=tf.float64),
            layer,
            gpflux_avdgp.TrainableLikelihood(likelihood),
        ]
    )
    # Unwhitened, the layer's q(u) is over u itself (prior mean m(Z)); GPflow's SVGP puts q(u)
    # over u - m(Z). Whitened, both use u = m(Z) + L v and q(v) is the same.
    layer_q_mu = q_mu if (whiten or mean is None) else q_mu + mean(inducing).numpy()
    _freeze_inference(layer, inducing, layer_q_mu, q_sqrt)

    # The frozen amortizer returns the constants for every datapoint.
    z_n, q_mu_n, q_sqrt_n = layer.inference(tf.constant(x))
    np.testing.assert_allclose(z_n.numpy(), np.broadcast_to(inducing, z_n.shape), atol=1e-14)
    np.testing.assert_allclose(q_mu_n.numpy(), np.broadcast_to(layer_q_mu, q_mu_n.shape))
    np.testing.assert_allclose(q_sqrt_n.numpy(), np.broadcast_to(q_sqrt, q_sqrt_n.shape))

    # (a) latent predictions
    prediction = gpflux_avdgp.predict_mixture(model, x_test)
    # predict_mixture keeps float64 inputs (Keras would cast NumPy inputs to float32)
    direct = output_mixture(model(x_test, training=False))
    np.testing.assert_allclose(prediction.f_means, direct.means.numpy(), rtol=0, atol=1e-14)
    f_mean, f_var = prediction.f_moments()
    with _svgp_jitter(kernel):
        svgp_f_mean, svgp_f_var = (t.numpy() for t in svgp.predict_f(x_test))
        svgp_y_mean, svgp_y_var = (t.numpy() for t in svgp.predict_y(x_test))
        y_test = rng.standard_normal((NUM_TEST, OUTPUT_DIM))
        svgp_log_density = svgp.predict_log_density((x_test, y_test)).numpy()
        svgp_elbo, svgp_kl = svgp.elbo((x, y)).numpy(), svgp.prior_kl().numpy()
    np.testing.assert_allclose(f_mean, svgp_f_mean, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(f_var, svgp_f_var, rtol=RTOL, atol=ATOL)

    # (b) predictive distribution of y
    y_mean, y_var = prediction.y_moments()
    np.testing.assert_allclose(y_mean, svgp_y_mean, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(y_var, svgp_y_var, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(
        prediction.log_density(y_test),
        svgp_log_density,
        rtol=RTOL,
        atol=ATOL,
    )

    # (c) per-datapoint objective on the full data as one batch
    packed = model(x, training=True)
    loss = gpflux_avdgp.AVDGPLoss(likelihood)(y, packed) + tf.add_n(model.losses)
    expected = -svgp_elbo / NUM_DATA
    np.testing.assert_allclose(loss.numpy(), expected, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(tf.add_n(model.losses).numpy(), svgp_kl / NUM_DATA, rtol=RTOL)


def test_per_point_convention_charges_the_full_kl(rng):
    """``kl_convention="per_point"`` adds every datapoint's full KL (here all equal to SVGP's)."""
    x, _, _, inducing, q_mu, q_sqrt, kernel, likelihood, _ = _problem(rng, None)
    svgp = gpflow.models.SVGP(
        kernel, likelihood, inducing.copy(), q_diag=False, whiten=False,
        num_latent_gps=OUTPUT_DIM, q_mu=q_mu, q_sqrt=q_sqrt,
    )  # fmt: skip
    layer = gpflux_avdgp.AmortizedGPLayer(
        OUTPUT_DIM, NUM_INDUCING, kernel=kernel, full_rank=True, kl_convention="per_point"
    )
    layer(tf.constant(x))
    _freeze_inference(layer, inducing, q_mu, q_sqrt)
    layer(tf.constant(x))
    with _svgp_jitter(kernel):
        svgp_kl = svgp.prior_kl().numpy()
    np.testing.assert_allclose(layer.losses[-1].numpy(), svgp_kl, rtol=RTOL, atol=ATOL)
