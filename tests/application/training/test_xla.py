"""``jit_compile=True`` (XLA) for every model, rule and task: same numbers as graph mode.

* one training step's loss and gradients under ``tf.function(jit_compile=True)`` equal the
  graph-mode ones for every model of the zoo (AVDGP AR1/AR2/AR2P/AR2PP, SGP-AVI, IDSGP and the
  GPflux baselines SVGP, DS-DGP, DSPP), regression and classification, Monte Carlo draws
  included (see :func:`~gpflux_avdgp.core.random.stateless_standard_normal`);
* ``model.fit`` with ``jit_compile=True`` trains;
* :func:`~gpflux_avdgp.predict_mixture` pads the last partial batch, so prediction under
  XLA compiles one program for a data set of any length, and the padding does not change the
  predictions.
"""

from __future__ import annotations

import subprocess
import sys

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from cluster import base_environment
from gpflow.keras import tf_keras
from helpers import SCRIPTS_DIR

from avdgp.zoo import ModelSpec, build_model
from gpflux_avdgp.prediction import mixture_function, pad_rows, padded_size, predict_mixture

NUM_DATA, DIM, BATCH = 120, 3, 40
ZOO = [
    ("avdgp", "ar1"),
    ("avdgp", "ar2"),
    ("avdgp", "ar2p"),
    ("avdgp", "ar2pp"),
    ("sgp-avi", None),
    ("idsgp", None),
    ("svgp", None),
    ("dsdgp", None),
    ("dspp", None),
]


def _data(task: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(NUM_DATA, DIM))
    f = np.sin(x[:, :1]) + 0.5 * x[:, 1:2] * x[:, 2:3]
    if task == "classification":
        return x, (f > 0).astype(np.float64)
    return x, f + 0.1 * rng.normal(size=(NUM_DATA, 1))


SINGLE_LAYER = {"sgp-avi", "idsgp", "svgp"}


def _small_model(model: str, rule, task: str, x: np.ndarray):
    depth = dict(num_layers=1, hidden_dims=[], num_inducing=[5])
    if model not in SINGLE_LAYER:
        depth = dict(num_layers=2, hidden_dims=[2], num_inducing=[5, 3])
    spec = ModelSpec(model=model, rule=rule, task=task, num_points=4, seed=3, **depth)
    tf_keras.utils.set_random_seed(0)
    return build_model(spec, DIM, NUM_DATA, inputs=x)


def _loss_and_gradients(built, x, y, jit: bool):
    """One training-mode evaluation: ``(loss, gradients)``; the draw counters are reset first,
    so both compilations see the same Monte Carlo draws."""
    model, loss_fn = built.model, built.loss
    variables = model.trainable_variables

    def step(inputs, targets):
        with tf.GradientTape() as tape:
            outputs = model(inputs, training=True)
            loss = tf.reduce_mean(loss_fn.call(targets, outputs)) + tf.add_n(model.losses)
        return loss, tape.gradient(loss, variables)

    for layer in model.layers:
        counter = getattr(layer, "draw_counter", None)
        if counter is not None:
            counter.assign(0)
    loss, gradients = tf.function(step, jit_compile=jit)(tf.constant(x), tf.constant(y))
    return loss.numpy(), [g.numpy() for g in gradients]


#: Fast run: regression for every AVDGP rule and DSPP (the wrapped GPflux layers), classification
#: for AR1; the other cases (about 5 to 10 s each) run in the slow suite.
FAST_CASES = {
    *((model, rule, "regression") for model, rule in ZOO if model in ("avdgp", "dspp")),
    ("avdgp", "ar1", "classification"),
}
CASES = [
    pytest.param(
        model, rule, task, marks=[] if (model, rule, task) in FAST_CASES else pytest.mark.slow
    )
    for task in ("regression", "classification")
    for model, rule in ZOO
]


@pytest.mark.slow
@pytest.mark.parametrize("model, rule, task", CASES)
def test_xla_step_equals_graph_step(model, rule, task):
    x, y = _data(task)
    built = _small_model(model, rule, task, x)
    graph_loss, graph_gradients = _loss_and_gradients(built, x[:BATCH], y[:BATCH], jit=False)
    xla_loss, xla_gradients = _loss_and_gradients(built, x[:BATCH], y[:BATCH], jit=True)
    assert np.isfinite(graph_loss)
    np.testing.assert_allclose(xla_loss, graph_loss, rtol=1e-9)
    assert len(xla_gradients) == len(graph_gradients) > 0
    for xla, graph in zip(xla_gradients, graph_gradients):
        np.testing.assert_allclose(xla, graph, rtol=1e-6, atol=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("rule", [pytest.param("ar1", marks=pytest.mark.slow), "ar2pp"])
def test_fit_with_jit_compile_trains(rule):
    """``model.fit`` under XLA for AR2PP and AR1 classification (slow); AR2P, and in the slow
    suite AR1 and AR2, with a Gaussian likelihood are in test_keras_training.py."""
    x, y = _data("classification" if rule == "ar1" else "regression")
    built = _small_model("avdgp", rule, "classification" if rule == "ar1" else "regression", x)
    built.model.compile(tf_keras.optimizers.Adam(0.03), loss=built.loss, jit_compile=True)
    history = built.model.fit(x, y, batch_size=BATCH, epochs=6, verbose=0)
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]


@pytest.mark.slow
def test_fit_under_xla_compiles_the_step_once(tmp_path):
    """A value that changes each step must stay an input of the program: XLA compiles a
    slice's start into its program, so a reach indexed by a slice recompiled every step
    (8 s each on the test model; the slow suite ran out of time)."""
    cache = tmp_path / "xla_cache"
    env = base_environment(TF_XLA_FLAGS=f"--tf_xla_persistent_cache_directory={cache}")
    script = SCRIPTS_DIR / "xla_programs.py"
    finished = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    programs = list(cache.iterdir())
    assert len(programs) == 1, [program.name for program in programs]


@pytest.mark.parametrize(
    "rows, batch, jit, expected",
    [
        (250, 100, False, 300),  # partial last batch padded to a full one
        (250, 100, True, 300),
        (300, 100, False, 300),  # already whole batches
        (7, 100, False, 7),  # one batch without XLA: no padding needed
        (7, 100, True, 8),  # under XLA: next power of two
        (1, 100, True, 1),
        (65, 100, True, 100),  # the power of two is capped at the batch size
    ],
)
def test_padded_size(rows, batch, jit, expected):
    assert padded_size(rows, batch, jit) == expected


def test_pad_rows_repeats_the_last_row():
    inputs = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(pad_rows(inputs, 4), [[1, 2], [3, 4], [3, 4], [3, 4]])
    assert pad_rows(inputs, 2) is inputs


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["ar2p", "ar2"])
def test_xla_prediction_compiles_once_and_padding_changes_nothing(rule):
    x, y = _data("regression")
    built = _small_model("avdgp", rule, "regression", x)
    reference = predict_mixture(built.model, x[:50], batch_size=50)  # graph mode, no padding
    built.model.compile(tf_keras.optimizers.Adam(0.01), loss=built.loss, jit_compile=True)

    prediction = predict_mixture(built.model, x[:50], batch_size=20)  # batches 20, 20, 10 -> 20
    function = mixture_function(built.model)  # what predict_mixture runs
    assert function.experimental_get_tracing_count() == 1
    for name in ("weights", "f_means", "f_variances", "y_means", "y_variances"):
        ours, expected = getattr(prediction, name), getattr(reference, name)
        assert ours.shape == expected.shape
        np.testing.assert_allclose(ours, expected, rtol=1e-9, atol=1e-12)
    assert isinstance(prediction.likelihood, gpflow.likelihoods.Gaussian)
