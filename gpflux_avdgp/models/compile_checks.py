"""What ``AVDGPModel.compile`` accepts: losses that train the predictive distribution and
metrics that mean something for the likelihood, each refusal in one line naming the fix."""

from __future__ import annotations

import gpflow
import gpflux
from gpflow.keras import tf_keras

from ..keras_metrics import MixtureMetric, check_standard_metric
from ..objectives import AVDGPLoss

__all__ = ["check_metrics", "checked_loss"]


def checked_loss(loss, likelihood: gpflow.likelihoods.Likelihood):
    """The loss ``compile`` passes to Keras: ``AVDGPLoss()`` for ``None``; refuses in one line
    GPflux's ``LikelihoodLoss``, a loss holding another likelihood, and Keras' point losses
    (by name or object)."""
    if loss is None:
        return AVDGPLoss()
    if isinstance(loss, gpflux.losses.LikelihoodLoss):
        raise ValueError(
            "loss: GPflux's LikelihoodLoss reads a Gaussian q(f), not the packed mixture; "
            "leave the loss out or use gpflux_avdgp.AVDGPLoss(), the same ELBO term on the "
            "mixture"
        )
    held = getattr(loss, "likelihood", None)
    if isinstance(loss, tf_keras.losses.Loss) and held is not None and held is not likelihood:
        raise ValueError(
            f"loss: {type(loss).__name__} holds another likelihood than the model's "
            "TrainableLikelihood, so the model's would not train; leave the likelihood out: "
            "AVDGPLoss()"
        )
    module = getattr(loss, "__module__", None) or ""
    if isinstance(loss, str) or callable(loss) and module.startswith(("tf_keras", "keras")):
        shown = repr(loss) if isinstance(loss, str) else type(loss).__name__
        raise ValueError(
            f"loss: {shown} scores a point prediction, an AVDGP trains on its predictive "
            "distribution; leave the loss out: AVDGPLoss() trains the model's objective (the "
            "ELBO, or AR2PP's predictive one)"
        )
    return loss


def check_metrics(metrics, likelihood) -> None:
    """Refuse metrics that cannot mean anything for ``likelihood`` (one line each)."""
    if metrics is None:
        return
    if isinstance(metrics, dict) or not isinstance(metrics, (list, tuple)):
        raise TypeError(f"metrics: expected a list, got {metrics!r}")
    for metric in metrics:
        if not isinstance(metric, MixtureMetric):
            check_standard_metric(metric, likelihood)
        elif metric.likelihood is not None and metric.likelihood is not likelihood:
            raise ValueError(
                f"metrics: {type(metric).__name__} holds another likelihood than the "
                "model's; leave it out, the model's output carries its own"
            )
        else:
            metric.check_likelihood(likelihood)
