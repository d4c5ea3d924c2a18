"""Public constructors and entry points reject bad arguments with a ``ValueError`` naming them.

Shape errors must surface as a clear ``ValueError`` at the boundary (the layer's input spec,
the loss's target check), never as a broadcasting ``InvalidArgumentError`` deep inside.
"""

import gpflow
import gpflux
import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras

import gpflux_avdgp
from gpflux_avdgp import (
    AmortizedGPLayer,
    AVDGPLoss,
    GaussianMixture,
    PropagationRule,
    SigmaPointGPLayer,
    TrainableLikelihood,
    build_avdgp,
)
from gpflux_avdgp.layers.inference import AffineInference, MLPInference


@pytest.fixture
def likelihood():
    return gpflow.likelihoods.Gaussian()


# ----------------------------------------------------------------- AmortizedGPLayer
@pytest.mark.parametrize(
    "args, kwargs, match, error",
    [
        ((0, 4, 10), {}, r"units: expected an integer >= 1, got 0", ValueError),
        ((-2, 4, 10), {}, r"units: .* got -2", ValueError),
        ((1, 0, 10), {}, r"num_inducing: expected an integer >= 1, got 0", ValueError),
        ((1, -1, 10), {}, r"num_inducing: .* got -1", ValueError),
        ((1, 2.5, 10), {}, r"num_inducing: .* got 2.5", TypeError),
        ((1, True, 10), {}, r"num_inducing: .* got True", TypeError),
        ((1, 4, 0), {}, r"num_data: .* got 0", ValueError),
        ((1, 4, 10), {"num_points": 0}, r"num_points: .* got 0", ValueError),
        ((1, 4, 10), {"num_train_samples": 0}, r"num_train_samples: .* got 0", ValueError),
        (
            (1, 4, 10),
            {"rule": "ar3"},
            r"rule: expected one of 'ar1', 'ar2', 'ar2p', got 'ar3'",
            ValueError,
        ),
        ((1, 4, 10), {"rule": 2}, r"rule: .* got 2", TypeError),
        ((1, 4, 10), {"kl_convention": "foo"}, r"kl_convention: .*'paper'.* got 'foo'", ValueError),
        (
            (1, 4),
            {"kl_convention": "paper"},
            r"num_data: required with kl_convention='paper'",
            ValueError,
        ),
        ((1, 4, 10), {"inference": "cnn"}, r"inference: .*'affine', 'mlp', got 'cnn'", ValueError),
        (
            (1, 4, 10),
            {"kernel": "nope"},
            r"kernel: expected a GPflow kernel or one of .*'nope'",
            ValueError,
        ),
        ((1, 4, 10), {"kernel": 3.0}, r"kernel: .* got 3.0", TypeError),
        (
            (1, 4, 10),
            {"mean_function": "quadratic"},
            r"mean_function: .* got 'quadratic'",
            ValueError,
        ),
        (
            (1, 4, 10),
            {"hidden_layers": -1},
            r"hidden_layers: expected an integer >= 0, got -1",
            ValueError,
        ),
        ((1, 4, 10), {"whiten": "yes"}, r"whiten: expected a bool, got 'yes'", TypeError),
        ((1, 4, 10), {"full_rank": 1}, r"full_rank: expected a bool, got 1", TypeError),
        ((1, 4, 10), {"ard": None}, r"ard: expected a bool, got None", TypeError),
        (
            (1, 4, 10),
            {"rule": "ar2p", "num_points": 8, "num_train_samples": 16},
            r"num_train_samples: rule 'ar2p' has no samples \(its sigma points are num_points\)",
            ValueError,
        ),
    ],
)
def test_amortized_layer_rejects_bad_arguments(args, kwargs, match, error):
    """A wrong type raises TypeError, a wrong value ValueError (one line naming the argument)."""
    with pytest.raises(error, match=match) as caught:
        AmortizedGPLayer(*args, **kwargs)
    assert type(caught.value) is error


def test_ar2pp_rule_points_to_the_predictive_objective():
    with pytest.raises(ValueError, match=r"rule: 'ar2pp' .*objective='predictive'"):
        AmortizedGPLayer(1, 4, 10, rule="ar2pp")


def test_valid_choices_are_case_insensitive_and_accept_enums():
    layer = AmortizedGPLayer(
        1, 4, 10, rule=PropagationRule.AR1, kl_convention="PER_POINT", inference="MLP"
    )
    assert layer.rule is PropagationRule.AR1
    assert layer.kl_convention is gpflux_avdgp.layers.KLConvention.PER_POINT
    assert layer.inference_kind is gpflux_avdgp.layers.inference.InferenceKind.MLP
    assert AmortizedGPLayer(1, np.int64(3), np.int32(10)).num_inducing == 3


def test_ar2p_num_points_must_match_the_incoming_sigma_points():
    layer = AmortizedGPLayer(1, 2, 10, num_points=4)
    with pytest.raises(ValueError, match=r"num_points: .* receives 3 sigma points"):
        layer(tf.zeros([2, 3, 5], tf.float64))


# ----------------------------------------------------------------- inference functions
@pytest.mark.parametrize("cls", [AffineInference, MLPInference])
@pytest.mark.parametrize(
    "args, kwargs, match, error",
    [
        ((0, 2), {}, r"num_inducing: expected an integer >= 1, got 0", ValueError),
        ((2, 0), {}, r"output_dim: expected an integer >= 1, got 0", ValueError),
        ((2.0, 2), {}, r"num_inducing: .* got 2.0", TypeError),
        ((2, 2), {"hidden_layers": -1}, r"hidden_layers: .* got -1", ValueError),
        ((2, 2), {"full_rank": "true"}, r"full_rank: expected a bool", TypeError),
    ],
)
def test_inference_functions_reject_bad_arguments(cls, args, kwargs, match, error):
    with pytest.raises(error, match=match) as caught:
        cls(*args, **kwargs)
    assert type(caught.value) is error


# ----------------------------------------------------------------- loss, likelihood, adapter
def test_loss_rejects_bad_arguments(likelihood):
    with pytest.raises(TypeError, match=r"likelihood: expected a GPflow likelihood"):
        AVDGPLoss("gaussian")
    with pytest.raises(TypeError, match=r"likelihood: expected a GPflow likelihood"):
        AVDGPLoss(gpflow.kernels.Matern52())
    with pytest.raises(ValueError, match=r"objective: expected one of 'elbo', 'predictive'"):
        AVDGPLoss(likelihood, objective="mle")


def test_trainable_likelihood_rejects_a_non_likelihood():
    with pytest.raises(TypeError, match=r"likelihood: expected a GPflow likelihood"):
        TrainableLikelihood(gpflow.kernels.Matern52())
    with pytest.raises(TypeError, match=r"likelihood: expected a GPflow likelihood"):
        TrainableLikelihood(None)


def test_sigma_point_layer_rejects_a_non_gplayer():
    with pytest.raises(TypeError, match=r"gp_layer: expected a gpflux.layers.GPLayer"):
        SigmaPointGPLayer(AmortizedGPLayer(1, 2, 10))
    with pytest.raises(TypeError, match=r"gp_layer: expected a gpflux.layers.GPLayer"):
        SigmaPointGPLayer(tf_keras.layers.Dense(2))


def test_sigma_point_layer_validates_the_rule():
    gp_layer = gpflux.helpers.construct_gp_layer(10, 3, 2, 1, z_init=np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"rule: expected one of"):
        SigmaPointGPLayer(gp_layer, rule="sigma")


# ----------------------------------------------------------------- build_avdgp
@pytest.mark.parametrize(
    "args, kwargs, match, error",
    [
        ((0, [2, 1], 3, 10), {}, r"input_dim: expected an integer >= 1, got 0", ValueError),
        ((3, [], 3, 10), {}, r"units: expected at least one layer", ValueError),
        ((3, 2, 3, 10), {}, r"units: expected a list of output dimensions, got 2", ValueError),
        ((3, [2, 0], 3, 10), {}, r"units: expected an integer >= 1, got 0", ValueError),
        ((3, [2, 1], [3, 3, 3], 10), {}, r"num_inducing: expected 2 values .* got 3", ValueError),
        ((3, [2, 1], [3], 10), {}, r"num_inducing: expected 2 values .* got 1", ValueError),
        ((3, [2, 1], 2.5, 10), {}, r"num_inducing: .* got 2.5", TypeError),
        ((3, [2, 1], [3, 0], 10), {}, r"num_inducing: .* got 0", ValueError),
        ((3, [2, 1], 3, 0), {}, r"num_data: .* got 0", ValueError),
        ((3, [2, 1], 3, 10), {"rule": "ar3"}, r"rule: .* got 'ar3'", ValueError),
        ((3, [2, 1], 3, 10), {"num_points": 0}, r"num_points: .* got 0", ValueError),
        ((3, [2, 1], 3, 10), {"whiten": 1}, r"whiten: expected a bool", TypeError),
        ((3, [2, 1], 3, 10), {"seed": "x"}, r"seed: expected an integer >= 0, got 'x'", TypeError),
        ((3, [2, 1], 3, 10), {"seed": -1}, r"seed: expected an integer >= 0, got -1", ValueError),
    ],
)
def test_build_avdgp_rejects_bad_arguments(likelihood, args, kwargs, match, error):
    with pytest.raises(error, match=match) as caught:
        build_avdgp(*args, likelihood, **kwargs)
    assert type(caught.value) is error


def test_build_avdgp_rejects_a_non_likelihood():
    with pytest.raises(TypeError, match=r"likelihood: expected a GPflow likelihood"):
        build_avdgp(3, [1], 2, 10, "gaussian")


def test_build_avdgp_accepts_numpy_sizes(likelihood):
    model = build_avdgp(3, np.array([2, 1]), np.int64(3), 10, likelihood, num_points=2)
    assert [layer.num_inducing for layer in model.layers[:2]] == [3, 3]
    assert [layer.units for layer in model.layers[:2]] == [2, 1]


# ----------------------------------------------------------------- packed mixtures
@pytest.mark.parametrize(
    "shape, match",
    [
        ((4, 5), r"packed mixture: expected rank 3"),
        ((4, 1, 1, 5), r"packed mixture: expected rank 3"),
        ((4, 1, 4), r"last axis must have width 2 \* D \+ 1 \(D >= 1\), got 4"),
        ((4, 1, 1), r"last axis must have width 2 \* D \+ 1 \(D >= 1\), got 1"),
    ],
)
def test_unpack_rejects_bad_shapes(shape, match):
    with pytest.raises(ValueError, match=match):
        GaussianMixture.unpack(tf.zeros(shape, tf.float64))


@pytest.mark.parametrize("shape", [(3,), (2, 1, 1, 3)])
def test_to_mixture_rejects_bad_ranks(shape):
    with pytest.raises(ValueError, match=r"layer input: expected a rank-2 tensor .* or a rank-3"):
        gpflux_avdgp.core.mixture.to_mixture(tf.zeros(shape, tf.float64))


def test_to_mixture_rejects_a_bad_width():
    with pytest.raises(ValueError, match=r"last axis must have width 2 \* D \+ 1"):
        gpflux_avdgp.core.mixture.to_mixture(tf.zeros([2, 3, 6], tf.float64))


def test_unpack_and_to_mixture_accept_numpy():
    packed = np.arange(2 * 3 * 5, dtype=np.float64).reshape(2, 3, 5)
    mixture = GaussianMixture.unpack(packed)
    np.testing.assert_array_equal(mixture.means.numpy(), packed[..., :2])
    np.testing.assert_array_equal(mixture.log_weights.numpy(), packed[..., 4])
    assert gpflux_avdgp.core.mixture.to_mixture(np.zeros((4, 3))).means.shape == (4, 1, 3)


# ----------------------------------------------------------------- propagate
def test_propagate_validates_and_coerces_the_rule():
    mixture = GaussianMixture(
        means=tf.zeros([2, 1, 2], tf.float64),
        variances=tf.ones([2, 1, 2], tf.float64),
        log_weights=tf.zeros([2, 1], tf.float64),
    )
    sigma_points = tf.constant([[1.0, 2.0], [-3.0, 0.5]], tf.float64)
    log_weights = tf.math.log(tf.constant([0.25, 0.75], tf.float64))
    # a string rule means the same as the enum (sigma points, not Monte Carlo draws)
    propagated = gpflux_avdgp.propagation.propagate(
        mixture, "ar2p", num_points=2, sigma_points=sigma_points, log_weights=log_weights
    )
    np.testing.assert_array_equal(
        propagated.locations.numpy(), np.broadcast_to(sigma_points.numpy(), (2, 2, 2))
    )
    with pytest.raises(ValueError, match=r"rule: expected one of .* got 'ar3'"):
        gpflux_avdgp.propagation.propagate(mixture, "ar3", num_points=2)
    with pytest.raises(ValueError, match=r"num_points: .* got 0"):
        gpflux_avdgp.propagation.propagate(mixture, "ar1", num_points=0)
    with pytest.raises(ValueError, match=r"sigma_points: required by rule 'ar2p'"):
        gpflux_avdgp.propagation.propagate(mixture, PropagationRule.AR2P, num_points=2)
    with pytest.raises(ValueError, match=r"log_weights: required by rule 'ar2p'"):
        gpflux_avdgp.propagation.propagate(
            mixture, PropagationRule.AR2P, num_points=2, sigma_points=sigma_points
        )


# ----------------------------------------------------------------- predict_mixture
def test_predict_mixture_needs_a_likelihood():
    model = tf_keras.Sequential(
        [tf_keras.Input((3,), dtype=tf.float64), AmortizedGPLayer(1, 2, 10)]
    )
    with pytest.raises(
        ValueError,
        match=r"likelihood: the model holds no TrainableLikelihood layer; pass likelihood=",
    ):
        gpflux_avdgp.predict_mixture(model, np.zeros((2, 3)))
    # passing it explicitly works
    prediction = gpflux_avdgp.predict_mixture(
        model, np.zeros((2, 3)), likelihood=gpflow.likelihoods.Gaussian()
    )
    assert prediction.f_means.shape == (2, 1, 1)


def test_class_probabilities_need_a_classification_likelihood(likelihood):
    model = build_avdgp(2, [1], 2, 10, likelihood)
    prediction = gpflux_avdgp.predict_mixture(model, np.zeros((2, 2)))
    expected = (
        r"^class_probabilities: needs a Bernoulli, MultiClass or Softmax likelihood, the model "
        r"has Gaussian$"
    )
    with pytest.raises(ValueError, match=expected):
        prediction.class_probabilities()


# ----------------------------------------------------------------- shapes at call time
@pytest.fixture
def model(likelihood):
    """A 2-layer AR2P model built for D = 3 inputs and Q = 1 output."""
    return build_avdgp(3, [2, 1], 2, 10, likelihood, num_points=3, seed=0)


@pytest.mark.parametrize(
    "shape, match",
    [
        ((5, 4), r"expected shape=\(None, 3\), found shape=\(5, 4\)"),
        ((5, 2), r"expected shape=\(None, 3\), found shape=\(5, 2\)"),
        ((3,), r"expected ndim=2, found ndim=1"),
        ((5, 1, 1, 3), r"expected shape=\(None, 3\), found shape=\(5, 1, 1, 3\)"),
    ],
)
def test_model_rejects_inputs_of_the_wrong_shape(model, shape, match):
    assert model(np.zeros((5, 3))).shape == (5, 1)  # the right shape works: the mean of y
    with pytest.raises(ValueError, match=match):
        model(np.zeros(shape))


def test_predict_mixture_rejects_inputs_of_the_wrong_width(model):
    with pytest.raises(
        ValueError, match=r"inputs: expected 3 feature columns \[N, 3\], got shape \(5, 4\)"
    ):
        gpflux_avdgp.predict_mixture(model, np.zeros((5, 4)))


def test_built_layer_rejects_inputs_of_the_wrong_shape():
    layer = AmortizedGPLayer(2, 2, 10)
    layer(tf.zeros([4, 3], tf.float64))
    with pytest.raises(ValueError, match=r"expected axis -1 of input shape to have value 3"):
        layer(tf.zeros([4, 4], tf.float64))
    with pytest.raises(ValueError, match=r"expected ndim=2, found ndim=1"):
        layer(tf.zeros([3], tf.float64))
    with pytest.raises(ValueError, match=r"expected ndim=2, found ndim=3"):
        layer(tf.zeros([4, 1, 7], tf.float64))


@pytest.mark.parametrize("shape", [(3,), (2, 1, 1, 3)])
def test_unbuilt_layer_rejects_bad_ranks(shape):
    with pytest.raises(ValueError, match=r"expected input of rank 2 \[batch, features\] or"):
        AmortizedGPLayer(2, 2, 10)(tf.zeros(shape, tf.float64))


def test_unbuilt_layer_rejects_a_bad_mixture_width():
    with pytest.raises(ValueError, match=r"last axis must have width 2 \* D \+ 1"):
        AmortizedGPLayer(2, 2, 10)(tf.zeros([2, 1, 4], tf.float64))


def test_mixture_layer_rejects_a_different_mixture():
    """An AR2P layer built for 4 sigma points of D = 2 rejects other mixtures up front."""
    layer = AmortizedGPLayer(1, 2, 10)
    layer(tf.zeros([3, 4, 5], tf.float64))
    with pytest.raises(ValueError, match=r"expected axis -1 of input shape to have value 5"):
        layer(tf.zeros([3, 4, 7], tf.float64))
    with pytest.raises(ValueError, match=r"expected axis 1 of input shape to have value 4"):
        layer(tf.zeros([3, 6, 5], tf.float64))


def test_loss_rejects_targets_of_the_wrong_shape(model, likelihood):
    packed = model(np.zeros((5, 3)))
    loss = AVDGPLoss(likelihood)
    assert np.isfinite(loss(np.zeros((5, 1)), packed).numpy())
    assert np.isfinite(loss(np.zeros(5), packed).numpy())  # [B] is read as [B, 1]
    with pytest.raises(ValueError, match=r"y_true: expected targets of shape \[batch, 1\]"):
        loss(np.zeros((5, 2)), packed)
    with pytest.raises(ValueError, match=r"y_true: expected targets of shape \[batch, 1\]"):
        loss(np.zeros((5, 1, 1)), packed)
    with pytest.raises(ValueError, match=r"y_true: expected 5 rows to match y_pred"):
        loss(np.zeros((4, 1)), packed)
    with pytest.raises(ValueError, match=r"packed mixture: expected rank 3"):
        loss(np.zeros((5, 1)), np.zeros((5, 3)))


# ------------------------------------------------------- NaN and inf in fit's and evaluate's data
def test_fit_and_evaluate_refuse_nan_or_inf_naming_the_array():
    """Refused before any step, naming the array (not a GP layer); ``evaluate`` would otherwise
    return ``nan`` silently."""
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(20, 2)), rng.normal(size=(20, 1))
    model = gpflux_avdgp.build_avdgp(2, [1], 2, 20, gpflow.likelihoods.Gaussian(0.1), seed=0)
    model.compile("adam")
    bad_x, bad_y, bad_val = x.copy(), y.copy(), y.copy()
    bad_x[3, 1] = np.nan
    bad_y[5, 0], bad_y[7, 0] = np.inf, -np.inf
    bad_val[0, 0] = np.nan
    cases = [
        ((bad_x, y), r"^x: 1 of 40 values are NaN or inf \(first at \[3, 1\]: nan\)"),
        ((x, bad_y), r"^y: 2 of 20 values are NaN or inf \(first at \[5, 0\]: inf\)"),
    ]
    for data, match in cases:
        with pytest.raises(ValueError, match=match):
            model.fit(*data, epochs=1, verbose=0)
        with pytest.raises(ValueError, match=match):
            model.evaluate(*data, verbose=0)
    with pytest.raises(ValueError, match=r"^validation_data\[1\]: 1 of 20 values are NaN"):
        model.fit(x, y, validation_data=(x, bad_val), epochs=1, verbose=0)
    assert model.optimizer.iterations.numpy() == 0  # nothing ran
    model.fit(x, y, validation_data=(x, y), epochs=1, verbose=0)  # clean data trains
