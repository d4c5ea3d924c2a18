"""Adam over one flat vector: Keras' Adam, number for number, in a few ops instead of dozens per
variable.

An amortized deep GP has many small variables (59 in the paper's 3-layer model), and Keras'
Adam updates each on its own in about 24 ops: a third of a training step's ops, each a kernel
launch on a GPU. :class:`FlatAdam` concatenates the gradients of all variables of a float type,
keeps Adam's moments as one vector, updates them once and writes each variable's slice back
(optax's ``flatten``, PyTorch's fused Adam). Sparse gradients, several ``tf.distribute``
replicas and ``use_ema`` are refused in one line naming Keras' Adam.
"""

from __future__ import annotations

import types

import tensorflow as tf
from gpflow.keras import tf_keras

__all__ = ["FlatAdam"]


@tf_keras.utils.register_keras_serializable(package="gpflux_avdgp")
class FlatAdam(tf_keras.optimizers.Adam):
    """Keras' Adam (same arguments, same updates) applied to all variables as one vector.

    Its state is one first and one second moment ``[P]`` per float type (``P`` parameters); a
    model saved with it reloads with it. Variables without a gradient in a step keep their
    values and moments, as with Adam.
    """

    def __init__(self, *args, use_ema: bool = False, **kwargs):
        if use_ema:
            raise ValueError("use_ema: not supported by FlatAdam; use tf_keras.optimizers.Adam")
        super().__init__(*args, **kwargs)

    def build(self, var_list: list[tf.Variable]) -> None:
        """Create the flat moments, one ``[P_dtype]`` vector each per float type.

        :raises ValueError: under a strategy with several replicas.
        """
        tf_keras.optimizers.Optimizer.build(self, var_list)  # the index, not Adam's moments
        if getattr(self, "_built", False):
            return
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        if replicas > 1:
            raise ValueError(
                f"{self.name}: FlatAdam keeps all variables in one vector, which {replicas} "
                "replicas update per variable; use tf_keras.optimizers.Adam under tf.distribute"
            )
        self._built = True
        sizes = [int(variable.shape.num_elements()) for variable in var_list]
        groups: dict[tf.DType, list[int]] = {}  # positions in var_list, per float type
        for index, variable in enumerate(var_list):
            groups.setdefault(variable.dtype.base_dtype, []).append(index)
        moments = {
            dtype: [
                self.add_variable((sum(sizes[i] for i in positions),), dtype, name=name)
                for name in ("m", "v", "vhat")[: 3 if self.amsgrad else 2]
            ]
            for dtype, positions in groups.items()
        }
        # not tracked (the moments are, as the optimizer's variables): checkpoints keep their
        # order, the layout comes from the variables each time
        self._layout = types.SimpleNamespace(sizes=sizes, groups=groups, moments=moments)

    def _distributed_apply_gradients_fn(self, distribution, grads_and_vars, **kwargs):
        given = {
            self._var_key(variable): (gradient, variable) for gradient, variable in grads_and_vars
        }
        keys = list(self._index_dict)
        for dtype, positions in self._layout.groups.items():
            self._update(dtype, positions, [given.get(keys[index]) for index in positions])
        return self.iterations.assign_add(1)

    def _update(self, dtype: tf.DType, positions: list[int], pairs: list) -> None:
        """One Adam update of the variables at ``positions`` (``pairs``: ``(gradient,
        variable)`` or ``None`` for no gradient)."""
        if all(pair is None for pair in pairs):
            return
        gradients = []
        for index, pair in zip(positions, pairs):
            if pair is not None and isinstance(pair[0], tf.IndexedSlices):
                raise ValueError(
                    f"{self.name}: a sparse gradient (tf.IndexedSlices) for {pair[1].name!r}; "
                    "use tf_keras.optimizers.Adam for models with sparse gradients"
                )
            gradient = tf.zeros([self._layout.sizes[index]], dtype) if pair is None else pair[0]
            gradients.append(tf.reshape(tf.cast(gradient, dtype), [-1]))
        gradient = tf.concat(gradients, axis=0)  # [P]
        momentum, velocity = self._layout.moments[dtype][:2]
        step = tf.cast(self.iterations + 1, dtype)
        beta_1_power = tf.pow(tf.cast(self.beta_1, dtype), step)
        beta_2_power = tf.pow(tf.cast(self.beta_2, dtype), step)
        alpha = tf.cast(self.learning_rate, dtype) * tf.sqrt(1 - beta_2_power) / (1 - beta_1_power)
        epsilon = (
            self.epsilon * tf.sqrt(1 - beta_2_power) if self.adaptive_epsilon else self.epsilon
        )
        new_momentum = momentum + (gradient - momentum) * (1 - self.beta_1)
        new_velocity = velocity + (tf.square(gradient) - velocity) * (1 - self.beta_2)
        if None in pairs:  # variables without a gradient keep their moments, as in Adam
            keep = tf.concat(
                [tf.fill([self._layout.sizes[i]], p is None) for i, p in zip(positions, pairs)],
                axis=0,
            )
            new_momentum = tf.where(keep, momentum, new_momentum)
            new_velocity = tf.where(keep, velocity, new_velocity)
        momentum.assign(new_momentum)
        velocity.assign(new_velocity)
        if self.amsgrad:
            new_velocity = self._layout.moments[dtype][2].assign(
                tf.maximum(self._layout.moments[dtype][2], new_velocity)
            )
        updates = (new_momentum * alpha) / (tf.sqrt(new_velocity) + epsilon)  # [P]
        for update, pair in zip(
            tf.split(updates, [self._layout.sizes[i] for i in positions]), pairs
        ):
            if pair is not None:
                pair[1].assign_sub(tf.reshape(update, tf.shape(pair[1])))
