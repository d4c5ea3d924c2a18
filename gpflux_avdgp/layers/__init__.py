"""Keras layers of gpflux_avdgp. :class:`MixtureLikelihoodLayer` (GPflux's ``DeepGP``) and
:func:`place_anchors` (before training) load on first use."""

from .amortized_gp_layer import AmortizedGPLayer, KLConvention
from .base import MixtureLayer
from .gpflux_adapter import SigmaPointGPLayer
from .inference import InferenceKind
from .likelihood_layer import TrainableLikelihood
from .mixture_readout import MixtureMean, MixtureSample

__all__ = [
    "AmortizedGPLayer",
    "InferenceKind",
    "KLConvention",
    "MixtureLayer",
    "MixtureLikelihoodLayer",
    "MixtureMean",
    "MixtureSample",
    "SigmaPointGPLayer",
    "TrainableLikelihood",
    "place_anchors",
]


def __getattr__(name: str):
    """``MixtureLikelihoodLayer`` and ``place_anchors``, imported on first use."""
    if name == "MixtureLikelihoodLayer":
        from .mixture_likelihood_layer import MixtureLikelihoodLayer

        return MixtureLikelihoodLayer
    if name == "place_anchors":
        from .anchor_placement import place_anchors

        return place_anchors
    raise AttributeError(f"module 'gpflux_avdgp.layers' has no attribute {name!r}")
