"""A GPflow module whose parameters are read once per layer call, not once per use.

Reading a positive ``gpflow.Parameter`` applies its bijector (six ops forward, as many
backward), and a layer evaluates its kernel up to six times per call (``K_uu``, ``K_uf``,
``k_ff``, the anchors' ``K_CC``, ``k(h, C)``, ``k(h, h)``). :func:`read_once` returns a view of
the module, of its class, whose parameters are tensors read once: GPflow's own methods then
compute what they compute on the module, and gradients flow to its variables.
"""

from __future__ import annotations

import gpflow
import tensorflow as tf

__all__ = ["read_once"]


def read_once(module: gpflow.base.Module) -> gpflow.base.Module:
    """A view of ``module`` with every parameter read now, for one call of a layer.

    A shallow copy of the module's attributes with each ``gpflow.Parameter`` replaced by its
    value and each sub-module (parts of a sum or product kernel) by its view; it does not
    follow later assignments to the module's variables.

    :param module: a GPflow kernel or mean function.
    """
    view = object.__new__(type(module))
    view.__dict__.update({name: _read(value) for name, value in vars(module).items()})
    return view


def _read(value):
    if isinstance(value, gpflow.Parameter):
        return tf.convert_to_tensor(value)
    if isinstance(value, gpflow.base.Module):
        return read_once(value)
    if isinstance(value, (list, tuple)) and any(isinstance(v, gpflow.base.Module) for v in value):
        return [_read(v) for v in value]
    return value
