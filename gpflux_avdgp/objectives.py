"""Training objectives as one Keras loss: the ELBO and the predictive (AR2PP) objective.

The loss returns, per datapoint, the negative data term; the layers add their KL terms with
``add_loss`` (see :class:`~gpflux_avdgp.rules.KLConvention`), so ``model.fit``
minimises ``-(ELBO / N)`` under the ``"paper"`` convention.

* ``"elbo"``: ``-sum_s w_s E_{q(f_s)}[log p(y | f_s)]``; analytic for the Gaussian likelihood,
  Gauss-Hermite quadrature for others (the GPflow likelihood's ``variational_expectations``).
* ``"predictive"``: ``-log sum_s w_s p(y | s)`` with
  ``log p(y | s) = sum_d log int p(y_d | f) N(f | m_sd, v_sd) df`` (for a Gaussian likelihood
  ``sum_d log N(y_d | m_sd, v_sd + sigma^2)``): one log-sum-exp over components of the
  log-density **summed over outputs** (the reference code's per-output log-sum-exp is wrong).

**Where the loss gets its likelihood and objective.** From the model: its last layer,
:class:`~gpflux_avdgp.TrainableLikelihood`, owns both and outputs the predictive distribution
of ``y`` carrying them (:mod:`gpflux_avdgp.predictive`), so ``AVDGPLoss()`` trains the model's
likelihood and objective in every Keras model type, also after loading. A likelihood or
objective given to the loss must agree with the model's (else one line refuses it). The other
route is GPflux's: in :func:`~gpflux_avdgp.as_deep_gp`'s ``DeepGP`` the likelihood layer holds
the likelihood and adds the data term itself, as GPflux's ``LikelihoodLayer`` does.
"""

from __future__ import annotations

import warnings
from typing import Optional

import gpflow
import tensorflow as tf
from gpflow.keras import tf_keras

from .checks import check_choice, checked_finite
from .predictive import ATTRIBUTE, predictive_distribution
from .rules import Objective

__all__ = ["AVDGPLoss"]


@tf_keras.utils.register_keras_serializable(package="gpflux_avdgp")
class AVDGPLoss(tf_keras.losses.Loss):
    """Negative per-datapoint data term of an AVDGP, for ``model.compile(loss=...)``.

    ``y_pred`` is the model's output, which carries the predictive distribution of ``y``
    (:class:`~gpflux_avdgp.TrainableLikelihood`); ``y_true`` the targets ``[B, Q]`` (or ``[B]``
    when ``Q = 1``; one class index per row for a categorical likelihood).

    :param likelihood: optional: the model's GPflow likelihood (the model's output carries
        it); another one is refused. Needed only for a model that outputs the packed mixture
        of its last GP layer.
    :param objective: optional: ``"elbo"`` or ``"predictive"`` (AR2PP / DSPP), see
        :class:`Objective`; default the model's (``build_avdgp(rule="ar2pp")`` trains the
        predictive one). An objective other than the model's is refused.
    """

    def __init__(
        self,
        likelihood: Optional[gpflow.likelihoods.Likelihood] = None,
        *,
        objective: str | Objective | None = None,
        name: str = "avdgp_loss",
        **kwargs,
    ):
        if likelihood is not None and not isinstance(likelihood, gpflow.likelihoods.Likelihood):
            raise TypeError(f"likelihood: expected a GPflow likelihood, got {likelihood!r}")
        super().__init__(name=name, **kwargs)
        object.__setattr__(self, "_held", (likelihood,))  # not tracked: the model owns it
        #: a loss of a file written before models carried their objective holds the file's
        self._objective_from_legacy_file = False
        self.objective = (
            None if objective is None else check_choice("objective", objective, Objective)
        )

    @property
    def likelihood(self) -> Optional[gpflow.likelihoods.Likelihood]:
        """The likelihood given to the loss, if any (the model's output carries its own)."""
        return self._held[0]

    def __call__(self, y_true, y_pred, sample_weight=None):
        """Keras' weighted loss, with the targets and ``sample_weight`` checked in the graph:
        NaN or inf stops the step before any update, naming which
        (:func:`~gpflux_avdgp.checks.checked_finite`)."""
        y_true = checked_finite(y_true, "the targets y")
        sample_weight = checked_finite(sample_weight, "sample_weight")
        return super().__call__(y_true, y_pred, sample_weight)

    @tf.autograph.experimental.do_not_convert  # no control flow on tensors: traced as written
    def call(self, y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
        """The per-datapoint loss ``[B]`` of the model's output ``y_pred``.

        :raises ValueError: one line, for a ``y_pred`` without the predictive distribution, a
            likelihood or objective that is not the model's, or targets of the wrong shape.
        """
        distribution = predictive_distribution(y_pred, self.likelihood)
        objective = distribution.objective
        carried = getattr(y_pred, ATTRIBUTE, None) is not None
        if not carried and self.likelihood.trainable_variables:
            warnings.warn(
                f"{self.name}: the model does not hold the loss's likelihood, so its parameters "
                "will not train; end the model with gpflux_avdgp.TrainableLikelihood(likelihood)",
                stacklevel=2,
            )
        if carried and isinstance(distribution.likelihood, gpflow.likelihoods.Bernoulli):
            _refuse_labels_keras_misreads(y_true)
        if carried:
            self.check_objective(objective)
        return -distribution.objective_value(y_true, self.objective or objective)

    def check_objective(self, model_objective: Objective) -> None:
        """Refuse an objective given to the loss that is not the model's (a loss of a file
        written before models carried their objective keeps the file's).

        :raises ValueError: one line naming both objectives and the fix.
        """
        mine = self.objective
        if mine is None or mine is model_objective or self._objective_from_legacy_file:
            return
        raise ValueError(
            f"{self.name}: objective {mine.value!r}, but the model trains "
            f"{model_objective.value!r} (its TrainableLikelihood's, set by the rule); leave the "
            "objective out, or give it to the model: build_avdgp(rule='ar2pp') or "
            "TrainableLikelihood(likelihood, objective=...)"
        )

    def get_config(self) -> dict:
        config = super().get_config()
        config["objective"] = None if self.objective is None else self.objective.value
        return config

    @classmethod
    def from_config(cls, config: dict) -> "AVDGPLoss":
        """Rebuild the loss; the model's output gives it the likelihood (a likelihood in files
        written by earlier versions is a copy of the model's and is dropped)."""
        config = dict(config)
        legacy = config.pop("likelihood", None) is not None
        loss = cls(**config)
        loss._objective_from_legacy_file = legacy
        return loss


def _refuse_labels_keras_misreads(y_true: tf.Tensor) -> None:
    """Refuse Bernoulli labels other than 0 and 1 in a model's output path: GPflow reads
    ``{-1, +1}`` (``y == 1`` is the positive class), Keras' metrics (accuracy, AUC) do not.
    An :class:`~gpflux_avdgp.AVDGPModel` hands its loss and metrics the labels as GPflow reads
    them, so this only fires in other model types (not under XLA, which drops assertions)."""
    y = tf.convert_to_tensor(y_true)
    zero, one = tf.zeros([], y.dtype), tf.ones([], y.dtype)
    tf.debugging.Assert(
        tf.reduce_all(tf.logical_or(tf.equal(y, zero), tf.equal(y, one))),
        [
            "y_true: Bernoulli labels other than 0 and 1 (e.g. -1/+1), which Keras' metrics "
            "misread; pass (y == 1) as the labels, as GPflow's Bernoulli reads them, or train "
            "a gpflux_avdgp.AVDGPModel (build_avdgp), which does"
        ],
    )
