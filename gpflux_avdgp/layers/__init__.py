"""Keras layers of gpflux_avdgp."""

from ..inference import InferenceKind
from .amortized_gp_layer import AmortizedGPLayer, KLConvention
from .base import MixtureLayer
from .gpflux_adapter import SigmaPointGPLayer
from .likelihood_layer import TrainableLikelihood

__all__ = [
    "AmortizedGPLayer",
    "InferenceKind",
    "KLConvention",
    "MixtureLayer",
    "SigmaPointGPLayer",
    "TrainableLikelihood",
]
