"""Who reads our layers' outputs: a reader that does not know them is refused in one line.

A GP layer of ours outputs a packed Gaussian mixture ``[B, S, 2 D + 1]``; the model's last
layer, :class:`~gpflux_avdgp.TrainableLikelihood`, outputs the mean of ``y`` carrying the
predictive distribution. Two kinds of reader would read them wrong:

- a Keras layer of the model after a GP layer that reads the mixture as features, or any layer
  after the likelihood layer (found in Keras' record of the model's graph at the first call:
  :func:`check_mixture_readers`, :func:`check_no_reader_after_likelihood`);
- GPflux's ``LikelihoodLayer`` and ``LikelihoodLoss``, which read one Gaussian ``q(f)`` per row
  through ``gpflux.types.unwrap_dist`` (its ``tensor_distribution`` protocol, from tfp's
  layers): our outputs carry a ``tensor_distribution`` that raises a ``ValueError`` naming the
  fix when GPflux reads it (:func:`refuse_gpflux_reader`).

GPflux's ``DeepGP`` with its own likelihood layer builds its Keras graph on placeholders,
where neither guard sees it: GPflux then fails on its own ``AssertionError`` or a shape error.
The supported route is :func:`~gpflux_avdgp.as_deep_gp` (finding the calling ``DeepGP`` on
the Python stack was retired: a refusal that needs the caller's frame is not worth its cost).
None of this changes a GPflux class; ``docs/design.md`` records the alternatives.
"""

from __future__ import annotations

import gpflux
import tensorflow as tf
from gpflow.keras import tf_keras

__all__ = [
    "check_mixture_readers",
    "check_no_reader_after_likelihood",
    "mixture_reader_fix",
    "refuse_gpflux_reader",
]

#: The fix for a model that feeds our output to GPflux's likelihood layer or loss.
GPFLUX_LIKELIHOOD_FIX = (
    "build the DeepGP with gpflux_avdgp.as_deep_gp(f_layers, likelihood), or end a Sequential "
    "with gpflux_avdgp.TrainableLikelihood(likelihood) and compile with gpflux_avdgp.AVDGPLoss()"
)


def mixture_reader_fix(reader: tf_keras.layers.Layer) -> str:
    """What to do about ``reader``, a layer that cannot read the packed mixture it is given:
    wrap a GPflux ``GPLayer``, replace GPflux's ``LikelihoodLayer``, else read the mixture's
    mean or a sample first."""
    if isinstance(reader, gpflux.layers.GPLayer):
        return "wrap it: gpflux_avdgp.SigmaPointGPLayer(gp_layer)"
    if isinstance(reader, gpflux.layers.LikelihoodLayer):
        return GPFLUX_LIKELIHOOD_FIX
    return "put gpflux_avdgp.MixtureMean() or MixtureSample() between them"


def check_mixture_readers(layer: tf_keras.layers.Layer) -> None:
    """Refuse a layer of the model that reads ``layer``'s packed mixture but does not know it.

    The readers are found in Keras' record of the model's graph (``outbound_nodes``, filled
    by ``Sequential`` and Functional models before the layer is first called on data); a
    reader knows the mixture if its class sets ``reads_mixture = True`` (the package's layers
    do; a layer of your own that unpacks the mixture may too).

    :raises ValueError: naming both layers and the fix (:func:`mixture_reader_fix`).
    """
    for node in layer.outbound_nodes:
        reader = node.layer
        if not getattr(reader, "reads_mixture", False):
            raise ValueError(
                f"{reader.name}: a {type(reader).__name__} reads the packed mixture [batch, "
                f"components, 2 * D + 1] of {layer.name!r} as features; "
                + mixture_reader_fix(reader)
            )


def check_no_reader_after_likelihood(layer: tf_keras.layers.Layer) -> None:
    """Refuse a layer that reads the likelihood layer's output (it would read the mean of ``y``
    and drop the distribution the loss needs)."""
    for node in layer.outbound_nodes:
        reader = node.layer
        raise ValueError(
            f"{reader.name}: a {type(reader).__name__} follows {layer.name!r}, whose output is "
            "the predictive distribution of y (the loss reads it); end the model with the "
            "TrainableLikelihood"
        )


class _RefusedByGPflux:
    """What ``gpflux.types.unwrap_dist`` finds on our output: reading the distribution inside
    raises the message (GPflux asks with ``getattr(..., None)``, which lets it through)."""

    def __init__(self, message: str):
        self._message = message

    @property
    def tensor_distribution(self):
        raise ValueError(self._message)


def refuse_gpflux_reader(
    outputs: tf.Tensor, layer: tf_keras.layers.Layer, what: str, fix: str = GPFLUX_LIKELIHOOD_FIX
) -> None:
    """Make GPflux's ``LikelihoodLayer`` and ``LikelihoodLoss`` refuse ``outputs`` of ``layer``
    in one line naming ``fix``, where they would otherwise read ``what`` as samples of ``f``
    (a wrong number: a Sequential compiled with ``LikelihoodLoss`` trains on it silently)."""
    outputs.tensor_distribution = _RefusedByGPflux(
        f"{layer.name}: GPflux reads one Gaussian q(f) per row, but this layer outputs {what}; "
        + fix
    )
