"""Keras layers of gpflux_avdgp."""

from .amortized_gp_layer import AmortizedGPLayer, InferenceKind
from .base import KLConvention, MixtureLayer
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
