"""Layers refuse inputs they cannot read at build time, with one line that says what to do:
a kernel or a wrapped GPflux layer made for another input width, an input of unknown width."""

from __future__ import annotations

import gpflow
import gpflux
import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras

from gpflux_avdgp import AmortizedGPLayer, AVDGPModel, SigmaPointGPLayer, TrainableLikelihood


def test_a_kernel_for_another_width_fails_at_build_naming_the_layer():
    layer = AmortizedGPLayer(
        1, 2, 10, kernel=gpflow.kernels.Matern32(lengthscales=[1.0, 1.0, 1.0]), name="gp_in"
    )
    with pytest.raises(ValueError) as caught:
        layer(tf.zeros([4, 2], tf.float64))
    assert str(caught.value) == (
        "gp_in: kernel: expected 2 lengthscales for input width 2, got 3 (Matern32); "
        "give 2 or a scalar"
    )


def test_a_kernel_for_the_width_builds():
    layer = AmortizedGPLayer(1, 2, 10, kernel=gpflow.kernels.Matern32(lengthscales=[1.0, 2.0]))
    out = layer(tf.zeros([4, 2], tf.float64))
    assert out.shape == (4, 1, 3)  # a one-component packed mixture of width 2 D + 1


def _gp_layer(input_dim: int, lengthscales) -> gpflux.layers.GPLayer:
    kernel = gpflux.helpers.construct_basic_kernel(
        gpflow.kernels.SquaredExponential(lengthscales=lengthscales), output_dim=1
    )
    inducing = gpflux.helpers.construct_basic_inducing_variables(
        3, input_dim, output_dim=1, share_variables=True, z_init=np.zeros((3, input_dim))
    )
    return gpflux.layers.GPLayer(
        kernel, inducing, num_data=10, num_latent_gps=1, mean_function=gpflow.mean_functions.Zero()
    )


@pytest.mark.parametrize(
    "input_dim, lengthscales, message",
    [
        (3, 1.0, r"expected inducing points of width 2, got \{3\}"),
        (2, [1.0, 1.0, 1.0], r"kernel: expected 2 lengthscales for input width 2, got 3"),
    ],
    ids=["inducing-points", "kernel"],
)
def test_a_wrapped_gpflux_layer_for_another_width_fails_at_build(input_dim, lengthscales, message):
    first = AmortizedGPLayer(2, 2, 10, name="first")  # a mixture of D = 2 outputs
    wrapped = SigmaPointGPLayer(_gp_layer(input_dim, lengthscales), name="second")
    mixture = first(tf.zeros([4, 2], tf.float64))
    with pytest.raises(ValueError, match=rf"^second: the wrapped GPLayer: {message}"):
        wrapped(mixture)


def test_an_input_of_unknown_width_is_refused_with_what_to_give():
    layer = AmortizedGPLayer(1, 2, 10, name="gp")
    with pytest.raises(ValueError, match=r"^gp: the input width is unknown \(shape \(None, None\)"):
        layer.build(tf.TensorShape([None, None]))


def test_an_unwrapped_gpflux_layer_added_after_a_gp_layer_is_refused_with_the_wrapper():
    model = AVDGPModel(
        [tf_keras.Input((2,), dtype=tf.float64), AmortizedGPLayer(2, 2, 10, name="gp")]
    )
    gp_layer = _gp_layer(2, 1.0)
    with pytest.raises(ValueError) as caught:
        model.add(gp_layer)
    assert str(caught.value).splitlines() == [
        f"{model.name}: layer {gp_layer.name!r} (GPLayer) follows 'gp', whose output is a packed "
        "mixture; wrap it: gpflux_avdgp.SigmaPointGPLayer(gp_layer)"
    ]


def test_a_plain_sequential_refuses_an_unwrapped_gpflux_layer_at_the_first_call():
    """GPflux's GPLayer is added (the package changes no GPflux class) and refused at the first
    call, by our layer reading Keras' record of its readers."""
    model = tf_keras.Sequential(
        [tf_keras.Input((2,), dtype=tf.float64), AmortizedGPLayer(2, 2, 10, name="gp")]
    )
    gp_layer = _gp_layer(2, 1.0)
    model.add(gp_layer)
    with pytest.raises(ValueError) as caught:
        model(tf.zeros([3, 2], tf.float64))
    assert (
        f"{gp_layer.name}: a GPLayer reads the packed mixture [batch, components, 2 * D + 1] "
        "of 'gp' as features; wrap it: gpflux_avdgp.SigmaPointGPLayer(gp_layer)"
    ) in [line.strip() for line in str(caught.value).splitlines()]


@pytest.mark.parametrize("kind", ["sequential", "functional"])
def test_the_likelihood_after_an_unwrapped_gpflux_layer_names_the_wrapper(kind):
    """Built layer by layer, the likelihood meets the GPflux layer's output before our layer's
    first call on data sees its reader: it names the same fix as AVDGPModel."""
    inputs = tf_keras.Input((2,), dtype=tf.float64)
    layers = [
        AmortizedGPLayer(2, 2, 10, name="gp"),
        _gp_layer(2, 1.0),
        TrainableLikelihood(gpflow.likelihoods.Gaussian(0.1), name="likelihood"),
    ]
    with pytest.raises(ValueError) as caught:
        if kind == "sequential":
            tf_keras.Sequential([inputs, *layers])
        else:
            outputs = inputs
            for layer in layers:
                outputs = layer(outputs)
    assert (
        "likelihood: reads a GPflux layer's output (one Gaussian q(f) per row), not a packed "
        "mixture; a GPflux GPLayer after a GP layer of ours: wrap it: "
        "gpflux_avdgp.SigmaPointGPLayer(gp_layer)"
    ) in [line.strip() for line in str(caught.value).splitlines()]


def test_a_gpflux_layer_on_features_builds_as_before():
    gp_layer = _gp_layer(2, 1.0)
    out = gp_layer(tf.zeros([4, 2], tf.float64))
    assert tf.convert_to_tensor(out).shape == (4, 1) and gp_layer.built


def test_the_mixture_layer_base_is_abstract():
    """A subclass must say how it maps the propagated locations to its outputs."""
    from gpflux_avdgp.layers import MixtureLayer

    with pytest.raises(TypeError, match="abstract method _components"):
        MixtureLayer(1)


def _components_of_0_1(rule: str, num_points, num_predict_points) -> tuple[int, int]:
    """(training, prediction) components of an expanding layer of version 0.1."""
    if rule == "ar1":
        return num_points or 1, num_predict_points or 32
    train = num_points or 32
    return train, (num_predict_points or train) if rule == "ar2" else train


@pytest.mark.parametrize("rule", ["ar1", "ar2", "ar2p"])
@pytest.mark.parametrize("num_points", [None, 3])
@pytest.mark.parametrize("num_predict_points", [None, 5])
def test_a_0_1_layer_config_keeps_its_components(rule, num_points, num_predict_points):
    """Files of 0.1 say num_points for the training components and num_predict_points for
    AR1/AR2's prediction; loaded today they train and predict with the same counts."""
    if rule == "ar2p" and num_predict_points is not None:
        num_predict_points = num_points or 32  # 0.1 required them equal under AR2P
    config = {"units": 1, "rule": rule, "num_points": num_points}
    config["num_predict_points"] = num_predict_points
    layer = AmortizedGPLayer.from_config(
        {**config, "num_inducing": 2, "num_data": 10, "name": f"gp_{rule}"}
    )
    expected = _components_of_0_1(rule, num_points, num_predict_points)
    assert (layer._resolved_num_points(True), layer._resolved_num_points(False)) == expected


def test_a_config_naming_the_removed_anchor_posterior_loads_when_off_and_is_refused_when_on():
    """Layers saved before the anchors' global posterior was removed name it in their config:
    off (every default model of those files) it is dropped; on, the file's layer needs maths
    this version does not have, and loading says so instead of predicting without it."""
    config = {"units": 1, "num_inducing": 2, "num_data": 10, "whiten": True, "num_anchors": 4}
    layer = AmortizedGPLayer.from_config({**config, "anchor_posterior": False})
    assert "anchor_posterior" not in layer.get_config()
    with pytest.raises(ValueError, match="anchor_posterior: .* removed as a rejected design"):
        AmortizedGPLayer.from_config({**config, "anchor_posterior": True})
