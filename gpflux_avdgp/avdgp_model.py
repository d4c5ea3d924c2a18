"""An amortized deep GP as a Keras model whose ``fit``, ``evaluate`` and ``predict`` speak
about ``y``.

The layers pass packed mixtures of ``f`` (``[B, S, 2 Q + 1]``) to each other and to the loss;
Keras hands the same tensor to the compiled metrics and returns it from ``predict``.
:class:`AVDGPModel` is a ``tf_keras.Sequential`` that overrides Keras' documented hooks
(``compile``, ``compute_metrics``, ``predict_step``) so that:

* standard Keras metrics see the predictive mean of ``y`` (regression) or the class
  probabilities (classification), and metrics that cannot mean anything for the model's
  likelihood are refused by ``compile``; the package's :mod:`~gpflux_avdgp.keras_metrics`
  read the whole mixture;
* ``predict`` returns ``{"mean": [N, Q], "std": [N, Q]}`` of ``y`` (classifiers:
  ``{"probabilities": [N, K]}``); :func:`~gpflux_avdgp.predict_mixture` gives the mixture;
* the loss defaults to :class:`~gpflux_avdgp.AVDGPLoss` on the model's likelihood, a loss on
  another likelihood is refused, and History logs the layers' KL term as ``kl``.

``docs/design.md`` ("The model's output") records the alternatives measured.
"""

from __future__ import annotations

import os
from typing import Optional

import gpflow
import gpflux
import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from .core.mixture import GaussianMixture, mixture_moments
from .keras_metrics import MixtureMetric, predictive_y
from .layers import MixtureLayer, TrainableLikelihood
from .layers.anchor_placement import place_anchors
from .layers.base import mixture_reader_fix
from .objectives import AVDGPLoss, component_y_moments, is_categorical, is_classifier
from .validation import check_finite_data

__all__ = ["AVDGPModel", "predictive_outputs"]

_CLASS_METRICS = {
    "accuracy", "acc", "binaryaccuracy", "categoricalaccuracy", "sparsecategoricalaccuracy",
    "topkcategoricalaccuracy", "sparsetopkcategoricalaccuracy", "crossentropy", "ce",
    "binarycrossentropy", "categoricalcrossentropy", "sparsecategoricalcrossentropy", "auc",
    "precision", "recall", "precisionatrecall", "recallatprecision", "sensitivityatspecificity",
    "specificityatsensitivity", "truepositives", "truenegatives", "falsepositives",
    "falsenegatives", "hinge", "squaredhinge", "categoricalhinge", "binaryiou", "iou", "meaniou",
    "onehotiou", "onehotmeaniou", "f1score", "fbetascore",
}  # fmt: skip
#: Standard metrics that read one class index per row and ``K`` probabilities.
_INDEX_METRICS = {
    "accuracy", "acc", "sparsecategoricalaccuracy", "sparsetopkcategoricalaccuracy",
    "crossentropy", "ce", "sparsecategoricalcrossentropy",
}  # fmt: skip
#: Standard metrics that read ``K`` class probabilities (one-hot labels or class indices).
_K_CLASS_METRICS = {
    "categoricalaccuracy", "topkcategoricalaccuracy", "categoricalcrossentropy",
    "categoricalhinge", "sparsecategoricalaccuracy", "sparsetopkcategoricalaccuracy",
    "sparsecategoricalcrossentropy", "onehotiou", "onehotmeaniou",
}  # fmt: skip
_OURS = {
    "regression": "'mse', 'mae', RootMeanSquaredError() or gpflux_avdgp.MixtureNLL(), "
    "MixtureRMSE(), MixtureCRPS()",
    "binary": "'accuracy', AUC(), 'mse' (the Brier score) or gpflux_avdgp.MixtureAccuracy(), "
    "MixtureBrier(), MixtureNLL()",
    "categorical": "'accuracy', 'sparse_categorical_crossentropy' or "
    "gpflux_avdgp.MixtureAccuracy(), MixtureBrier(), MixtureNLL()",
}


def _metric_key(metric) -> str:
    """``"binaryaccuracy"`` for ``"binary_accuracy"``, ``BinaryAccuracy()`` or the function."""
    if isinstance(metric, str):
        name = metric
    elif isinstance(metric, tf_keras.metrics.Metric):
        name = type(metric).__name__
        if name == "MeanMetricWrapper":
            name = getattr(getattr(metric, "_fn", None), "__name__", metric.name)
    else:
        name = getattr(metric, "__name__", type(metric).__name__)
    return name.replace("_", "").lower()


def _metric_label(metric) -> str:
    return repr(metric) if isinstance(metric, str) else f"{type(metric).__name__}()"


def _task(likelihood: gpflow.likelihoods.Likelihood) -> str:
    if is_categorical(likelihood):
        return "categorical"
    return "binary" if is_classifier(likelihood) else "regression"


def check_standard_metric(metric, likelihood: gpflow.likelihoods.Likelihood) -> None:
    """Refuse a standard Keras metric that cannot mean anything for ``likelihood``.

    Regression models are scored on the predictive mean, so class metrics are refused;
    Bernoulli models give ``p(y = 1)`` ``[B, 1]``, so metrics of one-hot or ``K``-class
    probabilities are refused; categorical models give ``[B, K]`` probabilities for one class
    index per row, so only index metrics (accuracy, sparse cross-entropy) are kept.

    :raises ValueError: one line naming the metric and the ones to use.
    """
    key, task = _metric_key(metric), _task(likelihood)
    kind = type(likelihood).__name__
    if task == "regression" and key in _CLASS_METRICS:
        reason = f"scores class labels, the model's likelihood is {kind} (regression)"
    elif task == "binary" and key in _K_CLASS_METRICS:
        reason = "reads K class probabilities, a Bernoulli model predicts p(y = 1) [batch, 1]"
    elif task == "categorical" and key not in _INDEX_METRICS:
        reason = (
            f"compares y with the prediction column by column, a {kind} model predicts K class "
            "probabilities for one class index per row"
        )
    else:
        return
    raise ValueError(f"metrics: {_metric_label(metric)} {reason}; use {_OURS[task]}")


def predictive_outputs(
    likelihood: gpflow.likelihoods.Likelihood, packed: tf.Tensor
) -> dict[str, tf.Tensor]:
    """What ``predict`` returns for a packed mixture ``[B, S, 2 Q + 1]``: ``{"mean": [B, Q],
    "std": [B, Q]}`` of ``y`` (the noise included) and, for a Gaussian likelihood, the exact
    central 95 % interval of the predictive mixture, ``"lower_95"`` and ``"upper_95"``
    ``[B, Q]`` (:mod:`~gpflux_avdgp.intervals`); ``{"probabilities": [B, K]}`` for a
    classifier (``K = 1`` for Bernoulli: ``p(y = 1 | x)``)."""
    mixture = GaussianMixture.unpack(packed)
    y_means, y_variances = component_y_moments(likelihood, mixture.means, mixture.variances)
    mean, variance = mixture_moments(mixture.weights, y_means, y_variances)
    if is_classifier(likelihood):
        return {"probabilities": mean}
    from .intervals import interval_outputs  # loaded on first use

    intervals = interval_outputs(likelihood, mixture.log_weights, y_means, y_variances)
    return {"mean": mean, "std": tf.sqrt(variance), **intervals}


def _standard_view(likelihood: gpflow.likelihoods.Likelihood, packed: tf.Tensor) -> tf.Tensor:
    """What standard metrics score: the predictive mean of ``y`` or the class probabilities."""
    return predictive_y(likelihood, GaussianMixture.unpack(packed))[0]


class _Extras:
    """State that Keras must not track as layers: the package's metrics and the KL tracker."""

    def __init__(self) -> None:
        self.metrics: list[MixtureMetric] = []
        self.weighted_metrics: list[MixtureMetric] = []
        self.has_standard_metrics = False  # whether compute_metrics needs the mean of y
        self.kl: Optional[tf_keras.metrics.Mean] = None


@tf_keras.utils.register_keras_serializable(package="gpflux_avdgp")
class AVDGPModel(tf_keras.Sequential):
    """A ``tf_keras.Sequential`` of GP layers ending in a
    :class:`~gpflux_avdgp.TrainableLikelihood`, with Keras' habits on the predictive
    distribution of ``y``.

    * ``compile(optimizer, metrics=[...])``: the loss defaults to
      ``AVDGPLoss(model.likelihood)`` (pass ``AVDGPLoss(model.likelihood,
      objective="predictive")`` for AR2PP); standard metrics score the predictive mean of ``y``
      or the class probabilities; :mod:`~gpflux_avdgp.keras_metrics` metrics get the model's
      likelihood.
    * ``fit``: History has ``loss``, ``kl`` (the GP layers' KL terms, as they enter the loss)
      and the metrics; ``evaluate`` returns the scalar loss when no metric is compiled.
    * ``predict(x)``: ``{"mean", "std"}`` of ``y`` ``[N, Q]`` each, or ``{"probabilities"}``
      ``[N, K]``; NumPy float inputs are passed in the model's float type.

    :param layers: as for ``tf_keras.Sequential``.
    :param name: the model's name.
    """

    def __init__(self, layers=None, name: Optional[str] = None):
        super().__init__(layers=layers, name=name)
        object.__setattr__(self, "_extras", _Extras())  # not tracked by Keras

    # ------------------------------------------------------------------ structure
    @property
    def likelihood(self) -> gpflow.likelihoods.Likelihood:
        """The likelihood held by the last layer, a :class:`~gpflux_avdgp.TrainableLikelihood`.

        :raises ValueError: if the last layer is something else.
        """
        last = self.layers[-1] if self.layers else None
        if not isinstance(last, TrainableLikelihood):
            found = "no layer" if last is None else f"{type(last).__name__} {last.name!r}"
            raise ValueError(
                f"{self.name}: the last layer is {found}, not a TrainableLikelihood; end the "
                "model with gpflux_avdgp.TrainableLikelihood(likelihood) so that the "
                "likelihood's parameters train"
            )
        return last.likelihood

    def check_layers(self) -> None:
        """Refuse a model whose :class:`~gpflux_avdgp.TrainableLikelihood` does not follow a GP
        layer (every other pair of layers was checked by :meth:`add`, through which every layer
        enters, also from ``__init__`` and a saved config).

        :raises ValueError: naming the layer before the likelihood.
        """
        layers = self.layers
        if len(layers) > 1 and not isinstance(layers[-2], (MixtureLayer, TrainableLikelihood)):
            raise ValueError(
                f"{self.name}: the TrainableLikelihood reads a packed mixture, but "
                f"{layers[-2].name!r} ({type(layers[-2]).__name__}) comes before it; end "
                "with a GP layer"
            )

    def _check_reader(self, before: tf_keras.layers.Layer, after: tf_keras.layers.Layer) -> None:
        """Refuse ``after`` if ``before`` writes a packed mixture that ``after`` cannot read."""
        writes = isinstance(before, (MixtureLayer, TrainableLikelihood))
        if writes and not getattr(after, "reads_mixture", False):
            raise ValueError(
                f"{self.name}: layer {after.name!r} ({type(after).__name__}) follows "
                f"{before.name!r}, whose output is a packed mixture; {mixture_reader_fix(after)}"
            )

    def add(self, layer: tf_keras.layers.Layer) -> None:
        """``Sequential.add``, refusing first a layer that cannot read the packed mixture of the
        layer before it (a GPflux ``GPLayer`` would fail deep inside GPflow).

        :raises ValueError: naming both layers and the fix.
        """
        if self.layers:
            self._check_reader(self.layers[-1], layer)
        super().add(layer)

    # ------------------------------------------------------------------ compile
    def compile(self, optimizer="rmsprop", loss=None, metrics=None, weighted_metrics=None, **kw):
        """``tf_keras.Model.compile`` with the checks above (see the class docstring).

        :raises ValueError: one line for a loss that is not the model's ``AVDGPLoss``, a
            metric that cannot mean anything for the likelihood, or a bad layer order.
        """
        likelihood = self.likelihood
        self.check_layers()
        loss_arg = loss
        loss = self._checked_loss(loss, likelihood)
        standard, ours = self._split_metrics(metrics, likelihood)
        weighted_standard, weighted_ours = self._split_metrics(weighted_metrics, likelihood)
        super().compile(
            optimizer=optimizer,
            loss=loss,
            metrics=standard,
            weighted_metrics=weighted_standard,
            **kw,
        )
        self._compile_config.config.update(
            loss=loss_arg, metrics=metrics, weighted_metrics=weighted_metrics
        )
        self._extras.metrics, self._extras.weighted_metrics = ours, weighted_ours
        self._extras.has_standard_metrics = bool(standard or weighted_standard)
        with self.distribute_strategy.scope():
            self._extras.kl = tf_keras.metrics.Mean(name="kl", dtype=_model_float(self))

    def compile_from_config(self, config: dict) -> None:
        """Compile with the saved arguments (``tf_keras`` skips models that override
        ``compile``) and create the optimizer's slots, so that its saved state loads."""
        self.compile(**tf_keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    @staticmethod
    def _checked_loss(loss, likelihood: gpflow.likelihoods.Likelihood):
        if loss is None:
            return AVDGPLoss(likelihood)
        if isinstance(loss, gpflux.losses.LikelihoodLoss):
            raise ValueError(
                "loss: GPflux's LikelihoodLoss reads a Gaussian q(f), not the packed mixture; "
                "leave the loss out or use gpflux_avdgp.AVDGPLoss(model.likelihood), the same "
                "ELBO term on the mixture"
            )
        if isinstance(loss, AVDGPLoss) and loss.adopts_model_likelihood:
            loss.adopt(likelihood)  # reloaded: its likelihood is a copy of the model's
        if isinstance(loss, tf_keras.losses.Loss) and hasattr(loss, "likelihood"):
            if loss.likelihood is not likelihood:
                raise ValueError(
                    f"loss: {type(loss).__name__} holds another likelihood than the model's "
                    "TrainableLikelihood, so the model's would not train; use "
                    "AVDGPLoss(model.likelihood) or leave the loss out"
                )
            return loss
        module = getattr(loss, "__module__", None) or ""
        if isinstance(loss, str) or callable(loss) and module.startswith(("tf_keras", "keras")):
            shown = repr(loss) if isinstance(loss, str) else type(loss).__name__
            raise ValueError(
                f"loss: {shown} scores a point prediction, an AVDGP trains on its mixture; leave "
                "the loss out (the ELBO) or use AVDGPLoss(model.likelihood, "
                "objective='predictive')"
            )
        return loss

    @staticmethod
    def _split_metrics(metrics, likelihood) -> tuple[list, list[MixtureMetric]]:
        """``(standard metrics, the package's metrics bound to likelihood)``."""
        if metrics is None:
            return [], []
        if isinstance(metrics, dict) or not isinstance(metrics, (list, tuple)):
            raise TypeError(f"metrics: expected a list, got {metrics!r}")
        standard, ours = [], []
        for metric in metrics:
            if isinstance(metric, MixtureMetric):
                if metric.likelihood is None or metric.adopts_model_likelihood:
                    metric.bind(likelihood)
                elif metric.likelihood is not likelihood:
                    raise ValueError(
                        f"metrics: {type(metric).__name__} holds another likelihood than the "
                        "model's; leave it out, the model gives its own"
                    )
                ours.append(metric)
            else:
                check_standard_metric(metric, likelihood)
                standard.append(metric)
        return standard, ours

    # ------------------------------------------------------------------ steps
    @property
    def metrics(self) -> list:
        """Keras' metrics (the loss tracker, the compiled metrics, layer metrics), then the
        package's metrics given to ``compile``."""
        metrics = super().metrics
        extras = getattr(self, "_extras", None)
        if extras is None or not self._is_compiled:
            return metrics
        return metrics + extras.metrics + extras.weighted_metrics

    def reset_metrics(self) -> None:
        """Reset every metric and the ``kl`` tracker (Keras calls this at each epoch start)."""
        super().reset_metrics()
        if self._extras.kl is not None:
            self._extras.kl.reset_state()

    def get_metrics_result(self) -> dict:
        """The metrics' results, and ``kl`` once a training step has updated it since the last
        reset (eagerly: Keras calls this at the end of an epoch and, when the keys match the
        step's logs, reports these cross-replica values instead of the per-worker sums)."""
        results = super().get_metrics_result()
        kl = self._extras.kl
        if kl is not None and tf.executing_eagerly() and float(kl.count.numpy()) > 0.0:
            results["kl"] = kl.result()
        return results

    def compute_metrics(self, x, y, y_pred, sample_weight) -> dict:
        """Standard metrics on the predictive mean of ``y`` (or the class probabilities), the
        package's metrics on the mixture."""
        if self._extras.has_standard_metrics:  # else no batch pays for the mean of y
            view = _standard_view(self.likelihood, y_pred)
            self.compiled_metrics.update_state(y, view, sample_weight)
        for metric in self._extras.metrics:
            metric.update_state(y, y_pred)
        for metric in self._extras.weighted_metrics:
            metric.update_state(y, y_pred, sample_weight)
        return self.get_metrics_result()

    def train_step(self, data) -> dict:
        """Keras' training step, then the GP layers' KL sum into the ``kl`` tracker.

        :returns: the step's logs with ``kl`` added.
        """
        logs = super().train_step(data)
        layer_losses = [loss for layer in self.layers if isinstance(layer, MixtureLayer)
                        for loss in layer.losses]  # fmt: skip
        if layer_losses:
            self._extras.kl.update_state(tf.add_n(layer_losses))
            logs = {**logs, "kl": self._extras.kl.result()}
        return logs

    def predict_step(self, data) -> dict[str, tf.Tensor]:
        """:returns: :func:`predictive_outputs` of a batch."""
        x, _, _ = tf_keras.utils.unpack_x_y_sample_weight(data)
        return predictive_outputs(self.likelihood, self(x, training=False))

    # ------------------------------------------------------------------ Keras entry points
    def _in_model_float(self, x):
        """A NumPy float array as a tensor of the model's input dtype (Keras would cast it to
        float32 first, losing precision in a float64 model); anything else unchanged."""
        if isinstance(x, np.ndarray) and x.dtype.kind == "f" and self.inputs:
            return tf.convert_to_tensor(x, dtype=self.inputs[0].dtype)
        return x

    def predict(self, x, *args, **kwargs):
        """``tf_keras.Model.predict``: see :func:`predictive_outputs` for what it returns."""
        return super().predict(self._in_model_float(x), *args, **kwargs)

    def fit(self, x=None, y=None, *args, **kwargs):
        """``tf_keras.Model.fit``; NaN or inf in in-memory ``x`` or ``y`` is refused naming the
        array, before a GP layer would meet it. Prior reversion's anchors not yet placed are
        placed first (:func:`~gpflux_avdgp.layers.anchor_placement.place_anchors`)."""
        check_finite_data(x=x, y=y, validation_data=kwargs.get("validation_data"))
        place_anchors(self, x)
        return super().fit(x, y, *args, **kwargs)

    def evaluate(self, x=None, y=None, *args, **kwargs):
        """``tf_keras.Model.evaluate``, with NumPy float inputs and targets in the model's
        float type: the scalar loss, or the loss and the compiled metrics. NaN or inf in
        in-memory ``x`` or ``y`` is refused naming the array (the scores would be ``nan``)."""
        check_finite_data(x=x, y=y)
        return super().evaluate(self._in_model_float(x), self._in_model_float(y), *args, **kwargs)

    def save(self, filepath, *args, **kwargs) -> None:
        """``tf_keras.Model.save`` to ``.keras`` or a SavedModel folder.

        :raises ValueError: for the HDF5 format, which cannot hold the GPflow parameters.
        """
        path = os.fspath(filepath) if isinstance(filepath, (str, os.PathLike)) else ""
        if path.endswith((".h5", ".hdf5")) or kwargs.get("save_format") == "h5":
            raise ValueError(
                f"filepath: the HDF5 format cannot hold an AVDGP's GPflow parameters, got "
                f"{path or 'h5'!r}; save to 'model.keras' or a SavedModel folder"
            )
        super().save(filepath, *args, **kwargs)


def _model_float(model: tf_keras.Model) -> tf.DType:
    """The model's float type (its input's), default GPflow's."""
    if model.inputs:
        return model.inputs[0].dtype
    return tf.as_dtype(gpflow.default_float())
