"""``TrainConfig.steps_per_execution``: several training steps per call of Keras' train
function, with the results of one step per call up to floating-point rounding.

* ``fit_model`` with 4 steps per call (23 steps per epoch: a partial last call) calls the
  train function 6 times an epoch instead of 23 and ends with the same losses and weights up
  to rounding (AR2: Monte Carlo draws keyed by the in-graph step counter).
* ``fit_model_on_dataset`` does the same on a ``tf.data`` pipeline and refuses one of unknown
  length, which Keras cannot split into calls.
* A saved run resumes with another value (a speed setting, not part of the run's settings);
  a NaN step is located to the batches of its call; bad values are refused.
"""

import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras
from helpers import prepare_split_run_dir

from avdgp.data import Split
from avdgp.training import EpochProgress, TrainConfig, fit_model, fit_model_on_dataset
from avdgp.training.fit import _describe_non_finite_step
from avdgp.zoo import ModelSpec, build_model

SPEC = ModelSpec(
    model="avdgp", rule="ar2", num_layers=2, hidden_dims=[2], num_inducing=[3, 3], num_points=4
)
ROWS, BATCH = 230, 10  # 23 steps per epoch


def _data(rng) -> tuple[np.ndarray, np.ndarray]:
    x = rng.normal(size=(ROWS, 2))
    return x, np.sin(x[:, :1]) + 0.1 * rng.normal(size=(ROWS, 1))


class _CallCounter(tf_keras.callbacks.Callback):
    """Counts the batch hooks Keras runs: one per call of the train function."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def on_train_batch_begin(self, batch, logs=None):
        self.calls += 1


def _train(x, y, steps_per_execution: int, fit) -> tuple[list, list, int, tf_keras.Model]:
    tf_keras.backend.clear_session()
    tf_keras.utils.set_random_seed(0)
    built = build_model(SPEC, 2, ROWS)
    config = TrainConfig.from_preset(
        "paper",
        epochs=2,
        batch_size=BATCH,
        learning_rate=0.02,
        seed=5,
        steps_per_execution=steps_per_execution,
    )
    counter = _CallCounter()
    progress = fit(built, x, y, config, callbacks=(counter,))
    return progress.losses, built.model.get_weights(), counter.calls, built.model


def _fit_arrays(built, x, y, config, callbacks):
    return fit_model(built, x, y, config, callbacks=callbacks)


def _fit_pipeline(built, x, y, config, callbacks):
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(config.batch_size)
    return fit_model_on_dataset(built, data, config, callbacks=callbacks)


@pytest.mark.parametrize(
    "fit",
    [
        # both in the slow suite: steps_per_execution is an application option (avdgp fit);
        # the default suite keeps its refusal of a pipeline of unknown length
        pytest.param(_fit_arrays, id="arrays", marks=pytest.mark.slow),
        pytest.param(_fit_pipeline, id="dataset", marks=pytest.mark.slow),
    ],
)
def test_several_steps_per_call_give_the_results_of_one(rng, fit):
    x, y = _data(rng)
    one_losses, one_weights, one_calls, _ = _train(x, y, 1, fit)
    four_losses, four_weights, four_calls, model = _train(x, y, 4, fit)
    assert one_calls == 2 * 23
    assert four_calls == 2 * 6  # 5 calls of 4 steps and one of 3, per epoch
    assert int(model._steps_per_execution.numpy()) == 4
    assert int(model.optimizer.iterations.numpy()) == 2 * 23
    # Equal up to rounding: Grappler optimises the loop of 4 steps as one graph, so sums may
    # be ordered differently (measured: 2e-11 relative after 46 steps). Draws keyed to the
    # wrong step, or a step skipped or repeated, would differ by far more than this.
    np.testing.assert_allclose(four_losses, one_losses, rtol=1e-9)
    for mine, theirs in zip(four_weights, one_weights):
        np.testing.assert_allclose(mine, theirs, rtol=1e-8, atol=1e-10)


def test_a_pipeline_of_unknown_length_is_refused(rng):
    x, y = _data(rng)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH).filter(lambda a, b: True)
    built = build_model(SPEC, 2, ROWS)
    config = TrainConfig.from_preset("paper", epochs=1, batch_size=BATCH, steps_per_execution=3)
    with pytest.raises(ValueError, match=r"steps_per_execution=3 needs a dataset of known length"):
        fit_model_on_dataset(built, data, config)


def test_a_saved_run_resumes_with_another_value(tmp_path, rng):
    x, y = _data(rng)
    split = Split(x, y, x[:0], y[:0], x[:20], y[:20])
    config = TrainConfig.from_preset("paper", epochs=1, batch_size=BATCH, seed=0)
    prepare_split_run_dir(tmp_path, SPEC, split, config, "toy")
    faster = TrainConfig.from_preset(
        "paper", epochs=1, batch_size=BATCH, seed=0, steps_per_execution=10
    )
    prepare_split_run_dir(tmp_path, SPEC, split, faster, "toy")  # no "other settings" error
    with pytest.raises(ValueError, match="other settings"):
        prepare_split_run_dir(
            tmp_path, SPEC, split, TrainConfig.from_preset("paper", epochs=1, batch_size=20), "toy"
        )


@pytest.mark.parametrize(
    "steps_per_execution, batch, expected",
    [(1, 11, "batch 12"), (10, 10, "one of batches 11 to 20"), (10, 20, "one of batches 21 to 23")],
)
def test_a_nan_step_is_located_to_the_batches_of_its_call(steps_per_execution, batch, expected):
    progress = EpochProgress("avdgp-ar2", stream=None)
    progress.set_params({"epochs": 3, "steps": 23})
    progress.steps_per_execution = steps_per_execution
    progress.epoch, progress.batch = 1, batch
    error = tf.errors.InvalidArgumentError(None, None, "gp_layer_1: non-finite")
    message = _describe_non_finite_step(error, tf_keras.Sequential(), progress, None)
    assert message.startswith(f"avdgp-ar2: training stopped in epoch 2, {expected}: ")


@pytest.mark.parametrize(
    "value, error", [(0, ValueError), (-1, ValueError), (2.5, TypeError), ("4", TypeError)]
)
def test_bad_values_are_refused(value, error):
    with pytest.raises(error, match="steps_per_execution") as caught:
        TrainConfig(steps_per_execution=value)
    assert type(caught.value) is error
