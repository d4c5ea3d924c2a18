"""Every trainable variable of an AVDGP receives a finite, non-zero gradient from the objective.

A variable whose gradient is ``None`` or identically zero is silently never trained (a
``stop_gradient`` by mistake, a variable created but not used, a Keras ``Sequential`` that does
not track a GPflow parameter). The objective is the one ``model.fit`` minimises: the
``AVDGPLoss`` batch mean plus the layers' KL terms from ``model.losses``.
"""

from typing import Any

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras

import gpflux_avdgp

INPUT_DIM, UNITS, NUM_INDUCING = 3, [3, 2, 1], [3, 2, 2]
NUM_DATA, BATCH, NUM_POINTS = 40, 8, 4

VARIANTS: dict[str, dict[str, Any]] = {
    "ar2p": {},
    "ar2pp": {"rule": "ar2pp", "objective": "predictive"},
    "ar2": {"rule": "ar2"},
    "ar1": {"rule": "ar1", "num_points": 2},
    "full_rank": {"full_rank": True},
    "whiten": {"whiten": True},
    "linear_mean": {"mean_function": "linear"},
    "mlp_inference": {"inference": "mlp"},
}


def _variable_names(model: tf_keras.Model) -> dict:
    """Readable, unique names ``layer/part/variable`` for the model's trainable variables."""
    names = {}
    for layer in model.layers:
        modules = {
            "kernel": getattr(layer, "kernel", None),
            "mean_function": getattr(layer, "mean_function", None),
            "likelihood": getattr(layer, "likelihood", None),
        }
        for part, module in modules.items():
            if isinstance(module, tf.Module):
                for path, param in gpflow.utilities.parameter_dict(module).items():
                    variable = getattr(param, "unconstrained_variable", param)
                    names[variable.ref()] = f"{layer.name}/{part}{path}"
        inference = getattr(layer, "inference", None)
        if inference is not None:
            networks = [
                getattr(inference, attr)
                for attr in ("mean_network", "scale_network", "network")
                if hasattr(inference, attr)
            ]
            for network in networks:
                for sublayer in network.layers:
                    for weight in sublayer.weights:
                        short = weight.name.split("/")[-1]
                        names[weight.ref()] = (
                            f"{layer.name}/inference/{network.name}/{sublayer.name}/{short}"
                        )
        for weight in layer.trainable_weights:
            names.setdefault(weight.ref(), weight.name)
    return names


@pytest.mark.parametrize(
    "variant",  # the sampled, default and predictive rules by default; the options in CI
    [
        v if v in ("ar1", "ar2p", "ar2pp") else pytest.param(v, marks=pytest.mark.slow)
        for v in VARIANTS
    ],
)
def test_every_trainable_variable_gets_a_gradient(rng, variant):
    options = dict(VARIANTS[variant])
    objective = options.pop("objective", "elbo")
    options.setdefault("num_points", NUM_POINTS)
    likelihood = gpflow.likelihoods.Gaussian(variance=0.3)
    model = gpflux_avdgp.build_avdgp(
        INPUT_DIM, UNITS, NUM_INDUCING, NUM_DATA, likelihood, seed=7, **options
    )
    loss_fn = gpflux_avdgp.AVDGPLoss(likelihood, objective=objective)
    x = rng.uniform(-2.0, 2.0, (BATCH, INPUT_DIM))
    y = rng.standard_normal((BATCH, UNITS[-1]))

    with tf.GradientTape() as tape:
        output = model(x, training=True)
        loss = loss_fn(y, output) + tf.add_n(model.losses)
    variables = model.trainable_variables
    gradients = tape.gradient(loss, variables)
    assert np.isfinite(loss.numpy())
    # one KL term per GP layer, and the likelihood layer's check that the loss read it (zero)
    assert len(model.losses) == len(UNITS) + 1

    names = _variable_names(model)
    assert len({v.ref() for v in variables}) == len(variables)
    assert all(v.ref() in names for v in variables)
    labels = {names[v.ref()] for v in variables}
    # the parameters that must be trained are among the trainable variables
    expected = {"likelihood/likelihood.variance"}
    for index in (1, 2, 3):
        expected |= {
            f"gp_layer_{index}/kernel.variance",
            f"gp_layer_{index}/kernel.lengthscales",
        }
    if options.get("rule", "ar2p") in ("ar2p", "ar2pp"):
        expected |= {
            "gp_layer_2/sigma_points:0",
            "gp_layer_3/sigma_points:0",
            "gp_layer_2/sigma_point_logits:0",
        }
    if options.get("mean_function") == "linear":
        for index in (1, 2, 3):
            expected |= {f"gp_layer_{index}/mean_function.A", f"gp_layer_{index}/mean_function.b"}
    assert expected <= labels, sorted(expected - labels)

    for variable, gradient in zip(variables, gradients):
        name = f"{names[variable.ref()]} {tuple(variable.shape)}"
        assert gradient is not None, f"{variant}: no gradient for {name}"
        gradient = tf.convert_to_tensor(gradient).numpy()
        assert np.all(np.isfinite(gradient)), f"{variant}: non-finite gradient for {name}"
        assert np.any(gradient != 0.0), f"{variant}: all-zero gradient for {name}"
