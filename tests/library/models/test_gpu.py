"""The same code on a GPU: placement, XLA, and the CPU's numbers (skipped without a GPU).

* a model built and trained under ``tf.device("/GPU:0")`` keeps its variables on the GPU and
  ``model.fit`` with ``jit_compile=True`` trains, for every rule;
* one training step's loss on the GPU equals the CPU's in float64, Monte Carlo rules included:
  the draws are Box-Muller of the Philox bits, which are the same on every device
  (:func:`~gpflux_avdgp.core.random.stateless_standard_normal`).
"""

from __future__ import annotations

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras

import gpflux_avdgp

GPUS = tf.config.list_physical_devices("GPU")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not GPUS, reason="no GPU visible to TensorFlow (tf.config.list_physical_devices('GPU'))"
    ),
]
NUM_DATA, DIM = 64, 3


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(NUM_DATA, DIM))
    return x, np.sin(x[:, :1]) + 0.1 * rng.normal(size=(NUM_DATA, 1))


def _model(rule: str, jit: bool):
    tf_keras.utils.set_random_seed(0)
    likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
    model = gpflux_avdgp.build_avdgp(
        input_dim=DIM,
        units=[3, 1],
        num_inducing=[6, 4],
        num_data=NUM_DATA,
        likelihood=likelihood,
        rule=rule,
        num_points=8,
        seed=0,
    )
    model.compile(
        tf_keras.optimizers.Adam(0.01),
        loss=gpflux_avdgp.AVDGPLoss(likelihood),
        jit_compile=jit,
    )
    return model


def _one_step_loss(device: str, rule: str) -> float:
    x, y = _data()
    with tf.device(device):
        model = _model(rule, jit=False)
        outputs = model(tf.constant(x), training=True)
        loss = tf.reduce_mean(model.loss.call(tf.constant(y), outputs)) + tf.add_n(model.losses)
    return float(loss)


@pytest.mark.parametrize("rule", ["ar1", "ar2", "ar2p"])
def test_fit_on_the_gpu_with_xla_keeps_variables_there(rule):
    x, y = _data()
    with tf.device("/GPU:0"):
        model = _model(rule, jit=True)
        data = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
        history = model.fit(data, epochs=4, verbose=0)
    assert all("GPU" in variable.device for variable in model.trainable_variables)
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]


@pytest.mark.parametrize("rule", ["ar2", "ar2p"])
def test_gpu_step_equals_cpu_step(rule):
    np.testing.assert_allclose(
        _one_step_loss("/GPU:0", rule), _one_step_loss("/CPU:0", rule), rtol=1e-9
    )
