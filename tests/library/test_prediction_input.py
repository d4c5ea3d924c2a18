"""``predict_mixture`` rejects bad inputs with a ``ValueError`` naming the argument, the expected
and the actual value, before anything reaches Keras or TensorFlow."""

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflux_avdgp
from gpflux_avdgp.checks import check_feature_matrix
from gpflux_avdgp.prediction import mixture_function
from gpflux_avdgp.predictive import output_mixture

INPUT_DIM = 3


@pytest.fixture(scope="module")
def model():
    """An untrained 2-layer AR2P model with 3 inputs (prediction needs no training)."""
    likelihood = gpflow.likelihoods.Gaussian(0.1)
    return gpflux_avdgp.build_avdgp(INPUT_DIM, [2, 1], [3, 3], 20, likelihood, num_points=3, seed=0)


def test_valid_inputs_predict(model, rng):
    x = rng.normal(size=(5, INPUT_DIM))
    prediction = gpflux_avdgp.predict_mixture(model, x)
    assert prediction.f_means.shape == (5, 3, 1)
    # integers, lists and tensors are numeric arrays too, converted to the model's dtype
    as_ints = gpflux_avdgp.predict_mixture(model, np.arange(6).reshape(2, 3))
    as_list = gpflux_avdgp.predict_mixture(model, [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    np.testing.assert_array_equal(as_ints.f_means, as_list.f_means)
    as_tensor = gpflux_avdgp.predict_mixture(model, tf.constant(x))
    np.testing.assert_array_equal(as_tensor.f_means, prediction.f_means)


@pytest.mark.parametrize(
    "inputs, message",
    [
        pytest.param(
            np.zeros((4, 5)),
            r"inputs: expected 3 feature columns \[N, 3\], got shape \(4, 5\)",
            id="width",
        ),
        pytest.param(
            np.zeros(3),
            r"inputs: expected a 2-d array \[N, 3\], got rank 1 with shape \(3,\) "
            r"\(reshape a vector",
            id="rank-1",
        ),
        pytest.param(
            np.zeros((2, 4, 3)),
            r"inputs: expected a 2-d array \[N, 3\], got rank 3 with shape \(2, 4, 3\)",
            id="rank-3",
        ),
        pytest.param(
            np.zeros((0, 3)),
            r"inputs: empty batch, expected at least one row, got shape \(0, 3\)",
            id="empty",
        ),
        pytest.param(
            np.array([["a", "b", "c"]]),
            r"inputs: expected a numeric \(integer or floating\) array \[N, 3\], got dtype <U1",
            id="strings",
        ),
        pytest.param(
            np.array([[1.0, None, 2.0]], dtype=object),
            r"inputs: expected a numeric .* got dtype object",
            id="objects",
        ),
        pytest.param(
            [[1.0, 2.0, 3.0], [1.0, 2.0]],
            r"inputs: expected a numeric array \[N, D\], got list",
            id="ragged-list",
        ),
        pytest.param(
            np.ones((2, 3), dtype=bool),
            r"inputs: expected a numeric .* got dtype bool",
            id="booleans",
        ),
    ],
)
def test_bad_inputs_raise_one_line_errors(model, inputs, message):
    """Inputs that are no numeric array raise TypeError ("expected a numeric ..."); numeric
    arrays of the wrong shape or size raise ValueError."""
    error = TypeError if "expected a numeric" in message else ValueError
    with pytest.raises(error, match=message) as caught:
        gpflux_avdgp.predict_mixture(model, inputs)
    assert type(caught.value) is error


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_inputs_name_the_first_bad_cell(model, bad):
    x = np.zeros((6, INPUT_DIM))
    x[4, 2] = bad
    x[5, 0] = bad
    expected = (
        rf"inputs: 2 values are NaN or inf \(first at row 4, column 2: inputs\[4, 2\] = {bad!r}"
    )
    with pytest.raises(ValueError, match=expected.replace("-", r"\-")):
        gpflux_avdgp.predict_mixture(model, x)


def test_single_non_finite_value_and_float32(model):
    x = np.zeros((3, INPUT_DIM), dtype=np.float32)
    x[0, 1] = np.nan
    with pytest.raises(ValueError, match=r"1 value is NaN or inf \(first at row 0, column 1"):
        gpflux_avdgp.predict_mixture(model, x)


def test_batch_size_is_checked(model):
    with pytest.raises(ValueError, match="batch_size: expected an integer >= 1, got 0"):
        gpflux_avdgp.predict_mixture(model, np.zeros((2, INPUT_DIM)), batch_size=0)


def test_check_feature_matrix_without_known_width():
    """With ``num_features=None`` any width passes; the message shows ``D``."""
    assert check_feature_matrix("x", np.ones((2, 7))).shape == (2, 7)
    with pytest.raises(ValueError, match=r"x: expected a 2-d array \[N, D\], got rank 0"):
        check_feature_matrix("x", 1.0)


def test_one_trace_of_the_model_serves_every_batch_size_and_the_validation_score(rng):
    """``predict_mixture`` and ``ValidationNLL`` call one traced mixture, whatever the number of
    rows and their dtype (a float32 dataset is cast as Keras would), with the numbers of the
    eager model."""
    likelihood = gpflow.likelihoods.Gaussian(0.1)
    model = gpflux_avdgp.build_avdgp(INPUT_DIM, [2, 1], [3, 3], 20, likelihood, num_points=3)
    x, y = rng.normal(size=(9, INPUT_DIM)), rng.normal(size=(9, 1))
    five = gpflux_avdgp.predict_mixture(model, x[:5])
    seven = gpflux_avdgp.predict_mixture(model, tf.data.Dataset.from_tensor_slices(x).batch(7))
    validation = gpflux_avdgp.ValidationNLL(x[:4], y[:4])
    validation.set_model(model)
    nll = validation.score()
    assert mixture_function(model).experimental_get_tracing_count() == 1
    eager = output_mixture(model(x, training=False))
    np.testing.assert_allclose(five.f_means, eager.means.numpy()[:5], rtol=1e-12)
    np.testing.assert_allclose(seven.f_variances, eager.variances.numpy(), rtol=1e-12)
    log_density = gpflux_avdgp.predict_mixture(model, x[:4]).log_density(y[:4])
    assert nll == pytest.approx(-np.mean(log_density), rel=1e-12)


def test_float32_dataset_batches_predict_as_arrays_do(model, rng):
    x = rng.normal(size=(6, INPUT_DIM))
    batches = tf.data.Dataset.from_tensor_slices(x.astype(np.float32)).batch(4)
    expected = gpflux_avdgp.predict_mixture(model, x.astype(np.float32))
    np.testing.assert_array_equal(
        gpflux_avdgp.predict_mixture(model, batches).f_means, expected.f_means
    )


def test_dataset_batches_of_the_one_input_by_name_or_in_a_list_predict_as_arrays_do(model, rng):
    """Keras reads a one-input model's ``x`` as ``{name: x}`` or ``[x]`` too."""
    x = rng.normal(size=(6, INPUT_DIM))
    expected = gpflux_avdgp.predict_mixture(model, x).f_means
    by_name = tf.data.Dataset.from_tensor_slices({model.input_names[0]: x}).batch(4)
    in_a_list = tf.data.Dataset.from_tensor_slices(x).batch(4).map(lambda rows: ((rows,),))
    for batches in (by_name, in_a_list):
        got = gpflux_avdgp.predict_mixture(model, batches).f_means
        np.testing.assert_allclose(got, expected, rtol=1e-12)
