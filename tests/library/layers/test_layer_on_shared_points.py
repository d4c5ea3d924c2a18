"""A layer on shared points (AR2P's expanded mixture) computes its covariances and linear mean
function from the factors of ``F``: the same numbers and gradients as with ``F`` formed."""

import gpflow
import numpy as np
import pytest
import tensorflow as tf

from gpflux_avdgp import AmortizedGPLayer
from gpflux_avdgp.core import shared_points
from gpflux_avdgp.core.mixture import GaussianMixture

B, D, S = 6, 3, 5


def _outputs(layer, inputs, monkeypatch, factored: bool):
    if not factored:  # the path every other kernel takes: F formed, pointwise covariances
        monkeypatch.setattr(shared_points, "shared_points_available", lambda kernel: False)
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        packed = layer(inputs, training=True)
        objective = tf.reduce_sum(tf.sin(packed)) + tf.add_n(layer.losses)
    sources = [inputs, *layer.trainable_variables]
    gradients = tape.gradient(objective, sources)
    monkeypatch.undo()
    return packed.numpy(), [g.numpy() for g in gradients]


@pytest.mark.parametrize(
    "options",
    [
        {"mean_function": "linear"},
        {"mean_function": gpflow.mean_functions.Constant(np.array([0.3, -0.2]))},
        {"whiten": True, "num_anchors": 4, "ard": True},
        {"full_rank": True, "kernel": "squared_exponential"},
        {"whiten": True, "num_anchors": 4, "mean_function": "linear"},
    ],
    ids=["linear_mean", "constant_mean", "anchors_ard", "full_rank_se", "anchors_linear_mean"],
)
def test_factored_locations_give_the_numbers_of_formed_ones(rng, monkeypatch, options):
    layer = AmortizedGPLayer(2, 3, num_data=50, rule="ar2p", num_points=S, seed=1, **options)
    mixture = GaussianMixture(
        tf.constant(rng.normal(size=(B, 1, D))),
        tf.constant(np.exp(rng.normal(size=(B, 1, D)))),
        tf.zeros([B, 1], tf.float64),
    )
    inputs = mixture.pack()
    layer(inputs)  # builds
    for variable in layer.trainable_variables:  # away from the symmetric start
        variable.assign(variable + 0.3 * rng.normal(size=variable.shape))
    if isinstance(layer.mean_function, gpflow.mean_functions.Linear):
        layer.mean_function.A.assign(rng.normal(size=(D, 2)))
    packed, gradients = _outputs(layer, inputs, monkeypatch, factored=True)
    expected, expected_gradients = _outputs(layer, inputs, monkeypatch, factored=False)
    np.testing.assert_allclose(packed, expected, rtol=1e-10, atol=1e-12)
    for actual, wanted in zip(gradients, expected_gradients):
        np.testing.assert_allclose(actual, wanted, rtol=1e-8, atol=1e-10)
