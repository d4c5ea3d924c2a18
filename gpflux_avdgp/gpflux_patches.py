"""Opt-in: GPflux's own classes learn to meet a packed mixture. Never applied at import.

The package changes no other library's classes by itself. Where our code runs, it already
gives the one-line guidance: an :class:`~gpflux_avdgp.AVDGPModel` refuses a GPflux ``GPLayer``
or ``LikelihoodLayer`` after a GP layer when it is added, ``AVDGPModel.compile`` refuses
GPflux's ``LikelihoodLoss``, our layers refuse a reader that does not know the mixture at the
first training step, and :func:`~gpflux_avdgp.as_deep_gp` builds GPflux's ``DeepGP`` with a
likelihood layer that reads the mixture. In a plain ``Sequential`` or a ``DeepGP`` built by
hand, GPflux's classes fail deep inside GPflow or TensorFlow instead. :func:`install` changes
them, for every model of the process, until :func:`uninstall`:

- ``gpflux.layers.GPLayer`` and ``gpflux.layers.LikelihoodLayer`` get a ``build`` that refuses a
  rank-3 input (GPflux never gives them one) in one line naming
  :class:`~gpflux_avdgp.SigmaPointGPLayer` or :func:`~gpflux_avdgp.as_deep_gp`; any other input
  builds as Keras' default does.
- ``gpflux.losses.LikelihoodLoss`` computes, on our model's output (the predictive distribution
  of a :class:`~gpflux_avdgp.TrainableLikelihood`) or a packed mixture (rank 3), the ELBO data
  term of ``AVDGPLoss(likelihood)``; GPflux's own inputs (a distribution, samples ``[B, Q]``)
  go to its code unchanged.

GPflux's own tests give the same results with the changes installed (they only turn an input
that would fail anyway into a clear error or a computed loss).
"""

from __future__ import annotations

import gpflux
import tensorflow as tf
from gpflow.keras import tf_keras

from .layers.base import mixture_reader_fix
from .objectives import AVDGPLoss, Objective
from .predictive import ATTRIBUTE

__all__ = ["install", "installed", "uninstall"]

_ORIGINAL_LOSS_CALL = gpflux.losses.LikelihoodLoss.call


def _build_refusing_rank_3(self, input_shape) -> None:
    """A layer ``build`` that raises ``ValueError`` for a rank-3 input and otherwise does what
    Keras' default does."""
    shape = tf.TensorShape(input_shape) if not isinstance(input_shape, (list, dict)) else None
    if shape is not None and shape.rank == 3:
        raise ValueError(
            f"{self.name}: a GPflux {type(self).__name__} cannot read the packed mixture {shape} "
            f"of the GP layer before it; {mixture_reader_fix(self)}"
        )
    tf_keras.layers.Layer.build(self, input_shape)


def _loss_call_reading_mixtures(self, y_true, f_prediction):
    """``LikelihoodLoss.call`` that computes ``AVDGPLoss``'s ELBO term on our model's output
    (the predictive distribution) or a packed mixture."""
    ours = getattr(f_prediction, ATTRIBUTE, None) is not None
    if ours or isinstance(f_prediction, tf.Tensor) and f_prediction.shape.rank == 3:
        return AVDGPLoss(self.likelihood, objective=Objective.ELBO).call(y_true, f_prediction)
    return _ORIGINAL_LOSS_CALL(self, y_true, f_prediction)


_PATCHED_CLASSES = (gpflux.layers.GPLayer, gpflux.layers.LikelihoodLayer)


def installed() -> bool:
    """Whether :func:`install` is in effect."""
    return gpflux.losses.LikelihoodLoss.call is _loss_call_reading_mixtures


def install() -> None:
    """Apply the changes above (idempotent). GPflux defines no ``build`` for either layer."""
    for layer_class in _PATCHED_CLASSES:
        if "build" not in layer_class.__dict__:
            layer_class.build = _build_refusing_rank_3
    gpflux.losses.LikelihoodLoss.call = _loss_call_reading_mixtures


def uninstall() -> None:
    """Give GPflux its classes back as they were (idempotent)."""
    for layer_class in _PATCHED_CLASSES:
        if layer_class.__dict__.get("build") is _build_refusing_rank_3:
            del layer_class.build
    gpflux.losses.LikelihoodLoss.call = _ORIGINAL_LOSS_CALL
