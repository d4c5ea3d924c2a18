"""gpflux_avdgp: amortized variational inference for deep Gaussian processes as GPflux-style
Keras layers.

Layers read and write packed Gaussian mixtures (:mod:`gpflux_avdgp.core.mixture`), so an amortized
deep GP is a ``tf_keras.Sequential`` (:func:`build_avdgp` returns an :class:`AVDGPModel`)
trained with ``model.fit`` and :class:`AVDGPLoss`. The names here are the ones a Keras user
needs; everything else is reachable from its module (``gpflux_avdgp.core``,
``gpflux_avdgp.layers``, ``gpflux_avdgp.propagation``, ...). The ``avdgp`` command and what only
it needs live beside the library, in the :mod:`avdgp` package, which the library never imports.

:func:`predict_mixture` and :class:`PredictiveMixture` (the mixture behind a prediction),
:class:`ValidationNLL`, :func:`export` (the serving signatures), :func:`load_model` (the file
checks) and :func:`as_deep_gp` (GPflux's ``DeepGP``) load their modules when first used, so
``import gpflux_avdgp`` loads what a model needs to be built and trained.
"""

from importlib import import_module
from typing import TYPE_CHECKING

from ._version import __version__
from .core.mixture import GaussianMixture
from .keras_metrics import MixtureAccuracy, MixtureBrier, MixtureCRPS, MixtureNLL, MixtureRMSE
from .layers import (
    AmortizedGPLayer,
    MixtureMean,
    MixtureSample,
    SigmaPointGPLayer,
    TrainableLikelihood,
)
from .models import AVDGPModel, build_avdgp
from .objectives import AVDGPLoss
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


#: Names loaded on first use, by the module that defines them.
_LOADED_ON_FIRST_USE = {
    "PredictiveMixture": ".prediction",
    "ValidationNLL": ".callbacks",
    "as_deep_gp": ".models.deep_gp",
    "export": ".io.serving",
    "load_model": ".io.saving",
    "predict_mixture": ".prediction",
}

if TYPE_CHECKING:  # what the names are, for type checkers and IDEs
    from .callbacks import ValidationNLL
    from .io.saving import load_model
    from .io.serving import export
    from .models.deep_gp import as_deep_gp
    from .prediction import PredictiveMixture, predict_mixture


def __getattr__(name: str):
    """The names of :data:`_LOADED_ON_FIRST_USE`, imported when first asked for."""
    module = _LOADED_ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module 'gpflux_avdgp' has no attribute {name!r}")
    return getattr(import_module(module, __name__), name)
