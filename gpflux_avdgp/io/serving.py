"""Export a trained model as a TensorFlow SavedModel that serves without this package.

:func:`export` writes a SavedModel whose signatures need nothing but TensorFlow to run: load
it with ``tf.saved_model.load(path)`` (or serve it with TF Serving) in a process that has
never imported ``gpflux_avdgp``, GPflow or GPflux. The model runs in prediction mode
(``training=False``), so every call with the same inputs returns the same numbers.

Signatures (``x`` is ``[N, D]`` in the model's float type, any ``N >= 1``):

===============  =================  =====================================================
signature        inputs             outputs
===============  =================  =====================================================
``predict_f``    ``x``              ``mean``, ``variance``, ``std`` ``[N, Q]`` (mixture
                                    mean, total variance and its square root, of the
                                    latent ``f``), ``component_means`` ``[N, S, Q]``,
                                    ``component_variances`` ``[N, S, Q]``, ``weights``
                                    ``[N, S]``
``predict_y``    ``x``              the same for the targets ``y``, and for a Gaussian
                                    likelihood ``lower_95``, ``upper_95`` ``[N, Q]``: the exact
                                    central 95 % interval of the mixture (what
                                    ``model.predict`` returns); for a classifier ``mean``
                                    and ``probabilities`` are the class probabilities:
                                    ``p(y = 1 | x)`` ``[N, 1]`` (Bernoulli), ``p(y = k | x)``
                                    ``[N, K]`` (``MultiClass``, ``Softmax``)
``log_density``  ``x``, ``y``       ``log_density`` ``[N]``: ``log p(y | x)`` under the
                 (``[N, Q]``; class mixture
                 indices ``[N, 1]``
                 for ``K`` classes)
===============  =================  =====================================================

With a standardiser the exported graph takes raw features and answers in the targets'
original units (means ``* y_std + y_mean``, variances ``* y_std ** 2``, log densities
``- sum_q log y_std``). The exported object also has a ``metadata()`` function returning a
JSON string (input dimension, dtype, ``S``, ``Q``, likelihood, standardisation, feature names,
package version), also written to ``assets.extra/gpflux_avdgp_export.json``. Given
``feature_names``, the export also serves by column name (``predict_f_by_name``,
``predict_y_by_name``: :mod:`~gpflux_avdgp.io.named_inputs`).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Optional, Sequence, Union

import gpflow
import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from .._version import __version__
from ..core.mixture import GaussianMixture, mixture_moments
from ..intervals import interval_outputs
from ..prediction import likelihood_output, model_input_spec, model_likelihood, model_mixture
from ..predictive import (
    component_y_moments,
    is_categorical,
    is_classifier,
    mixture_log_density,
)
from .export_scaling import ArrayLike, Scaling, scaling_of
from .named_inputs import NAMED_SIGNATURES, check_feature_names, named_signatures

__all__ = ["export", "signature_names", "EXPORT_FORMAT", "METADATA_FILE", "SIGNATURES"]

#: ``format`` field of the metadata.
EXPORT_FORMAT = "gpflux_avdgp.export/1"
#: The metadata file, relative to the SavedModel folder.
METADATA_FILE = os.path.join("assets.extra", "gpflux_avdgp_export.json")
#: Names of the serving signatures.
SIGNATURES = ("predict_f", "predict_y", "log_density")


def _checked_batch(name: str, tensor: tf.Tensor, width: int) -> tf.Tensor:
    """``tensor`` ``[N, width]`` after runtime checks of its shape, ``N >= 1`` and finiteness.

    A loaded SavedModel's ``signatures[...]`` functions check the dtype of their inputs but not
    the shape, so the shape is checked in the graph (``EnsureShape``: "Shape of tensor x [2,4]
    is not compatible with expected shape [?,3]").
    """
    tensor = tf.ensure_shape(tensor, [None, width])
    tf.debugging.assert_positive(
        tf.shape(tensor)[0], message=f"{name}: empty batch, expected at least one row"
    )
    return tf.debugging.check_numerics(tensor, message=f"{name}: contains NaN or inf")


def _moments(weights: tf.Tensor, means: tf.Tensor, variances: tf.Tensor) -> dict:
    """Mixture mean, total variance and std ``[N, Q]`` and the components, as a signature
    output."""
    mean, variance = mixture_moments(weights, means, variances)  # [N, Q] each
    return {
        "mean": mean,
        "variance": variance,
        "std": tf.sqrt(variance),
        "component_means": means,
        "component_variances": variances,
        "weights": weights,
    }


class _ServingModule(tf.Module):
    """The exported object: three signatures and ``metadata``, closing over the model.

    The Keras model is deliberately not an attribute (saving would then try to serialise every
    layer's ``call``); its variables are, so the functions' captured variables are saved.
    """

    def __init__(
        self,
        model: tf_keras.Model,
        likelihood: gpflow.likelihoods.Likelihood,
        scaling: Scaling,
        dtype: tf.DType,
        input_dim: int,
        output_dim: int,
        metadata_json: str,
    ):
        # Longer than 60 lines on purpose: the three signatures close over the same scaling
        # constants and helpers, and read best side by side.
        super().__init__(name="gpflux_avdgp_export")
        variables, seen = [], set()
        for variable in [*model.variables, *likelihood.variables]:
            if id(variable) not in seen:
                seen.add(id(variable))
                variables.append(variable)
        self.model_variables = variables

        x_mean, x_std = tf.constant(scaling.x_mean, dtype), tf.constant(scaling.x_std, dtype)
        y_mean, y_std = tf.constant(scaling.y_mean, dtype), tf.constant(scaling.y_std, dtype)
        log_y_scale = tf.constant(np.sum(np.log(scaling.y_std)), dtype)
        x_spec = tf.TensorSpec([None, input_dim], dtype, name="x")
        index = likelihood_output(model)  # the GP head's output, beside other heads
        target_width = 1 if is_categorical(likelihood) else output_dim  # a class index per row
        y_spec = tf.TensorSpec([None, target_width], dtype, name="y")

        @tf.function(input_signature=[x_spec], autograph=False)
        def packed_mixture(x: tf.Tensor) -> tf.Tensor:
            """``[N, S, 2 Q + 1]``: the model traced once, called by every signature."""
            x = _checked_batch("x", x, input_dim)  # [N, D]
            if scaling.inputs:
                x = (x - x_mean) / x_std
            return model_mixture(model, x, index).pack()

        traced_mixture = packed_mixture.get_concrete_function()  # called, never traced again

        def mixture(x: tf.Tensor) -> GaussianMixture:
            return GaussianMixture.unpack(traced_mixture(x))  # [N, S, .]

        def to_original_units(moments: tuple[tf.Tensor, tf.Tensor]) -> tuple:
            means, variances = moments  # [N, S, Q]
            if not scaling.targets:
                return means, variances
            return means * y_std + y_mean, variances * y_std**2

        @tf.function(input_signature=[x_spec], autograph=False)
        def predict_f(x: tf.Tensor) -> dict:
            f = mixture(x)
            return _moments(f.weights, *to_original_units((f.means, f.variances)))

        @tf.function(input_signature=[x_spec], autograph=False)
        def predict_y(x: tf.Tensor) -> dict:
            f = mixture(x)
            y_moments = to_original_units(component_y_moments(likelihood, f.means, f.variances))
            outputs = _moments(f.weights, *y_moments)
            if is_classifier(likelihood):  # as model.predict names them
                return {**outputs, "probabilities": outputs["mean"]}
            return {**outputs, **interval_outputs(likelihood, f.log_weights, *y_moments)}

        @tf.function(input_signature=[x_spec, y_spec], autograph=False)
        def log_density(x: tf.Tensor, y: tf.Tensor) -> dict:
            y = _checked_batch("y", y, target_width)  # [N, Q], or [N, 1] class indices
            tf.debugging.assert_equal(
                tf.shape(y)[0], tf.shape(x)[0], message="y: expected one row per row of x"
            )
            f = mixture(x)
            if scaling.targets:
                y = (y - y_mean) / y_std
            value = mixture_log_density(likelihood, f, y)  # [N]
            if scaling.targets:
                value = value - log_y_scale
            return {"log_density": value}

        @tf.function(input_signature=[])
        def metadata() -> tf.Tensor:
            return tf.constant(metadata_json)

        self.predict_f = predict_f
        self.predict_y = predict_y
        self.log_density = log_density
        self.metadata = metadata
        # Tracing captures more than ``model.variables``: e.g. the layers' metric counters
        # (``add_metric`` in ``call``). Track whatever the traced graphs capture.
        for function in (predict_f, predict_y, log_density):
            for variable in function.get_concrete_function().variables:
                if id(variable) not in seen:
                    seen.add(id(variable))
                    variables.append(variable)
        self.model_variables = variables


def signature_names(*, by_name: bool) -> list[str]:
    """The signatures of an export: :data:`SIGNATURES`, and with feature names the by-name
    ones (:data:`~gpflux_avdgp.io.named_inputs.NAMED_SIGNATURES`)."""
    return list(SIGNATURES) + (list(NAMED_SIGNATURES) if by_name else [])


def export(
    model: tf_keras.Model,
    path: Union[str, "os.PathLike[str]"],
    *,
    likelihood: Optional[gpflow.likelihoods.Likelihood] = None,
    standardizer: object = None,
    x_mean: Optional[ArrayLike] = None,
    x_std: Optional[ArrayLike] = None,
    y_mean: Optional[ArrayLike] = None,
    y_std: Optional[ArrayLike] = None,
    metadata: Optional[dict] = None,
    feature_names: Optional[Sequence[str]] = None,
) -> Path:
    """Write ``model`` as a TensorFlow SavedModel with the signatures ``predict_f``,
    ``predict_y`` and ``log_density`` (see the module docstring), loadable with plain
    TensorFlow.

    :param model: a trained model whose output is a packed mixture ``[B, S, 2 Q + 1]`` and
        whose input shape ``[B, D]`` is known (built with ``tf_keras.Input``).
    :param path: folder to write (created; a previous export there is overwritten).
    :param likelihood: defaults to the one held by the model's
        :class:`~gpflux_avdgp.TrainableLikelihood`.
    :param standardizer: an object or ``dict`` with ``x_mean`` ``[D]``, ``x_std`` ``[D]``,
        ``y_mean`` and ``y_std`` (scalars or ``[Q]``), such as
        :class:`~avdgp.data.Standardizer`: the export then takes raw
        features and returns moments and log densities in the targets' original units.
    :param x_mean: instead of ``standardizer``: input means ``[D]`` (with ``x_std``).
    :param x_std: input standard deviations ``[D]``, positive.
    :param y_mean: target mean, scalar or ``[Q]`` (with ``y_std``); Gaussian likelihood only.
    :param y_std: target standard deviation, scalar or ``[Q]``, positive.
    :param metadata: extra JSON-able entries for the metadata; they may not replace the
        entries the export writes.
    :param feature_names: the ``D`` inputs' names, in the model's order: adds the signatures
        ``predict_f_by_name`` and ``predict_y_by_name``, which take one ``[N]`` tensor per
        feature by name (:mod:`~gpflux_avdgp.io.named_inputs`).
    :returns: ``path`` as a :class:`~pathlib.Path`.
    :raises ValueError: for a model without a known input shape or likelihood, bad
        standardisation statistics, target scaling with a non-Gaussian likelihood, or a
        ``path`` that is a file.
    """
    if not isinstance(model, tf_keras.Model):
        raise ValueError(f"model: expected a tf_keras.Model, got {type(model).__name__}")
    likelihood = model_likelihood(model, likelihood)
    if len(getattr(model, "inputs", None) or []) > 1:
        raise ValueError(
            f"model: {model.name!r} has {len(model.inputs)} inputs, the export serves one "
            "[N, D] input; concatenate the features into one input, or serve predict_mixture"
        )
    input_dim, dtype = model_input_spec(model)
    if input_dim is None:
        raise ValueError(
            "model: its input shape is unknown; build it with tf_keras.Input((D,), dtype=...)"
        )
    feature_names = check_feature_names(feature_names, input_dim)
    target = Path(os.fspath(path))
    if target.is_symlink():
        raise ValueError(f"path: {target} is a symbolic link; name the folder itself")
    if target.exists() and not target.is_dir():
        raise ValueError(f"path: {target} is a file, expected a folder for the SavedModel")

    # One eager call creates every lazily built weight and metric before tracing.
    mixture = model_mixture(model, tf.zeros([2, input_dim], dtype), likelihood_output(model))
    num_components, output_dim = int(mixture.log_weights.shape[1]), mixture.dim

    scaling = scaling_of(standardizer, x_mean, x_std, y_mean, y_std, input_dim, output_dim)
    if scaling.targets and not isinstance(likelihood, gpflow.likelihoods.Gaussian):
        raise ValueError(
            "y_mean, y_std: target standardisation needs a Gaussian likelihood, the model has "
            f"{type(likelihood).__name__} (use y_mean=0, y_std=1 or leave them out)"
        )
    described = {
        "format": EXPORT_FORMAT,
        "gpflux_avdgp_version": __version__,
        "tensorflow_version": tf.__version__,
        "model_name": model.name,
        "input_dim": input_dim,
        "output_dim": output_dim,
        "num_components": num_components,
        "dtype": dtype.name,
        "likelihood": type(likelihood).__name__,
        "signatures": signature_names(by_name=bool(feature_names)),
        "feature_names": feature_names,
        "standardized_inputs": scaling.inputs,
        "standardized_targets": scaling.targets,
        "x_mean": scaling.x_mean.tolist() if scaling.inputs else None,
        "x_std": scaling.x_std.tolist() if scaling.inputs else None,
        "y_mean": scaling.y_mean.tolist() if scaling.targets else None,
        "y_std": scaling.y_std.tolist() if scaling.targets else None,
    }
    extra = dict(metadata or {})
    clashes = sorted(set(extra) & set(described))
    if clashes:
        raise ValueError(f"metadata: {', '.join(clashes)}: set by export, cannot be replaced")
    try:
        metadata_json = json.dumps({**described, **extra}, indent=2)
    except (TypeError, ValueError) as error:
        raise ValueError(f"metadata: expected JSON-able values ({error})") from None
    module = _ServingModule(model, likelihood, scaling, dtype, input_dim, output_dim, metadata_json)
    signatures = {name: getattr(module, name) for name in SIGNATURES}
    if feature_names:
        signatures.update(named_signatures(signatures, feature_names, dtype))
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    try:  # written beside the target and swapped in: a failure never leaves half an export
        tf.saved_model.save(module, str(partial), signatures=signatures)
        (partial / METADATA_FILE).parent.mkdir(exist_ok=True)
        (partial / METADATA_FILE).write_text(metadata_json)
        _swap_in(partial, target)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target


def _swap_in(partial: Path, target: Path) -> None:
    """Rename the finished folder ``partial`` to ``target``, replacing a previous export."""
    if not target.exists():
        partial.rename(target)
        return
    previous = target.with_name(f".{target.name}.previous-{os.getpid()}")
    target.rename(previous)
    partial.rename(target)
    shutil.rmtree(previous, ignore_errors=True)
