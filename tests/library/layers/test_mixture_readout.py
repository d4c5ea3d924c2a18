"""``MixtureMean`` and ``MixtureSample``: Keras layers after a GP layer, through a plain tensor."""

from __future__ import annotations

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras
from reference import mixture_moments

from gpflux_avdgp import (
    AmortizedGPLayer,
    AVDGPLoss,
    MixtureMean,
    MixtureSample,
    TrainableLikelihood,
    load_model,
)


def _packed(rng, batch: int, components: int, dim: int) -> np.ndarray:
    """A random packed mixture ``[B, S, 2 D + 1]`` with normalised log weights."""
    means = rng.normal(size=(batch, components, dim))
    variances = rng.uniform(0.1, 2.0, size=(batch, components, dim))
    logits = rng.normal(size=(batch, components))
    log_weights = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
    return np.concatenate([means, variances, log_weights[..., None]], axis=-1)


def test_mixture_mean_is_the_mixture_mean_and_total_variance(rng):
    packed = _packed(rng, 6, 4, 3)
    weights = np.exp(packed[..., 6])
    mean, variance = mixture_moments(weights, packed[..., :3], packed[..., 3:6])
    layer = MixtureMean(dtype="float64")
    np.testing.assert_allclose(layer(packed).numpy(), mean, rtol=1e-12)
    both = MixtureMean(with_variance=True, dtype="float64")(packed).numpy()
    assert both.shape == (6, 6)
    np.testing.assert_allclose(both, np.concatenate([mean, variance], axis=-1), rtol=1e-12)


def test_mixture_sample_has_the_mixture_moments_and_is_repeatable_in_prediction(rng):
    one_row = _packed(rng, 1, 3, 2)
    packed = np.repeat(one_row, 40_000, axis=0)  # the same mixture in every row
    layer = MixtureSample(seed=7, dtype="float64")
    draws = layer(packed, training=False).numpy()  # [40000, 2]
    mean, variance = mixture_moments(np.exp(one_row[..., 4]), one_row[..., :2], one_row[..., 2:4])
    standard_error = np.sqrt(variance[0] / len(draws))
    np.testing.assert_array_less(np.abs(draws.mean(axis=0) - mean[0]), 5 * standard_error)
    np.testing.assert_allclose(draws.var(axis=0), variance[0], rtol=0.05)
    assert int(layer.draw_counter.numpy()) == 0
    np.testing.assert_array_equal(layer(packed, training=False).numpy(), draws)  # repeatable
    trained = layer(packed, training=True).numpy()
    assert int(layer.draw_counter.numpy()) == 1 and not np.array_equal(trained, draws)


def test_mixture_sample_passes_gradients_to_the_component_means_and_variances(rng):
    packed = tf.Variable(_packed(rng, 5, 3, 2))
    with tf.GradientTape() as tape:
        out = MixtureSample(seed=1, dtype="float64")(packed, training=True)
        loss = tf.reduce_sum(out**2)
    gradient = tape.gradient(loss, packed).numpy()
    assert np.any(gradient[..., :2] != 0.0) and np.any(gradient[..., 2:4] != 0.0)
    np.testing.assert_array_equal(gradient[..., 4], 0.0)  # the component choice is discrete


@pytest.mark.parametrize(
    "readout",
    [MixtureMean, pytest.param(MixtureSample, marks=pytest.mark.slow)],
    ids=["mean", "sample"],
)
def test_a_gp_layer_as_feature_extractor_trains_saves_and_reloads(rng, tmp_path, readout):
    x = rng.uniform(-2.0, 2.0, size=(120, 2))
    y = np.sin(x[:, :1]) + 0.1 * rng.normal(size=(120, 1))
    model = tf_keras.Sequential(
        [
            tf_keras.Input((2,), dtype=tf.float64),
            AmortizedGPLayer(3, 4, len(x), seed=0),
            readout(),
            tf_keras.layers.Dense(1),
        ]
    )
    model.compile(tf_keras.optimizers.Adam(0.02), loss="mse")
    history = model.fit(x, y, batch_size=30, epochs=6, verbose=0)
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert model.layers[0].losses  # the GP layer's KL is part of the training loss
    model.save(tmp_path / "extractor.keras")
    reloaded = load_model(tmp_path / "extractor.keras")
    np.testing.assert_allclose(reloaded.predict(x, verbose=0), model.predict(x, verbose=0))


def test_a_plain_keras_layer_after_a_gp_layer_fails_naming_the_readout_layers(rng):
    likelihood = gpflow.likelihoods.Gaussian()
    model = tf_keras.Sequential(
        [
            tf_keras.Input((2,), dtype=tf.float64),
            AmortizedGPLayer(1, 4, 40, seed=0),
            tf_keras.layers.Dense(3),  # as wide as the mixture: the likelihood layer accepts it
            TrainableLikelihood(likelihood),
        ]
    )
    model.compile(tf_keras.optimizers.Adam(0.01), loss=AVDGPLoss())
    x, y = rng.normal(size=(40, 2)), rng.normal(size=(40, 1))
    with pytest.raises(ValueError, match=r"dense.*reads the packed mixture .* put .*MixtureMean"):
        model.fit(x, y, epochs=1, verbose=0)


@pytest.mark.parametrize("layer", [MixtureMean(), MixtureSample(seed=0)], ids=["mean", "sample"])
def test_readout_layers_refuse_what_is_not_a_packed_mixture(layer):
    with pytest.raises(ValueError, match=r"expected the packed mixture \[batch, components"):
        layer(tf.zeros([4, 3]))
