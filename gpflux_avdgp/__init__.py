"""gpflux_avdgp: amortized variational inference for deep Gaussian processes as GPflux-style
Keras layers.

Layers read and write packed Gaussian mixtures (:mod:`gpflux_avdgp.core.mixture`), so an amortized
deep GP is a ``tf_keras.Sequential`` (:func:`build_avdgp` returns an :class:`AVDGPModel`)
trained with ``model.fit`` and :class:`AVDGPLoss`. The names here are the ones a Keras user
needs; everything else is reachable from its module (``gpflux_avdgp.core``,
``gpflux_avdgp.layers``, ``gpflux_avdgp.propagation``, ...). The ``avdgp`` command and what only
it needs live beside the library, in the :mod:`avdgp` package, which the library never imports.

Everything is imported eagerly, as GPflux does: TensorFlow's import is most of the time.
"""

from ._version import __version__
from .callbacks import ValidationNLL
from .core.mixture import GaussianMixture
from .io.saving import load_model
from .io.serving import export
from .keras_metrics import MixtureAccuracy, MixtureBrier, MixtureCRPS, MixtureNLL, MixtureRMSE
from .layers import (
    AmortizedGPLayer,
    MixtureMean,
    MixtureSample,
    SigmaPointGPLayer,
    TrainableLikelihood,
)
from .models import AVDGPModel, as_deep_gp, build_avdgp
from .objectives import AVDGPLoss
from .prediction import PredictiveMixture, predict_mixture
from .propagation import PropagationRule

__all__ = [
    "AVDGPLoss",
    "AVDGPModel",
    "AmortizedGPLayer",
    "GaussianMixture",
    "MixtureAccuracy",
    "MixtureBrier",
    "MixtureCRPS",
    "MixtureMean",
    "MixtureNLL",
    "MixtureRMSE",
    "MixtureSample",
    "PredictiveMixture",
    "PropagationRule",
    "SigmaPointGPLayer",
    "TrainableLikelihood",
    "ValidationNLL",
    "__version__",
    "as_deep_gp",
    "build_avdgp",
    "export",
    "load_model",
    "predict_mixture",
]
