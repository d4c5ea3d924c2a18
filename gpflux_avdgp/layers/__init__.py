"""Keras layers of gpflux_avdgp."""

from ..rules import KLConvention
from .amortized_gp_layer import AmortizedGPLayer
from .anchor_placement import place_anchors
from .base import MixtureLayer
from .gpflux_adapter import SigmaPointGPLayer
from .inference import InferenceKind
from .input_guard import InputGuard
from .likelihood_layer import TrainableLikelihood
from .mixture_likelihood_layer import MixtureLikelihoodLayer
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
