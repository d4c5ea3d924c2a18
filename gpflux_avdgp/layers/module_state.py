"""Save GPflow parameters held by a layer in the ``.keras`` weights store.

``tf_keras``' ``.keras`` format stores only the variables a layer created with ``add_weight``
(and recurses into sub-layers), so GPflow modules held as attributes (kernels, mean functions,
likelihoods) would silently reload at their initial values. Layers that hold such modules mix
this in and list them in :meth:`_gpflow_modules`. A variable that a sub-layer also stores as
its own weight (a wrapped GPflux layer's ``q_mu``, ``q_sqrt``) is stored twice with the same
value, and loading assigns it twice; the TensorFlow SavedModel format restores all of them
through the checkpoint's object graph instead.

A kernel or mean-function object belongs to one layer (:func:`claim_module`): a layer's config
describes its own modules, so an object shared by two layers would reload as two.
"""

from __future__ import annotations

import weakref

import gpflow
import tensorflow as tf
from gpflow.keras import tf_keras

__all__ = ["GPflowModuleState", "claim_module"]


class GPflowModuleState:
    """Mixin for ``tf_keras`` layers: append GPflow module variables to the layer's state."""

    def _gpflow_modules(self) -> list[tf.Module]:
        """The GPflow modules whose variables belong to this layer's saved state."""
        return []

    def _state_variables(self) -> list[tf.Variable]:
        own = list(self._trainable_weights) + list(self._non_trainable_weights)
        seen = {id(v) for v in own}
        for module in self._gpflow_modules():
            for variable in module.variables:  # deterministic (sorted by attribute) order
                if id(variable) not in seen:
                    seen.add(id(variable))
                    own.append(variable)
        return own

    def save_own_variables(self, store) -> None:
        for index, variable in enumerate(self._state_variables()):
            store[f"{index}"] = variable.numpy()

    def load_own_variables(self, store) -> None:
        variables = self._state_variables()
        if len(store.keys()) != len(variables):
            raise ValueError(
                f"{self.name}: the saved state has {len(store.keys())} variables, the layer has "
                f"{len(variables)}; the file does not match this model's configuration"
            )
        for index, variable in enumerate(variables):
            variable.assign(store[f"{index}"])


#: The built layer that holds each kernel and mean-function object.
_HOLDERS: "weakref.WeakKeyDictionary[tf.Module, weakref.ref]" = weakref.WeakKeyDictionary()


def claim_module(module: tf.Module, layer: tf_keras.layers.Layer) -> None:
    """Record ``layer`` as the holder of ``module``.

    :raises ValueError: if another live layer holds it: a shared object would reload as two
        (a layer's config describes its own modules), so sharing is refused before training.
    """
    owner = _HOLDERS.get(module)
    holder = None if owner is None else owner()
    if holder is not None and holder is not layer:
        kind = "kernel" if isinstance(module, gpflow.kernels.Kernel) else "mean function"
        raise ValueError(
            f"{layer.name}: its {kind} object is also layer {holder.name!r}'s; a shared object "
            "cannot be saved (it reloads as two): give each layer its own, e.g. "
            "gpflow.utilities.deepcopy(kernel)"
        )
    _HOLDERS[module] = weakref.ref(layer)
