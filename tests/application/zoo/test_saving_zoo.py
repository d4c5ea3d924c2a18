"""Every model of the experiments' zoo survives ``model.save`` and loading in both formats
without ``custom_objects``: the same variables, optimizer state and predictions, and a
compiled loss that shares the reloaded model's likelihood. Loading never unpickles code.

Continued training after a reload is checked in ``tests/library/io/test_saving.py`` on a model
that mixes the layer kinds (the zoo models only differ from it by their configs).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras
from saving_checks import (
    FORMATS,
    assert_loss_shares_likelihood,
    assert_same_optimizer_state,
    assert_same_weights,
    perturb_state,
    refusing_unpickling,
    toy_data,
)

import gpflux_avdgp
from avdgp import training
from avdgp.zoo import ModelSpec, build_model
from gpflux_avdgp import AmortizedGPLayer

#: (model, rule, task): every family, every AVDGP rule, both tasks.
ZOO = [
    ("avdgp", "ar1", "regression"),
    ("avdgp", "ar2", "classification"),
    ("avdgp", "ar2p", "regression"),
    ("avdgp", "ar2pp", "classification"),
    ("sgp-avi", None, "regression"),
    ("idsgp", None, "classification"),
    ("svgp", None, "classification"),
    ("dsdgp", None, "regression"),
    ("dspp", None, "classification"),
]
#: Round trips run by default: AVDGP's default rule and the one-layer families, as ``.keras``
#: files. The other rules, the deep global-inducing models (DS-DGP, DSPP) and every SavedModel
#: (saving one traces every layer) run in the slow suite; ``tests/library/io/test_saving.py``
#: keeps a default round trip of a model that mixes the layer kinds.
DEFAULT_ROUND_TRIPS = {
    "avdgp-ar2p-regression-keras",
    "sgp-avi-regression-keras",
    "idsgp-classification-keras",
    "svgp-classification-keras",
}


def zoo_cases() -> list:
    cases = []
    for kind, rule, task in ZOO:
        label = f"avdgp-{rule}" if rule else kind
        for suffix in FORMATS:
            name = f"{label}-{task}-{'keras' if suffix else 'savedmodel'}"
            slow = name not in DEFAULT_ROUND_TRIPS
            cases.append(
                pytest.param(
                    kind, rule, task, suffix, id=name, marks=[pytest.mark.slow] if slow else []
                )
            )
    return cases


@pytest.mark.parametrize("kind, rule, task, suffix", zoo_cases())
def test_zoo_model_round_trip(tmp_path, rng, kind: str, rule: Optional[str], task: str, suffix):
    x, y = toy_data(rng, task)
    deep = kind in ("avdgp", "dsdgp", "dspp")
    spec = ModelSpec(
        model=kind,
        rule=rule or "ar2p",
        task=task,
        num_layers=2,
        hidden_dims=[3] if deep else None,
        num_inducing=[4, 4] if deep else [4],
        num_points=4,
    )
    built = build_model(spec, x.shape[1], len(x), inputs=x)
    model = built.model
    model.compile(tf_keras.optimizers.Adam(0.01), loss=built.loss)
    perturb_state(model, rng)

    path = str(tmp_path / f"{spec.label}{suffix}")
    model.save(path)
    with refusing_unpickling():
        if suffix == ".keras":
            reloaded = tf_keras.models.load_model(path, safe_mode=True)
        else:  # tf_keras.models.load_model, plus the optimizer state it leaves out
            reloaded = gpflux_avdgp.load_model(path)
    assert_same_weights(model, reloaded)
    assert_same_optimizer_state(model, reloaded)
    assert_loss_shares_likelihood(reloaded)
    assert reloaded.loss.get_config() == model.loss.get_config()
    # the packed predictive mixture (prediction mode: AR2P's sigma points, fixed AR1/AR2
    # draws), bit for bit; test_saving.py compares predict_mixture
    np.testing.assert_array_equal(reloaded(x).numpy(), model(x).numpy())


def test_float32_model_round_trip(tmp_path, rng):
    """A float32 model (GPflux and amortized layers) reloads in float32 under the same GPflow
    float type, as the runner trains and saves it."""
    x, _ = toy_data(rng)
    x = x.astype(np.float32)
    spec = ModelSpec(model="dspp", num_layers=2, hidden_dims=[3], num_inducing=[4, 4], num_points=3)
    path = str(tmp_path / "model.keras")
    with training.float_type("float32"):
        built = build_model(spec, 2, len(x), inputs=x)
        *gp_layers, likelihood_layer = built.model.layers
        model = tf_keras.Sequential(
            [tf_keras.Input((2,), dtype=tf.float32)]
            + gp_layers
            + [AmortizedGPLayer(1, 3, len(x), seed=3), likelihood_layer]
        )
        perturb_state(model, rng)
        model.save(path)
        reloaded = tf_keras.models.load_model(path)
        assert {v.dtype for v in reloaded.weights} == {tf.float32}
        assert reloaded.layers[-1].likelihood.variance.dtype == tf.float32
        assert_same_weights(model, reloaded)
        np.testing.assert_array_equal(reloaded(x).numpy(), model(x).numpy())
