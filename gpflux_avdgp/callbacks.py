"""Keras callbacks: the predictive NLL of held-out data, for early stopping and model selection.

Keras' own ``validation_data`` reports the *training loss* on the validation rows (the ELBO,
with the KL term of the training set); what one wants to select a model by is the predictive
log-density of the held-out targets under the mixture. :class:`ValidationNLL` writes it into
the epoch logs, so any Keras callback can monitor it::

    model.fit(
        x, y, epochs=100,
        callbacks=[
            gpflux_avdgp.ValidationNLL(x_val, y_val),
            tf_keras.callbacks.EarlyStopping(
                monitor="val_nll", patience=10, restore_best_weights=True
            ),
        ],
    )

The order matters: ``ValidationNLL`` must come before the callbacks that read ``val_nll``.

A model with an input guard (``build_avdgp(guard=True)``) wants :class:`BestEpochStopping` in
place of ``EarlyStopping``: the same options, but the guard keeps its last weights when the
layers take the best epoch's. The guard trains on its own ELBO and has no share in the held-in
rows' NLL that chooses the epoch; restored with the layers it would be cut to their best epoch.
"""

from __future__ import annotations

import math
from typing import Optional

import gpflow
import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from .checks import check_feature_matrix, check_positive_int
from .prediction import (
    in_padded_batches,
    log_density_function,
    model_input_spec,
    model_likelihood,
)

__all__ = ["BestEpochStopping", "ValidationNLL"]


class ValidationNLL(tf_keras.callbacks.Callback):
    """Adds ``logs[name]``, the mean negative log predictive density of ``(x, y)``, every
    ``every`` epochs (and at the last epoch).

    :param x: ``[N, D]`` held-out inputs, in the units the model is trained on.
    :param y: ``[N, 1]`` (or ``[N]``) held-out targets.
    :param likelihood: the model's likelihood (default: the model's last layer's).
    :param every: score every this many epochs; other epochs get no value, which Keras'
        ``EarlyStopping`` and ``ModelCheckpoint`` skip.
    :param batch_size: rows per forward pass.
    :param name: the key in the logs.

    :ivar history: ``[(epoch, nll), ...]`` of every scored epoch (epochs counted from 0).
    """

    def __init__(
        self,
        x: np.ndarray,
        y: np.ndarray,
        *,
        likelihood: Optional[gpflow.likelihoods.Likelihood] = None,
        every: int = 1,
        batch_size: int = 1000,
        name: str = "val_nll",
    ):
        super().__init__()
        self.x = check_feature_matrix("x", x, None)
        targets = np.asarray(y, dtype=np.float64)
        if targets.ndim == 1:
            targets = targets[:, None]
        if targets.ndim != 2 or targets.shape[0] != self.x.shape[0]:
            raise ValueError(
                f"y: expected {self.x.shape[0]} targets (one per row of x), got shape "
                f"{np.shape(y)}"
            )
        self.y = targets
        self.likelihood = likelihood
        self.every = check_positive_int("every", every)
        self.batch_size = check_positive_int("batch_size", batch_size)
        if not isinstance(name, str) or not name:
            raise ValueError(f"name: expected a non-empty string, got {name!r}")
        self.name = name
        self.history: list[tuple[int, float]] = []
        self._scorer = None  # (model, its traced log density), made at the first score

    def score(self) -> float:
        """The mean negative log predictive density of the held-out data now, through one
        traced function (made at the first score of a model), in padded batches as
        :func:`~gpflux_avdgp.prediction.predict_mixture`'s."""
        if self._scorer is None or self._scorer[0] is not self.model:
            likelihood = model_likelihood(self.model, self.likelihood)
            self._scorer = (self.model, log_density_function(self.model, likelihood))
        x = tf.constant(self.x, dtype=model_input_spec(self.model)[1])  # [N, D]
        y = tf.constant(self.y, dtype=x.dtype)  # [N, Q]
        values = in_padded_batches(self._scorer[1], [x, y], self.batch_size, self.model)  # [N]
        return float(-np.mean(values))

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        last = epoch + 1 == (self.params or {}).get("epochs")
        if logs is None or ((epoch + 1) % self.every and not last):
            return
        value = self.score()
        self.history.append((epoch, value))
        logs[self.name] = value if math.isfinite(value) else math.inf


class BestEpochStopping(tf_keras.callbacks.EarlyStopping):
    """Keras' ``EarlyStopping`` (the same options) whose restore of the best epoch's weights
    leaves the model's input guard (``model.guard``, if the model has one) at its last weights;
    for a model without a guard it is ``EarlyStopping``.

    It reads the best epoch's weights from the model's variable list as it was at the first
    read, where ``EarlyStopping`` walks the model for them at every better epoch (``Model.
    weights`` over GPflow's modules, 14 ms a walk: 0.5 s of a 100-epoch fit on small data).
    """

    def on_train_begin(self, logs: Optional[dict] = None) -> None:
        super().on_train_begin(logs)
        self._variables: Optional[list] = None  # the model's weights, listed at the first read

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        counted = (logs or {}).get(self.monitor) is not None and epoch >= self.start_from_epoch
        first = self.restore_best_weights and counted and self.best_weights is None
        restore, self.restore_best_weights = self.restore_best_weights, False
        try:  # EarlyStopping's bookkeeping, without its weights reads
            super().on_epoch_end(epoch, logs)
        finally:
            self.restore_best_weights = restore
        if first:  # EarlyStopping keeps the first counted epoch if none is ever better
            self.best_epoch = epoch
        if restore and counted and self.best_epoch == epoch:
            if self._variables is None:
                self._variables = list(self.model.weights)
            self.best_weights = tf_keras.backend.batch_get_value(self._variables)

    def on_train_end(self, logs: Optional[dict] = None) -> None:
        if self.restore_best_weights and self.best_weights is not None:
            self.best_weights = _with_last_guard(self.model, self.best_weights)
        super().on_train_end(logs)


def _with_last_guard(model: tf_keras.Model, weights: list[np.ndarray]) -> list[np.ndarray]:
    """``weights`` (in ``model.get_weights()``'s order) with the entries of the model's guard
    replaced by the guard's current values; ``weights`` itself for a model without a guard."""
    guard = getattr(model, "guard", None)
    if guard is None:
        return weights
    guard_ids = {id(variable) for variable in guard.weights}
    return [
        variable.numpy() if id(variable) in guard_ids else kept
        for variable, kept in zip(model.weights, weights, strict=True)
    ]
