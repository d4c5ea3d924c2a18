"""Keras layers of gpflux_avdgp. :class:`MixtureLikelihoodLayer` (GPflux's ``DeepGP``) and
:func:`place_anchors` (before training) load on first use."""

from importlib import import_module

from .amortized_gp_layer import AmortizedGPLayer, KLConvention
from .base import MixtureLayer
from .gpflux_adapter import SigmaPointGPLayer
from .inference import InferenceKind
from .input_guard import InputGuard
from .likelihood_layer import TrainableLikelihood
from .mixture_readout import MixtureMean, MixtureSample

__all__ = [
    "AmortizedGPLayer",
    "InferenceKind",
    "InputGuard",
    "KLConvention",
    "MixtureLayer",
    "MixtureLikelihoodLayer",
    "MixtureMean",
    "MixtureSample",
    "SigmaPointGPLayer",
    "TrainableLikelihood",
    "place_anchors",
]


#: Names loaded on first use, by the module that defines them.
_LOADED_ON_FIRST_USE = {
    "MixtureLikelihoodLayer": ".mixture_likelihood_layer",
    "place_anchors": ".anchor_placement",
}


def __getattr__(name: str):
    """The names of :data:`_LOADED_ON_FIRST_USE`, imported when first asked for."""
    module = _LOADED_ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module 'gpflux_avdgp.layers' has no attribute {name!r}")
    return getattr(import_module(module, __name__), name)
