"""The model: the builder (:func:`build_avdgp`), the Keras model class (:class:`AVDGPModel`)
and GPflux's ``DeepGP`` of our layers (:func:`as_deep_gp`, loaded on first use)."""

from .avdgp_model import AVDGPModel
from .builder import build_avdgp

__all__ = ["AVDGPModel", "as_deep_gp", "build_avdgp"]


def __getattr__(name: str):
    """``as_deep_gp``, imported on first use."""
    if name == "as_deep_gp":
        from .deep_gp import as_deep_gp

        return as_deep_gp
    raise AttributeError(f"module 'gpflux_avdgp.models' has no attribute {name!r}")
