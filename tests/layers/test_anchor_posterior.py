"""Anchors with a global posterior (``AmortizedGPLayer(anchor_posterior=True)``): with the
amortized part at its prior the layer is GPflow's whitened SVGP on the anchors, in its
marginals and its objective; the options are checked and saved."""

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras
from helpers import REFERENCE_TOLERANCE
from test_svgp_equivalence import _freeze_inference, _svgp_jitter

import gpflux_avdgp

RTOL, ATOL = REFERENCE_TOLERANCE
NUM_DATA, INPUT_DIM, NUM_ANCHORS, NUM_INDUCING, OUTPUT_DIM = 15, 2, 6, 3, 2


def _freeze_at_prior(layer, inducing: np.ndarray, full_rank: bool) -> None:
    """The inference function returns ``Z = inducing``, ``m = 0`` and ``S = I`` everywhere."""
    eye = np.broadcast_to(np.eye(NUM_INDUCING), (OUTPUT_DIM, NUM_INDUCING, NUM_INDUCING))
    if full_rank:
        _freeze_inference(layer, inducing, np.zeros((NUM_INDUCING, OUTPUT_DIM)), eye)
        return
    inference = layer.inference
    inference.affine_weights.assign(np.zeros(inference.affine_weights.shape))
    inference.affine_biases.assign(inducing)
    for network, raw in ((inference.mean_network, 0.0), (inference.scale_network, 1.0)):
        out = network.layers[-1]
        out.kernel.assign(np.zeros(out.kernel.shape))
        out.bias.assign(np.full(out.bias.shape, np.log(np.expm1(raw)) if raw else 0.0))


@pytest.mark.parametrize("full_rank", [False, True])
def test_with_the_amortized_part_at_its_prior_the_layer_is_svgp_on_the_anchors(rng, full_rank):
    x = rng.uniform(-2.0, 2.0, (NUM_DATA, INPUT_DIM))
    y = rng.standard_normal((NUM_DATA, OUTPUT_DIM))
    x_test = rng.uniform(-3.0, 3.0, (7, INPUT_DIM))
    anchors = rng.uniform(-2.0, 2.0, (NUM_ANCHORS, INPUT_DIM))
    q_mu = rng.standard_normal((NUM_ANCHORS, OUTPUT_DIM))
    if full_rank:
        q_sqrt = np.tril(0.3 * rng.standard_normal((OUTPUT_DIM, NUM_ANCHORS, NUM_ANCHORS)), -1)
        for q in range(OUTPUT_DIM):
            q_sqrt[q][np.diag_indices(NUM_ANCHORS)] = rng.uniform(0.2, 0.9, NUM_ANCHORS)
    else:
        q_sqrt = rng.uniform(0.2, 0.9, (OUTPUT_DIM, NUM_ANCHORS))
    kernel = gpflow.kernels.Matern52(variance=1.7, lengthscales=1.3)
    likelihood = gpflow.likelihoods.Gaussian(variance=0.15)
    svgp = gpflow.models.SVGP(
        kernel, likelihood, anchors.copy(), q_diag=not full_rank, whiten=True,
        num_latent_gps=OUTPUT_DIM, q_mu=q_mu, q_sqrt=q_sqrt if full_rank else q_sqrt.T,
    )  # fmt: skip
    layer = gpflux_avdgp.AmortizedGPLayer(
        OUTPUT_DIM, NUM_INDUCING, NUM_DATA, kernel=kernel, full_rank=full_rank, whiten=True,
        kl_convention="paper", num_anchors=NUM_ANCHORS, anchor_posterior=True,
    )  # fmt: skip
    model = tf_keras.Sequential(
        [tf_keras.Input((INPUT_DIM,), dtype=tf.float64), layer,
         gpflux_avdgp.TrainableLikelihood(likelihood)]
    )  # fmt: skip
    _freeze_at_prior(layer, rng.uniform(-2.0, 2.0, (NUM_INDUCING, INPUT_DIM)), full_rank)
    layer.anchors.assign(anchors)
    layer.anchors_placed.assign(1)
    layer.anchor_q_mu.assign(q_mu)
    layer.anchor_q_sqrt.assign(q_sqrt)

    prediction = gpflux_avdgp.predict_mixture(model, x_test)
    with _svgp_jitter(kernel):
        f_mean, f_var = (t.numpy() for t in svgp.predict_f(x_test))
        elbo, kl = svgp.elbo((x, y)).numpy(), svgp.prior_kl().numpy()
    mean, var = prediction.f_moments()
    np.testing.assert_allclose(mean, f_mean, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(var, f_var, rtol=RTOL, atol=ATOL)
    packed = model(x, training=True)
    loss = gpflux_avdgp.AVDGPLoss(likelihood)(y, packed) + tf.add_n(model.losses)
    np.testing.assert_allclose(loss.numpy(), -elbo / NUM_DATA, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(tf.add_n(model.losses).numpy(), kl / NUM_DATA, rtol=RTOL)


def test_the_anchor_posterior_needs_anchors_and_num_data_and_is_saved():
    with pytest.raises(ValueError, match="anchor_posterior: .* num_anchors > 0 and num_data"):
        gpflux_avdgp.AmortizedGPLayer(1, 3, 10, whiten=True, anchor_posterior=True)
    with pytest.raises(ValueError, match="anchor_posterior"):
        gpflux_avdgp.AmortizedGPLayer(
            1, 3, whiten=True, num_anchors=4, anchor_posterior=True, kl_convention="per_point"
        )
    layer = gpflux_avdgp.AmortizedGPLayer(
        1, 3, 10, whiten=True, num_anchors=4, anchor_posterior=True
    )
    assert layer.get_config()["anchor_posterior"] is True
    again = gpflux_avdgp.AmortizedGPLayer.from_config(layer.get_config())
    assert again.anchor_posterior


def test_a_model_with_anchor_posteriors_saves_and_reloads_its_predictions(rng, tmp_path):
    x = rng.normal(size=(64, 2))
    y = np.sin(x[:, :1])
    model = gpflux_avdgp.build_avdgp(
        2, [2, 1], 3, 64, gpflow.likelihoods.Gaussian(0.1), num_points=4, seed=0,
        anchor_posterior=True,
    )  # fmt: skip
    model.compile(tf_keras.optimizers.Adam(0.01))
    model.fit(x, y, epochs=1, batch_size=32, verbose=0)
    assert all(layer.anchor_posterior for layer in model.layers[:-1])
    model.save(tmp_path / "model.keras")
    again = gpflux_avdgp.load_model(tmp_path / "model.keras")
    want = gpflux_avdgp.predict_mixture(model, x[:5]).f_moments()
    got = gpflux_avdgp.predict_mixture(again, x[:5]).f_moments()
    for mine, theirs in zip(got, want):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12)
