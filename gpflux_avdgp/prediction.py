"""Predictions of a trained model as a Gaussian mixture, for latent ``f`` and targets ``y``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import gpflow
import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from .checks import check_feature_matrix, check_positive_int
from .core.mixture import GaussianMixture, mixture_moments, unpack_numpy
from .intervals import central_levels, mixture_quantiles
from .layers.likelihood_layer import TrainableLikelihood
from .predictive import component_y_moments, is_classifier, mixture_log_density, output_mixture

__all__ = [
    "PredictiveMixture",
    "log_density_function",
    "mixture_function",
    "model_input_spec",
    "model_likelihood",
    "predict_mixture",
]


@dataclass(frozen=True)
class PredictiveMixture:
    """The predictive mixture at ``N`` test inputs, as NumPy arrays.

    :ivar weights: ``[N, S]`` mixture weights.
    :ivar f_means: ``[N, S, Q]`` component means of the latent ``f``.
    :ivar f_variances: ``[N, S, Q]`` component variances of ``f``.
    :ivar y_means: ``[N, S, Q]`` component means of ``y`` (for Bernoulli: probabilities).
    :ivar y_variances: ``[N, S, Q]`` component variances of ``y``.
    :ivar likelihood: the GPflow likelihood used for ``y``.
    """

    weights: np.ndarray
    f_means: np.ndarray
    f_variances: np.ndarray
    y_means: np.ndarray
    y_variances: np.ndarray
    likelihood: gpflow.likelihoods.Likelihood

    def f_moments(self) -> tuple[np.ndarray, np.ndarray]:
        """Mixture mean and total variance of ``f``, each ``[N, Q]``."""
        return _numpy_moments(self.weights, self.f_means, self.f_variances)

    def y_moments(self) -> tuple[np.ndarray, np.ndarray]:
        """Mixture mean and total variance of ``y``, each ``[N, Q]``."""
        return _numpy_moments(self.weights, self.y_means, self.y_variances)

    def log_density(self, targets: np.ndarray) -> np.ndarray:
        """``log p(y | x) = log sum_s w_s p(y | s)`` per test point, ``[N]``."""
        mixture = GaussianMixture(
            means=tf.constant(self.f_means),
            variances=tf.constant(self.f_variances),
            log_weights=tf.constant(np.log(self.weights)),
        )
        return mixture_log_density(self.likelihood, mixture, tf.constant(targets)).numpy()

    def quantiles(self, probabilities) -> np.ndarray:
        """Exact quantiles of ``y``'s predictive mixture at ``P`` levels, ``[N, P, Q]``
        (bisection on the mixture CDF: :func:`~gpflux_avdgp.intervals.mixture_quantiles`).

        :raises ValueError: unless the likelihood is Gaussian (then the law of ``y`` is the
            mixture ``sum_s w_s N(m_s, v_s + noise)``), or for a level outside ``(0, 1)``.
        """
        if not isinstance(self.likelihood, gpflow.likelihoods.Gaussian):
            raise ValueError(
                "quantiles: the law of y is a Gaussian mixture under a Gaussian likelihood "
                f"only, the model has {type(self.likelihood).__name__}"
            )
        with np.errstate(divide="ignore"):  # a zero weight is log 0 = -inf, exp'd back to 0
            log_weights = np.log(self.weights)
        return mixture_quantiles(
            tf.constant(log_weights),
            tf.constant(self.y_means),
            tf.constant(self.y_variances),
            np.atleast_1d(probabilities),
        ).numpy()

    def central_interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """The central ``level`` interval of ``y``: ``(lower, upper)``, each ``[N, Q]``, the
        ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles (see :meth:`quantiles`)."""
        bounds = self.quantiles(central_levels(level))
        return bounds[:, 0], bounds[:, 1]

    def class_probabilities(self) -> np.ndarray:
        """Class probabilities of a classifier, the mixture of the components' probabilities.

        Bernoulli (probit): ``p(y = 1 | x) = sum_s w_s Phi(m_s / sqrt(1 + v_s))``, ``[N, 1]``,
        with GPflow's probit, which keeps each component's probability in
        ``[1e-3, 1 - 1e-3]``.
        Categorical (GPflow's ``MultiClass`` with ``RobustMax``, or ``Softmax``):
        ``p(y = k | x) = sum_s w_s p(y = k | s)``, ``[N, K]``.
        """
        if not is_classifier(self.likelihood):
            raise ValueError(
                "class_probabilities: needs a Bernoulli, MultiClass or Softmax likelihood, "
                f"the model has {type(self.likelihood).__name__}"
            )
        return self.y_moments()[0]


def _numpy_moments(
    weights: np.ndarray, means: np.ndarray, variances: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~gpflux_avdgp.core.mixture.mixture_moments` of NumPy arrays ``[N, S]``,
    ``[N, S, Q]``, ``[N, S, Q]``: ``mean [N, Q]`` and ``variance [N, Q]``."""
    mean, variance = mixture_moments(
        tf.constant(weights), tf.constant(means), tf.constant(variances)
    )
    return mean.numpy(), variance.numpy()


def model_likelihood(
    model: tf_keras.Model, likelihood: Optional[gpflow.likelihoods.Likelihood] = None
) -> gpflow.likelihoods.Likelihood:
    """``likelihood`` if given, else the one held by the model's
    :class:`~gpflux_avdgp.TrainableLikelihood` (in a nested model too, or beside other heads).

    :raises ValueError: if none is given and the model holds no such layer, or several.
    """
    if likelihood is not None:
        if not isinstance(likelihood, gpflow.likelihoods.Likelihood):
            raise ValueError(f"likelihood: expected a GPflow likelihood, got {likelihood!r}")
        return likelihood
    holders = [m for m in model.submodules if isinstance(m, TrainableLikelihood)]
    if len(holders) != 1:
        held = "no TrainableLikelihood layer" if not holders else f"{len(holders)} of them"
        raise ValueError(
            f"likelihood: the model holds {held}; pass likelihood=<the GPflow likelihood of "
            "the output to read>"
        )
    return holders[0].likelihood


def model_input_spec(model: tf_keras.Model) -> tuple[Optional[int], tf.DType]:
    """``(D, dtype)`` of the model's input: ``D`` is ``None`` when the model has no known
    input shape, and the dtype then defaults to ``gpflow.default_float()``."""
    model_inputs = getattr(model, "inputs", None)
    if not model_inputs:
        return None, tf.as_dtype(gpflow.default_float())
    spec = model_inputs[0]
    width = spec.shape[-1] if spec.shape.rank else None
    return (None if width is None else int(width)), tf.as_dtype(spec.dtype)


def padded_size(num_rows: int, batch_size: int, jit_compile: bool) -> int:
    """Rows to pass to ``model.predict`` so that every batch has the same shape.

    More than ``batch_size`` rows are padded to a multiple of ``batch_size``: the partial last
    batch would otherwise trace the predict function again (about a second) and, under
    ``jit_compile``, compile it again with XLA (tens of seconds). Under ``jit_compile`` fewer
    rows are padded to the next power of two, so that requests of any size compile at most
    ``log2(batch_size) + 1`` programs. Rows of a batch never interact (prediction shares one
    set of draws across rows), so padding does not change the predictions of the real rows.
    """
    if num_rows > batch_size:
        return -(-num_rows // batch_size) * batch_size
    if jit_compile:
        return min(batch_size, 1 << max(num_rows - 1, 0).bit_length())
    return num_rows


def pad_rows(inputs: tf.Tensor, size: int) -> tf.Tensor:
    """``inputs`` ``[N, D]`` followed by copies of its last row up to ``size`` rows."""
    extra = size - int(inputs.shape[0])
    if extra <= 0:
        return inputs
    return tf.concat([inputs, tf.repeat(inputs[-1:], extra, axis=0)], axis=0)


def mixture_function(model: tf_keras.Model):
    """The packed mixture of ``f`` ``[B, S, 2 Q + 1]`` of a batch of inputs, as a
    ``tf.function`` calling ``model`` in prediction mode (compiled with XLA when
    ``model.jit_compile``): read from the predictive distribution the model's output carries,
    or the output itself for a model ending in a GP layer. Made once per model and XLA setting
    and kept on the model (untracked). A model of one known input not compiled with XLA is
    traced once for every batch size (the signature ``[None, D]`` in the input's dtype); XLA's
    programs have static shapes, and other models are traced once per batch shape."""
    jit_compile = bool(getattr(model, "jit_compile", False))
    kept = model.__dict__.get("_avdgp_mixture_function")
    if kept is not None and kept[0] == jit_compile:
        return kept[1]

    index = likelihood_output(model)
    inputs = list(getattr(model, "inputs", None) or [])
    one_input = len(inputs) == 1 and not jit_compile
    signature = (
        [tf.TensorSpec([None, *inputs[0].shape[1:]], inputs[0].dtype)] if one_input else None
    )

    @tf.function(input_signature=signature, jit_compile=jit_compile, autograph=False)
    def packed_mixture(x: tf.Tensor) -> tf.Tensor:  # no control flow on tensors
        return model_mixture(model, x, index).pack()

    object.__setattr__(model, "_avdgp_mixture_function", (jit_compile, packed_mixture))
    return packed_mixture


def log_density_function(model: tf_keras.Model, likelihood: gpflow.likelihoods.Likelihood):
    """``log p(y | x)`` ``[B]`` of batches ``x`` ``[B, D]``, ``y`` ``[B, Q]`` (the model's float
    type) under ``model`` in prediction mode: :func:`mixture_function`'s mixture (the model's
    trace that :func:`predict_mixture` reuses), then its density as one ``tf.function``
    (compiled with XLA when ``model.jit_compile``), for a caller that scores the same rows
    again and again (:class:`~gpflux_avdgp.callbacks.ValidationNLL`), where
    :meth:`PredictiveMixture.log_density` would run the likelihood's ops one by one."""
    mixture = mixture_function(model)

    @tf.function(jit_compile=bool(getattr(model, "jit_compile", False)), autograph=False)
    def density(packed: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        return mixture_log_density(likelihood, GaussianMixture.unpack(packed), y)

    return lambda x, y: density(mixture(x), y)


def model_mixture(model: tf_keras.Model, x, index: Optional[int]) -> GaussianMixture:
    """The mixture of ``f`` of ``model`` at ``x`` in prediction mode, read at its output
    ``index`` (:func:`likelihood_output`) when it has several."""
    outputs = model(x, training=False)
    if index is not None:
        outputs = tf.nest.flatten(outputs)[index]
    return output_mixture(outputs)


def likelihood_output(model: tf_keras.Model) -> Optional[int]:
    """Which of a multi-output model's outputs (flattened) its
    :class:`~gpflux_avdgp.TrainableLikelihood` gives (a GP head beside other heads); ``None``
    for a model of one output.

    :raises ValueError: for several outputs of which not exactly one is that layer's."""
    names = list(getattr(model, "output_names", None) or [])
    if len(names) <= 1:
        return None
    picks = [
        i for i, name in enumerate(names) if isinstance(model.get_layer(name), TrainableLikelihood)
    ]
    if len(picks) != 1:
        raise ValueError(
            f"model: {len(names)} outputs, {len(picks)} of them a TrainableLikelihood's; "
            "predict_mixture reads a model with exactly one"
        )
    return picks[0]


def predict_mixture(
    model: tf_keras.Model,
    inputs,
    *,
    likelihood: Optional[gpflow.likelihoods.Likelihood] = None,
    batch_size: int = 1000,
) -> PredictiveMixture:
    """Predict with ``model`` (prediction mode: deterministic under AR2P).

    :param model: an :class:`~gpflux_avdgp.AVDGPModel`, or any model whose output is a packed
        mixture.
    :param inputs: what ``model.predict`` takes: ``[N, D]`` test inputs (a finite, non-empty
        numeric array or tensor; integers are converted to the model's float type; for a
        multi-input model a list of them, or a dict by the inputs' names), or a
        ``tf.data.Dataset`` of input batches (``(x, y)`` batches are read as ``x``).
    :param likelihood: defaults to that of the model's one
        :class:`~gpflux_avdgp.TrainableLikelihood`; a model with other heads beside it is read
        at the output that layer gives.
    :param batch_size: inputs per forward pass for arrays; they are padded so that every pass
        has the same shape (see :func:`padded_size`), and the padding is dropped from the result.
    :raises ValueError: for inputs of the wrong width, rank or dtype, an empty batch, or NaN/inf
        values (naming the first bad ``[row, column]``).
    """
    likelihood = model_likelihood(model, likelihood)
    function = mixture_function(model)
    if isinstance(inputs, tf.data.Dataset):
        packed = np.concatenate([function(_batch_inputs(b, model)).numpy() for b in inputs])
    else:
        packed = _predict_array(model, function, inputs, batch_size)
    means, variances, log_weights = unpack_numpy(packed)
    y_means, y_variances = component_y_moments(
        likelihood, tf.constant(means), tf.constant(variances)
    )
    return PredictiveMixture(
        weights=np.exp(log_weights),
        f_means=means,
        f_variances=variances,
        y_means=np.asarray(y_means),
        y_variances=np.asarray(y_variances),
        likelihood=likelihood,
    )


def _batch_inputs(batch, model: tf_keras.Model):
    """The inputs of a dataset batch (``x`` of an ``(x, y)`` or ``(x, y, w)`` batch); for a
    model of one input, one tensor in its dtype (as Keras reads ``x``, ``[x]`` or
    ``{name: x}`` and casts it), which :func:`mixture_function`'s signature takes."""
    x = tf_keras.utils.unpack_x_y_sample_weight(batch)[0]
    specs = list(getattr(model, "inputs", None) or [])
    if len(specs) != 1:
        return x
    if isinstance(x, dict) and list(x) == list(model.input_names):
        x = x[model.input_names[0]]
    elif isinstance(x, (list, tuple)) and len(x) == 1:
        x = x[0]
    return tf.cast(x, specs[0].dtype) if tf.is_tensor(x) and x.dtype != specs[0].dtype else x


def _predict_array(model: tf_keras.Model, function, inputs, batch_size: int) -> np.ndarray:
    """The packed mixture ``[N, S, 2 Q + 1]`` of ``inputs`` ``[N, D]`` (or a list of arrays,
    one per input of a multi-input model), in padded batches."""
    arrays = _input_tensors(model, inputs)
    if len(arrays) == 1:
        return in_padded_batches(function, arrays, batch_size, model)
    return in_padded_batches(lambda *parts: function(list(parts)), arrays, batch_size, model)


def in_padded_batches(
    function, tensors: list[tf.Tensor], batch_size: int, model: tf_keras.Model
) -> np.ndarray:
    """``function(*slices)`` over batches of the rows of ``tensors`` (each ``[N, ...]``), padded
    so that every batch has the same shape (:func:`padded_size`, by ``model.jit_compile``), the
    results concatenated and the padding's rows dropped: ``[N, ...]``."""
    batch_size = check_positive_int("batch_size", batch_size)
    num_rows = int(tensors[0].shape[0])
    jit_compile = bool(getattr(model, "jit_compile", False))
    size = padded_size(num_rows, batch_size, jit_compile)
    padded = [pad_rows(tensor, size) for tensor in tensors]
    step = min(batch_size, size)
    batches = [
        function(*[tensor[start : start + step] for tensor in padded])
        for start in range(0, size, step)
    ]
    return np.concatenate([batch.numpy() for batch in batches])[:num_rows]


def _input_tensors(model: tf_keras.Model, inputs) -> list[tf.Tensor]:
    """``inputs`` checked and converted to the model's input dtypes (NumPy floats would reach
    Keras as float32): one ``[N, D]`` tensor, or one per input of a multi-input model."""
    specs = list(getattr(model, "inputs", None) or [])
    if len(specs) > 1 and isinstance(inputs, dict):  # by the Input layers' names
        names = list(model.input_names)
        if set(inputs) != set(names):
            raise ValueError(
                f"inputs: expected the keys {sorted(names)} of the model's inputs, got "
                f"{sorted(inputs)}"
            )
        inputs = [inputs[name] for name in names]
    if len(specs) > 1:
        if not isinstance(inputs, (list, tuple)) or len(inputs) != len(specs):
            raise ValueError(
                f"inputs: the model has {len(specs)} inputs, expected a list of {len(specs)} "
                f"arrays, got {type(inputs).__name__}"
            )
        tensors = [
            tf.convert_to_tensor(check_feature_matrix(f"inputs[{i}]", array, spec.shape[-1]),
                                 dtype=spec.dtype)
            for i, (array, spec) in enumerate(zip(inputs, specs))
        ]  # fmt: skip
        rows = {int(tensor.shape[0]) for tensor in tensors}
        if len(rows) > 1:
            raise ValueError(f"inputs: expected the same rows in every array, got {sorted(rows)}")
        return tensors
    num_features, dtype = model_input_spec(model)
    return [tf.convert_to_tensor(check_feature_matrix("inputs", inputs, num_features), dtype)]
