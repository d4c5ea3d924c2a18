"""Keras layers of gpflux_avdgp."""

from ..inference import InferenceKind
from .amortized_gp_layer import AmortizedGPLayer, KLConvention
from .anchor_placement import place_anchors
from .base import MixtureLayer
from .gpflux_adapter import SigmaPointGPLayer
from .likelihood_layer import TrainableLikelihood
from .mixture_readout import MixtureMean, MixtureSample

__all__ = [
    "AmortizedGPLayer",
    "InferenceKind",
    "KLConvention",
    "MixtureLayer",
    "MixtureMean",
    "MixtureSample",
    "SigmaPointGPLayer",
    "TrainableLikelihood",
    "place_anchors",
]
