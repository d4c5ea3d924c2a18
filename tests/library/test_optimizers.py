"""FlatAdam: Keras' Adam, number for number, as one update of a flat vector."""

from __future__ import annotations

import os
import subprocess
import sys

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras

import gpflux_avdgp as ga
from gpflux_avdgp.optimizers import FlatAdam


def _variables(seed: int = 0) -> list[tf.Variable]:
    rng = np.random.default_rng(seed)
    return [
        tf.Variable(rng.normal(size=(3, 4))),
        tf.Variable(rng.normal(size=(5,))),
        tf.Variable(np.float64(rng.normal())),
        tf.Variable(rng.normal(size=(2, 2, 2)).astype(np.float32)),  # a second float type
    ]


def _loss(variables):
    return sum(tf.reduce_sum(tf.cast(tf.sin(3.0 * v) * v**2, tf.float64)) for v in variables)


def _train(optimizer, steps: int = 7, frozen: tuple = ()) -> list[np.ndarray]:
    variables = _variables()
    for step in range(steps):
        with tf.GradientTape() as tape:
            loss = _loss(variables)
        gradients = tape.gradient(loss, variables)
        pairs = [
            (g, v) for i, (g, v) in enumerate(zip(gradients, variables)) if (i, step) not in frozen
        ]
        optimizer.build(variables)
        optimizer.apply_gradients(pairs)
    return [v.numpy() for v in variables]


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"amsgrad": True},
        {"beta_1": 0.8, "beta_2": 0.95, "epsilon": 1e-4},
        {"adaptive_epsilon": True},
        {"clipnorm": 0.5},
        {"weight_decay": 0.1},
        {"learning_rate": tf_keras.optimizers.schedules.ExponentialDecay(0.1, 2, 0.5)},
    ],
    ids=["default", "amsgrad", "betas", "adaptive_epsilon", "clipnorm", "weight_decay", "schedule"],
)
def test_flat_adam_makes_keras_adams_updates(options):
    options = {"learning_rate": 0.05, **options}
    expected = _train(tf_keras.optimizers.Adam(**options))
    found = _train(FlatAdam(**options))
    for mine, theirs in zip(found, expected):
        np.testing.assert_array_equal(mine, theirs)  # the same arithmetic, element by element


def test_a_variable_without_a_gradient_keeps_its_value_and_moments():
    frozen = {(1, 2), (1, 3), (3, 5)}  # variable 1 at steps 2 and 3, variable 3 at step 5
    expected = _train(tf_keras.optimizers.Adam(0.05), frozen=frozen)
    found = _train(FlatAdam(0.05), frozen=frozen)
    for mine, theirs in zip(found, expected):
        np.testing.assert_array_equal(mine, theirs)


def test_flat_adam_keeps_one_pair_of_moments_per_float_type():
    optimizer = FlatAdam(0.05)
    _train(optimizer, steps=1)
    shapes = sorted((v.dtype.name, tuple(v.shape)) for v in optimizer.variables[1:])
    assert shapes == [("float32", (8,)), ("float32", (8,)), ("float64", (18,)), ("float64", (18,))]


def _model(seed=0):
    return ga.build_avdgp(
        2, [3, 1], [4, 3], 60, gpflow.likelihoods.Gaussian(variance=0.1), seed=seed
    )


def _data():
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (60, 2))
    return x, np.sin(x[:, :1]) + 0.1 * rng.normal(size=(60, 1))


@pytest.mark.slow
def test_an_avdgp_trains_the_same_with_flat_adam_in_fewer_ops():
    x, y = _data()
    results, ops = {}, {}
    for name, optimizer in (("adam", tf_keras.optimizers.Adam(0.01)), ("flat", FlatAdam(0.01))):
        tf_keras.utils.set_random_seed(0)
        model = _model()
        model.compile(optimizer)
        history = model.fit(x, y, batch_size=20, epochs=3, shuffle=False, verbose=0)
        results[name] = (history.history["loss"], model.get_weights())
        graph = (
            tf.function(model.train_step)
            .get_concrete_function((tf.constant(x[:20]), tf.constant(y[:20])))
            .graph
        )
        ops[name] = sum(1 for op in graph.get_operations() if "Adam" in op.name)
    np.testing.assert_allclose(results["flat"][0], results["adam"][0], rtol=1e-12)
    for mine, theirs in zip(results["flat"][1], results["adam"][1]):
        np.testing.assert_allclose(mine, theirs, rtol=1e-10, atol=1e-12)
    variables = len(model.trainable_variables)
    assert ops["adam"] > 20 * variables  # Keras' Adam: about 24 ops per variable
    assert ops["flat"] < 8 * variables + 40


@pytest.fixture(scope="module")
def saved_flat(tmp_path_factory):
    """A model trained 2 epochs with FlatAdam and saved as ``.keras``, with its data: the
    reload tests share one fit."""
    x, y = _data()
    tf_keras.utils.set_random_seed(0)
    model = _model()
    model.compile(FlatAdam(0.01))
    model.fit(x, y, batch_size=20, epochs=2, shuffle=False, verbose=0)
    path = tmp_path_factory.mktemp("flat_adam") / "model.keras"
    model.save(path)
    return model, path, x, y


def test_a_model_saved_with_flat_adam_reloads_it_and_continues_the_same(saved_flat):
    model, path, x, y = saved_flat
    reloaded = ga.load_model(str(path))
    assert isinstance(reloaded.optimizer, FlatAdam)
    assert reloaded.optimizer.iterations.numpy() == 6
    for mine, theirs in zip(reloaded.optimizer.variables, model.optimizer.variables):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())  # the flat moments
    model.fit(x, y, batch_size=20, epochs=1, shuffle=False, verbose=0)
    reloaded.fit(x, y, batch_size=20, epochs=1, shuffle=False, verbose=0)
    for mine, theirs in zip(reloaded.get_weights(), model.get_weights()):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-14)


def test_flat_adam_refuses_use_ema():
    with pytest.raises(ValueError, match="use_ema: not supported by FlatAdam; use tf_keras"):
        FlatAdam(0.1, use_ema=True)


def test_flat_adam_refuses_a_sparse_gradient():
    table = tf.Variable(np.ones((4, 2)))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.gather(table, [0, 2]))
    gradient = tape.gradient(loss, table)
    assert isinstance(gradient, tf.IndexedSlices)
    with pytest.raises(ValueError, match="sparse gradient .* use tf_keras.optimizers.Adam"):
        FlatAdam(0.1).apply_gradients([(gradient, table)])


REPLICAS_SCRIPT = """
import numpy as np, tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from gpflux_avdgp.optimizers import FlatAdam
strategy = tf.distribute.MirroredStrategy([d.name for d in tf.config.list_logical_devices("CPU")])
with strategy.scope():
    try:
        FlatAdam(0.1).build([tf.Variable(np.ones(3))])
    except ValueError as error:
        print(error)
"""


@pytest.mark.slow  # a fresh process with two logical devices
def test_flat_adam_refuses_several_replicas():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(
        [sys.executable, "-c", REPLICAS_SCRIPT], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "2 replicas" in done.stdout and "use tf_keras.optimizers.Adam" in done.stdout


@pytest.mark.slow
def test_a_checkpoint_keeps_flat_adam_s_state(tmp_path):
    x, y = _data()
    model = _model()
    model.compile(FlatAdam(0.01))
    model.fit(x, y, batch_size=20, epochs=1, shuffle=False, verbose=0)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
    path = checkpoint.write(str(tmp_path / "checkpoint"))
    moments = [v.numpy() for v in model.optimizer.variables]
    model.fit(x, y, batch_size=20, epochs=1, shuffle=False, verbose=0)
    checkpoint.read(path).assert_consumed()
    for mine, theirs in zip(model.optimizer.variables, moments):
        np.testing.assert_array_equal(mine.numpy(), theirs)


@pytest.mark.slow  # a SavedModel save traces every call; the .keras reload above is the fast test
def test_a_savedmodel_keeps_flat_adam_s_state(tmp_path):
    x, y = _data()
    model = _model()
    model.compile(FlatAdam(0.01))
    model.fit(x, y, batch_size=20, epochs=1, shuffle=False, verbose=0)
    model.save(tmp_path / "saved_model")  # a SavedModel folder
    reloaded = ga.load_model(str(tmp_path / "saved_model"))
    assert reloaded.optimizer.iterations.numpy() == 3
    for mine, theirs in zip(reloaded.optimizer.variables, model.optimizer.variables):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


KERAS_LOAD_SCRIPT = """
import sys
import gpflux_avdgp
from gpflow.keras import tf_keras
model = tf_keras.models.load_model(sys.argv[1])
print(type(model.optimizer).__name__, int(model.optimizer.iterations.numpy()))
"""


@pytest.mark.slow  # a fresh process imports TensorFlow
def test_keras_own_loader_reloads_a_model_saved_with_flat_adam(saved_flat):
    _, path, _, _ = saved_flat  # the file as saved (the model may have trained on since)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(
        [sys.executable, "-c", KERAS_LOAD_SCRIPT, str(path)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["FlatAdam", "6"]
