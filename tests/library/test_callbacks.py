"""``BestEpochStopping`` keeps ``EarlyStopping``'s choices: the same best epoch, weights, waits
and stop on the same scores, whatever the options (the guard's part is in
``tests/library/layers/test_input_guard.py``)."""

import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras

from gpflux_avdgp.callbacks import BestEpochStopping

NAN = float("nan")


def _replay(stopping: tf_keras.callbacks.EarlyStopping, scores: list) -> tuple:
    """Run ``stopping`` over epochs scored ``scores`` (``None``: no score logged) on a small
    Keras model whose weights move every epoch; its state after each epoch and at the end."""
    model = tf_keras.Sequential(
        [tf_keras.Input((2,)), tf_keras.layers.Dense(3, kernel_initializer="zeros")]
    )
    stopping.set_model(model)
    stopping.on_train_begin()
    states = []
    for epoch, score in enumerate(scores):
        for variable in model.weights:
            variable.assign_add(tf.ones_like(variable))
        stopping.on_epoch_end(epoch, {} if score is None else {"score": score})
        states.append((stopping.best, stopping.best_epoch, stopping.wait, model.stop_training))
    stopping.on_train_end()
    return states, [w.copy() for w in model.get_weights()], stopping.stopped_epoch


@pytest.mark.parametrize(
    "scores, options",
    [
        ([3.0, 2.0, 2.5, 1.0, 1.5, 1.6, 1.7], {"patience": 2}),
        ([3.0, 2.0, 2.5, 1.0, 1.5, 1.6, 1.7], {"patience": 2, "min_delta": 0.6}),
        ([NAN, NAN, NAN], {"patience": 5}),  # never better: the first epoch is kept
        ([None, 2.0, None, 1.0], {"patience": 5}),
        ([1.0, 2.0, 3.0, 0.5, 4.0], {"patience": 5, "start_from_epoch": 2}),
        ([3.0, 2.0, 1.0, 0.5], {"patience": 1, "baseline": 0.9}),
        ([3.0, 2.0, 1.0], {"patience": 5, "restore_best_weights": False}),
    ],
)
def test_best_epoch_stopping_chooses_as_early_stopping_does(scores, options):
    options = {"restore_best_weights": True, **options}
    expected = _replay(tf_keras.callbacks.EarlyStopping("score", **options), scores)
    got = _replay(BestEpochStopping("score", **options), scores)
    np.testing.assert_equal(got[0], expected[0])  # best, best epoch, wait, stop per epoch
    assert got[2] == expected[2]
    for mine, keras in zip(got[1], expected[1], strict=True):
        np.testing.assert_array_equal(mine, keras)  # the restored (or last) weights


class _CountingModel(tf_keras.Sequential):
    """Counts the walks of its weights (``Model.weights``)."""

    walks = [0]

    @property
    def weights(self):
        self.walks[0] += 1
        return super().weights


def test_best_epoch_stopping_lists_the_weights_once_not_at_every_better_epoch():
    model = _CountingModel([tf_keras.Input((2,)), tf_keras.layers.Dense(3)])
    stopping = BestEpochStopping("score", patience=5, restore_best_weights=True)
    stopping.set_model(model)
    stopping.on_train_begin()
    _CountingModel.walks[0] = 0
    for epoch in range(6):  # better every epoch
        stopping.on_epoch_end(epoch, {"score": 10.0 - epoch})
    assert _CountingModel.walks[0] == 1  # EarlyStopping: 6
    assert stopping.best_epoch == 5 and len(stopping.best_weights) == 2
