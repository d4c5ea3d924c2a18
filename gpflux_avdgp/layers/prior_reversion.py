"""Prior reversion of an amortized GP layer: ``K`` global anchors on the amortization input,
the weight ``a(h)`` that returns ``q(u)`` to the prior where they no longer explain it, the
reach gate, and the anchors' optional global posterior (:mod:`gpflux_avdgp.core.anchors`,
:mod:`gpflux_avdgp.core.orthogonal`; ``docs/maths.md``).

:class:`AmortizedGPLayer` inherits it; the state is the layer's (its weights, in the order the
layer creates them).
"""

from __future__ import annotations

from typing import Optional

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
from ..core.conditionals import amortized_kl
from ..core.orthogonal import anchor_projections, orthogonal_covariances

__all__ = ["PriorReversion", "reach_scale"]


class PriorReversion:
    """The anchors' weights and maths of :class:`~gpflux_avdgp.AmortizedGPLayer` (its
    ``num_anchors``, ``reach_gate``, ``anchor_posterior``, ``full_rank``, ``num_inducing``,
    ``num_data``, ``units`` and ``input_dim``)."""

    def _build_anchors(self) -> None:
        """Create the anchors ``C`` ``[K, D]``, their placement flag, the reach (with the reach
        gate) and the anchors' global posterior (with ``anchor_posterior``); ``None`` without
        anchors."""
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
            if self.anchor_posterior:
                self.anchor_q_mu = self.add_weight(
                    name="anchor_q_mu",
                    shape=(self.num_anchors, self.units),
                    initializer=tf_keras.initializers.Zeros(),
                )  # m_C [K, Q], whitened
                shape = (self.units, self.num_anchors)
                self.anchor_q_sqrt = self.add_weight(
                    name="anchor_q_sqrt",
                    shape=shape + (self.num_anchors,) if self.full_rank else shape,
                    initializer=_identities if self.full_rank else tf_keras.initializers.Ones(),
                )  # R_C [Q, K, K] (lower triangle used) or [Q, K]

    def _orthogonal(self, kernel, points, chol_cc, kuu, kuf, kff) -> tuple:
        """``(C_ZZ, C_ZF, c_FF, B_F)``: the covariances of the part orthogonal to the anchors
        and the anchors' projections of the locations (:mod:`gpflux_avdgp.core.orthogonal`);
        ``points`` ``[N, M + P, D]`` are each datapoint's ``[Z; F]``, ``chol_cc`` is
        ``chol(K_CC)`` ``[K, K]``."""
        shape = tf.shape(points)
        k_c = kernel(self.anchors, tf.reshape(points, [-1, shape[-1]]))  # [K, N (M + P)]
        k_c = tf.reshape(k_c, [self.num_anchors, shape[0], shape[1]])
        b_z, b_f = anchor_projections(chol_cc, k_c, self.num_inducing)
        c_uu, c_uf, c_ff = orthogonal_covariances(kuu, kuf, kff, b_z, b_f)
        return c_uu, c_uf, c_ff, b_f

    def _anchor_weight(
        self,
        kernel: gpflow.kernels.Kernel,
        amortization_input: tf.Tensor,
        chol_cc: Optional[tf.Tensor],
        training: bool,
    ) -> tf.Tensor:
        """``a(h)`` ``[N]`` (``chol_cc``: ``chol(K_CC)`` if the caller has it); in training the
        reach gate's reach follows the batches."""
        weight = anchor_weight(kernel, amortization_input, self.anchors, chol_cc)
        if self.reach_gate is not None:
            distances = nearest_anchor_distance(amortization_input, self.anchors)  # [N]
            reach = self.anchor_reach
            if self._placing_anchors:  # measured on the placement rows
                reach = reach_of(distances, self.anchors)
                self.anchor_reach.assign(reach)
            elif training:  # followed; 0 until measured (anchors placed on this first batch)
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
        elif training and not self._anchors_placed_now():
            rows = every_replicas_rows(amortization_input)  # [B_global, D]
            first = spread_rows(rows, self.num_anchors)  # [K, D]
            self.anchors.assign(tf.where(self.anchors_placed > 0, self.anchors, first))
            self.anchors_placed.assign(1)

    def _anchors_placed_now(self) -> bool:
        """Whether the anchors are placed, read outside any graph being traced: a graph traced
        after the placement has no placement ops (and no order to keep between steps)."""
        with tf.init_scope():
            return bool(self.anchors_placed.numpy())

    def _anchor_sqrt(self) -> tf.Tensor:
        if self.full_rank:
            return tf.linalg.band_part(self.anchor_q_sqrt, -1, 0)
        return self.anchor_q_sqrt

    def _anchor_kl(self) -> tf.Tensor:
        """``KL[q(u_C) || p(u_C)]`` ``[]`` of the anchors' whitened global posterior."""
        sqrt = self._anchor_sqrt()
        eye = tf.eye(self.num_anchors, batch_shape=[1], dtype=sqrt.dtype)  # unused: whitened
        return amortized_kl(eye, self.anchor_q_mu[None], sqrt[None], whiten=True)[0]


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


def _identities(shape, dtype=None):
    """``[Q, K, K]`` identity matrices: the anchors' whitened posterior starts at the prior."""
    return tf.eye(shape[-1], batch_shape=shape[:-2], dtype=dtype)
