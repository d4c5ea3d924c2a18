"""Prior reversion of an amortized GP layer: ``K`` global anchors on the amortization input,
the weight ``a(h)`` that returns ``q(u)`` to the prior where they no longer explain it, and the
reach gate (:mod:`gpflux_avdgp.core.anchors`; ``docs/maths.md``).

:class:`AmortizedGPLayer` inherits it; the state is the layer's (its weights, in the order the
layer creates them).
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Optional

import gpflow
import tensorflow as tf
from gpflow.keras import tf_keras

from ..core.anchors import (
    REACH_MOMENTUM,
    anchor_weight,
    every_replicas_rows,
    nearest_anchor_distance,
    reach_of,
    reach_weight,
    spread_rows,
)

__all__ = ["PriorReversion", "reach_scale"]


class PriorReversion:
    """The anchors' weights and maths of :class:`~gpflux_avdgp.AmortizedGPLayer` (its
    ``num_anchors``, ``reach_gate``, ``num_data`` and ``input_dim``)."""

    #: True within :meth:`placing_anchors`.
    _placing_anchors: bool = False

    def _build_anchors(self) -> None:
        """Create the anchors ``C`` ``[K, D]``, their placement flag and the reach (with the
        reach gate); ``None`` without anchors."""
        self.anchors, self.anchors_placed = None, None
        if self.num_anchors:
            self.anchors = self.add_weight(
                name="anchors",
                shape=(self.num_anchors, self.input_dim),
                initializer=tf_keras.initializers.Zeros(),
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
            )  # C, [K, D]; placed before training (place_anchors)
            self.anchors_placed = self.add_weight(
                name="anchors_placed",
                shape=(),
                dtype=tf.int64,
                initializer=tf_keras.initializers.Zeros(),
                trainable=False,
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
            )  # 0 until the anchors are placed
            if self.reach_gate is not None:
                self.anchor_reach = self.add_weight(
                    name="anchor_reach",
                    shape=(),
                    initializer=tf_keras.initializers.Zeros(),
                    trainable=False,
                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
                )  # r, set with the anchors, then followed in training

    def _anchor_weight(
        self,
        kernel: gpflow.kernels.Kernel,
        amortization_input: tf.Tensor,
        training: bool,
    ) -> tf.Tensor:
        """``a(h)`` ``[N]``; in training the reach gate's reach follows the batches."""
        weight = anchor_weight(kernel, amortization_input, self.anchors)
        if self.reach_gate is not None:
            distances = nearest_anchor_distance(amortization_input, self.anchors)  # [N]
            reach = self.anchor_reach
            if self._placing_anchors:  # measured on the placement rows
                reach = reach_of(distances, self.anchors)
                self.anchor_reach.assign(reach)
            elif training and self.trainable:  # followed; 0 until measured. A frozen
                # layer (``trainable = False``) keeps its reach, as BatchNormalization its moments
                with tf.name_scope("reach_update"):
                    batch_reach = reach_of(every_replicas_rows(distances), self.anchors)
                    followed = REACH_MOMENTUM * reach + (1.0 - REACH_MOMENTUM) * batch_reach
                    followed = reach if self._reach_kept else followed
                    reach = tf.where(reach > 0, followed, batch_reach)
                    self.anchor_reach.assign(reach)
            weight = tf.minimum(weight, reach_weight(distances, reach, self.reach_gate))
        return weight

    @property
    def _reach_kept(self) -> bool:
        """Whether training keeps the reach measured where the anchors are placed: with no
        more training rows than anchors every row is an anchor, and once training moves the
        anchors a hair off them the rows' distances would be a hair, reverting the layer
        between neighbouring rows."""
        return self.num_data is not None and self.num_data <= self.num_anchors

    def _place_anchors(self, amortization_input: tf.Tensor, training: bool) -> None:
        """Place the anchors on the amortization inputs of a call of
        :func:`~gpflux_avdgp.layers.anchor_placement.place_anchors` (``AVDGPModel.fit`` makes
        one before training); a training graph traced while they are not yet placed places
        them on its first global batch (every replica's rows, so that every replica and one
        device place the same anchors)."""
        if self._placing_anchors:  # eager, inside place_anchors
            self.anchors.assign(spread_rows(amortization_input, self.num_anchors))
            self.anchors_placed.assign(1)
        elif training and not self.anchors_placed_now():
            rows = every_replicas_rows(amortization_input)  # [B_global, D]
            first = spread_rows(rows, self.num_anchors)  # [K, D]
            self.anchors.assign(tf.where(self.anchors_placed > 0, self.anchors, first))
            self.anchors_placed.assign(1)

    def anchors_placed_now(self) -> bool:
        """Whether the anchors are placed, read outside any graph being traced: a graph traced
        after the placement has no placement ops (and no order to keep between steps)."""
        with tf.init_scope():
            return bool(self.anchors_placed.numpy())

    @contextlib.contextmanager
    def placing_anchors(self) -> Iterator[None]:
        """Within it, an eager call places the anchors (and measures the reach) on its
        amortization inputs: :func:`~gpflux_avdgp.layers.anchor_placement.place_anchors`."""
        self._placing_anchors = True
        try:
            yield
        finally:
            self._placing_anchors = False


def reach_scale(scale: Optional[float], num_anchors: int) -> Optional[float]:
    """``reach_gate`` checked: ``None``, or a number ``> 0`` with anchors to measure from."""
    if scale is None:
        return None
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"reach_gate: expected a number or None, got {scale!r}")
    if not (scale > 0 and num_anchors > 0):
        raise ValueError(
            f"reach_gate: expected a scale > 0 with num_anchors > 0, got reach_gate={scale} "
            f"and num_anchors={num_anchors}"
        )
    return float(scale)
