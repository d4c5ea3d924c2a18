"""The model: the builder (:func:`build_avdgp`), the Keras model class (:class:`AVDGPModel`)
and GPflux's ``DeepGP`` of our layers (:func:`as_deep_gp`)."""

from .avdgp_model import AVDGPModel
from .builder import build_avdgp
from .deep_gp import as_deep_gp

__all__ = ["AVDGPModel", "as_deep_gp", "build_avdgp"]
