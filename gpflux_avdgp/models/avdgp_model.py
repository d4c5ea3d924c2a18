"""An amortized deep GP as a Keras model whose ``fit``, ``evaluate`` and ``predict`` speak
about ``y``.

The layers pass packed mixtures of ``f`` (``[B, S, 2 Q + 1]``) to each other; the last one,
:class:`~gpflux_avdgp.TrainableLikelihood`, outputs the predictive distribution of ``y`` (the
mean of ``y`` or the class probabilities, carrying the distribution), in every Keras model
type. :class:`AVDGPModel` is a ``tf_keras.Sequential`` that adds, through Keras' documented
hooks (``compile``, ``compute_loss``, ``compute_metrics``, ``predict_step``):

* ``compile`` refuses, in one line, metrics that cannot mean anything for the model's
  likelihood and losses that score a point prediction; the loss defaults to
  :class:`~gpflux_avdgp.AVDGPLoss` (the model's likelihood and objective);
* Bernoulli labels ``{-1, +1}`` are read as GPflow reads them (``y == 1``) by the loss and by
  every metric, Keras' included;
* ``predict`` returns ``{"mean": [N, Q], "std": [N, Q]}`` of ``y`` with the central 95 %
  interval (classifiers: ``{"probabilities": [N, K]}``);
  :func:`~gpflux_avdgp.predict_mixture` gives the mixture;
* History logs the layers' KL term as ``kl``;
* an optional :class:`~gpflux_avdgp.layers.input_guard.InputGuard` (``build_avdgp(guard=True)``)
  is trained beside the layers and mixed into the prediction off the data.

``docs/design.md`` ("The model's output") records the alternatives measured.
"""

from __future__ import annotations

import json
import os
from typing import Optional

import gpflow
import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from ..checks import check_feature_matrix, check_finite_data
from ..layers import AmortizedGPLayer, InputGuard, MixtureLayer, TrainableLikelihood
from ..layers.anchor_placement import place_anchors
from ..layers.readers import mixture_reader_fix
from ..objectives import AVDGPLoss
from ..predictive import binary_labels, is_categorical, is_classifier, predictive_distribution
from .compile_checks import check_metrics, checked_loss
from .finite_steps import checked_batch, gradients_check, run_reporting_non_finite

__all__ = ["AVDGPModel"]


class _Extras:
    """State that Keras must not track as layers: the KL tracker."""

    def __init__(self) -> None:
        self.kl: Optional[tf_keras.metrics.Mean] = None


@tf_keras.utils.register_keras_serializable(package="gpflux_avdgp")
class AVDGPModel(tf_keras.Sequential):
    """A ``tf_keras.Sequential`` of GP layers ending in a
    :class:`~gpflux_avdgp.TrainableLikelihood`, with Keras' habits on the predictive
    distribution of ``y``.

    * ``compile(optimizer, metrics=[...])``: the loss defaults to ``AVDGPLoss()``, which trains
      the model's likelihood and objective (``build_avdgp(rule="ar2pp")``: the predictive
      one); standard metrics score the predictive mean of ``y`` or the class probabilities,
      :mod:`~gpflux_avdgp.keras_metrics` the whole distribution.
    * ``fit``: History has ``loss``, ``kl`` (the GP layers' KL terms, as they enter the loss)
      and the metrics; ``evaluate`` returns the scalar loss when no metric is compiled.
    * ``predict(x)``: ``{"mean", "std"}`` of ``y`` ``[N, Q]`` each, or ``{"probabilities"}``
      ``[N, K]``; NumPy float inputs are passed in the model's float type.

    :param layers: as for ``tf_keras.Sequential``.
    :param name: the model's name.
    :param guard: an :class:`~gpflux_avdgp.layers.input_guard.InputGuard` (a defensive
        mixture off the data, ``build_avdgp(guard=True)``): placed with the anchors, trained on
        its own ELBO in the model's steps, mixed into the last GP layer's output in prediction.
    """

    def __init__(self, layers=None, name: Optional[str] = None, guard: Optional[InputGuard] = None):
        super().__init__(layers=layers, name=name)
        object.__setattr__(self, "_extras", _Extras())  # not tracked by Keras
        self.guard = guard

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

    @property
    def guard(self) -> Optional[InputGuard]:
        """The model's :class:`~gpflux_avdgp.layers.input_guard.InputGuard`, or ``None``."""
        return self._guard

    @guard.setter
    def guard(self, guard: Optional[InputGuard]) -> None:
        """Set or remove the guard; the traced step and prediction functions are dropped, so
        the next call traces the model as it now is.

        :raises TypeError: for anything but an ``InputGuard`` or ``None``.
        """
        if guard is not None and not isinstance(guard, InputGuard):
            raise TypeError(f"guard: expected an InputGuard, got {guard!r}")
        self._guard = guard
        self.train_function = self.test_function = self.predict_function = None
        self.__dict__.pop("_avdgp_mixture_function", None)  # predict_mixture's (prediction.py)

    @tf.autograph.experimental.do_not_convert  # no control flow on tensors: traced as written
    def call(self, inputs, training=None, mask=None):
        """The layers in order. With a guard, in prediction: the last GP layer's reversion
        weight is capped by the guard's gate on ``x`` (if it is an ``AmortizedGPLayer`` with
        anchors), and the guard's component joins its packed mixture before the likelihood."""
        if self.guard is None or training:  # the guard trains on its own ELBO (train_step)
            return super().call(inputs, training=training, mask=mask)
        component, gate = self.guard(inputs, training=False)
        packed, last = inputs, len(self.layers) - 2
        for index, layer in enumerate(self.layers[:-1]):
            gated = index == last and isinstance(layer, AmortizedGPLayer) and layer.num_anchors
            packed = layer(packed, training=False, **({"gate": gate} if gated else {}))
        return self.layers[-1](self.guard.mix(packed, component, gate), training=False)

    @property
    def trainable_weights(self) -> list[tf.Variable]:
        """The layers' trainable weights, then the guard's (a ``Sequential`` collects its
        layers' only)."""
        guard = self.guard.trainable_weights if self.guard is not None and self.trainable else []
        return self._dedup_weights(super().trainable_weights + guard)

    @property
    def non_trainable_weights(self) -> list[tf.Variable]:
        """The layers' non-trainable weights, then the guard's (its anchors and reach; all of
        them in a frozen model, as Keras counts the layers')."""
        weights = super().non_trainable_weights
        if self.guard is None:
            return weights
        guard = self.guard.non_trainable_weights if self.trainable else self.guard.weights
        return self._dedup_weights(weights + guard)

    @property
    def weights(self) -> list[tf.Variable]:
        """The layers' weights, then the guard's (what ``get_weights``, ``set_weights`` and
        Keras' ``restore_best_weights`` read)."""
        guard = self.guard.weights if self.guard is not None else []
        return self._dedup_weights(super().weights + guard)

    def get_config(self) -> dict:
        """``Sequential``'s config, with the guard's."""
        config = super().get_config()
        if self.guard is not None:
            config["guard"] = tf_keras.saving.serialize_keras_object(self.guard)
        return config

    @classmethod
    def from_config(cls, config: dict, custom_objects=None) -> "AVDGPModel":
        """Rebuild the model and its guard (the trained values come with the weights)."""
        config = dict(config)
        guard = config.pop("guard", None)
        model = super().from_config(config, custom_objects=custom_objects)
        if guard is not None:
            model.guard = tf_keras.saving.deserialize_keras_object(
                guard, custom_objects=custom_objects
            )
        return model

    # ------------------------------------------------------------------ compile
    def compile(self, optimizer="rmsprop", loss=None, metrics=None, weighted_metrics=None, **kw):
        """``tf_keras.Model.compile`` with the checks above (see the class docstring).

        :raises ValueError: one line for a loss that scores a point prediction or holds
            another likelihood, a metric that cannot mean anything for the likelihood, or a
            bad layer order.
        """
        likelihood = self.likelihood
        self.check_layers()
        if isinstance(loss, AVDGPLoss):
            loss.check_objective(self.layers[-1].objective)  # at compile, not the first step
        for group in (metrics, weighted_metrics):
            check_metrics(group, likelihood)
        super().compile(
            optimizer=optimizer,
            loss=checked_loss(loss, likelihood),
            metrics=metrics,
            weighted_metrics=weighted_metrics,
            **kw,
        )
        self._compile_config.config.update(loss=loss)
        with self.distribute_strategy.scope():
            self._extras.kl = tf_keras.metrics.Mean(name="kl", dtype=_model_float(self))

    def compile_from_config(self, config: dict) -> None:
        """Compile with the saved arguments (``tf_keras`` skips models that override
        ``compile``) and create the optimizer's slots, so that its saved state loads."""
        self.compile(**tf_keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    # ------------------------------------------------------------------ steps
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

    def _gpflow_labels(self, y):
        """``y`` as the likelihood reads it: Bernoulli labels as ``y == 1`` (so Keras' metrics
        score ``{-1, +1}`` labels as GPflow does), anything else unchanged."""
        likelihood = self.likelihood
        if y is None or not is_classifier(likelihood) or is_categorical(likelihood):
            return y
        y = tf.convert_to_tensor(y)
        return binary_labels(y, y.dtype if y.dtype.is_floating else _model_float(self))

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None):
        """Keras' loss, with Bernoulli labels as GPflow reads them."""
        return super().compute_loss(x, self._gpflow_labels(y), y_pred, sample_weight)

    def compute_metrics(self, x, y, y_pred, sample_weight) -> dict:
        """Keras' metrics, with Bernoulli labels as GPflow reads them."""
        return super().compute_metrics(x, self._gpflow_labels(y), y_pred, sample_weight)

    def train_step(self, data) -> dict:
        """Keras' training step (:meth:`compute_loss`, the optimizer's update, the metrics)
        with the batch, the loss and every gradient checked before the update
        (:mod:`~gpflux_avdgp.models.finite_steps`), then the GP layers' KL sum into ``kl``.
        A guard's variables follow its own negative ELBO (:meth:`~gpflux_avdgp.layers.
        input_guard.InputGuard.training_gradients`) in the same update; ``loss`` in the logs
        stays the model's (Keras' loss tracker reads the compiled loss).

        :returns: the step's logs with ``kl`` added.
        """
        data = checked_batch(data)
        x, y, sample_weight = tf_keras.utils.unpack_x_y_sample_weight(data)
        checked = [item for item in tf.nest.flatten(data) if tf.is_tensor(item)]
        with tf.control_dependencies(checked), tf.GradientTape() as tape:
            y_pred = self(x, training=True)  # after the checks: draw counters advance then
            loss = self.compute_loss(x, y, y_pred, sample_weight)
        variables = self.trainable_variables  # the guard's last (trainable_weights)
        gradients = tape.gradient(loss, variables)  # None for the guard's
        if self.guard is not None and self.trainable and self.guard.trainable_variables:
            guard_loss, guard_gradients = self.guard.training_gradients(
                x, self._gpflow_labels(y), sample_weight, self.optimizer.iterations
            )
            loss += guard_loss
            gradients = gradients[: -len(guard_gradients)] + guard_gradients
        with tf.control_dependencies([gradients_check(loss, gradients)]):  # every update op
            self.optimizer.apply_gradients(zip(gradients, variables))  # and the count wait
        logs = self.compute_metrics(x, y, y_pred, sample_weight)
        layer_losses = [loss for layer in self.layers if isinstance(layer, MixtureLayer)
                        for loss in layer.losses]  # fmt: skip
        if layer_losses:
            self._extras.kl.update_state(tf.add_n(layer_losses))
            logs = {**logs, "kl": self._extras.kl.result()}
        return logs

    def test_step(self, data) -> dict:
        """Keras' evaluation step on the checked batch."""
        return super().test_step(checked_batch(data))

    def predict_step(self, data) -> dict[str, tf.Tensor]:
        """:returns: :meth:`~gpflux_avdgp.predictive.PredictiveDistribution.outputs` of a batch."""
        x, _, _ = tf_keras.utils.unpack_x_y_sample_weight(data)
        return predictive_distribution(self(x, training=False)).outputs()

    # ------------------------------------------------------------------ Keras entry points
    def _in_model_float(self, x):
        """A NumPy float array as a tensor of the model's input dtype (Keras would cast it to
        float32 first, losing precision in a float64 model); anything else unchanged."""
        if isinstance(x, np.ndarray) and x.dtype.kind == "f" and self.inputs:
            return tf.convert_to_tensor(x, dtype=self.inputs[0].dtype)
        return x

    def predict(self, x, *args, **kwargs):
        """``tf_keras.Model.predict``: see
        :meth:`~gpflux_avdgp.predictive.PredictiveDistribution.outputs` for what it returns.

        :raises ValueError: one line for an in-memory ``x`` that is not ``[N, D]`` (e.g. one
            row ``x[0]``: ``x[0].reshape(1, -1)``), empty, or holds NaN or inf.
        """
        if isinstance(x, (np.ndarray, list)) and self.inputs:
            check_feature_matrix("x", x, self.inputs[0].shape[-1])
        return super().predict(self._in_model_float(x), *args, **kwargs)

    def fit(self, x=None, y=None, *args, **kwargs):
        """``tf_keras.Model.fit``; NaN or inf in in-memory ``x`` or ``y`` is refused naming the
        array, before a GP layer would meet it; in a dataset, the step that meets it applies
        no update and fit raises one line naming the input, batch and epoch. Anchors not yet
        placed are placed first (:func:`~gpflux_avdgp.layers.anchor_placement.place_anchors`),
        the optimizer's variables made before the step's trace (in it, it is traced twice)."""
        check_finite_data(x=x, y=y, validation_data=kwargs.get("validation_data"))
        place_anchors(self, x)
        if self.built and isinstance(self.optimizer, tf_keras.optimizers.Optimizer):
            with self.distribute_strategy.scope():  # Keras' own call, ahead of its trace
                self.optimizer.build(self.trainable_variables)
        return run_reporting_non_finite("fit", 5, super().fit, x, y, *args, **kwargs)

    def evaluate(self, x=None, y=None, *args, **kwargs):
        """``tf_keras.Model.evaluate``, with NumPy float inputs and targets in the model's
        float type: the scalar loss, or the loss and the compiled metrics. NaN or inf in ``x``,
        ``y`` or ``sample_weight`` is refused naming the array, or the dataset's batch (the
        scores would be ``nan``)."""
        check_finite_data(x=x, y=y)
        x, y = self._in_model_float(x), self._in_model_float(y)
        return run_reporting_non_finite("evaluate", 6, super().evaluate, x, y, *args, **kwargs)

    def save_weights(self, filepath, *args, **kwargs) -> None:
        """``tf_keras.Model.save_weights`` to a TensorFlow checkpoint.

        :raises ValueError: for the HDF5 format, which needs unique weight names (GPflow's
            parameters of two layers share theirs).
        """
        path = os.fspath(filepath) if isinstance(filepath, (str, os.PathLike)) else ""
        if path.endswith((".h5", ".hdf5")) or kwargs.get("save_format") == "h5":
            raise ValueError(
                f"filepath: HDF5 weights need unique weight names and GPflow's parameters "
                f"repeat theirs, got {path or 'h5'!r}; save_weights('weights') writes a "
                "TensorFlow checkpoint, or save the model to 'model.keras'"
            )
        super().save_weights(filepath, *args, **kwargs)

    def to_json(self, **kwargs) -> str:
        """``tf_keras.Model.to_json``, naming the class as registered
        (``gpflux_avdgp>AVDGPModel``) so that ``model_from_json`` rebuilds an ``AVDGPModel``
        (by its bare name Keras finds nothing and returns the string ``'AVDGPModel'``)."""
        config = json.loads(super().to_json())
        config["class_name"] = tf_keras.saving.get_registered_name(type(self))
        return json.dumps(config, **kwargs)

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
