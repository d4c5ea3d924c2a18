"""Amortization rules: from the previous layer's mixture to this layer's locations and inputs.

Given the previous layer's mixture (means ``m_s``, variances ``v_s``, weights ``w_s``,
``[B, S, D]``), a rule produces

* the locations ``F`` ``[B, S, D]`` at which this layer's GP is evaluated, and
* the amortization input ``h`` from which the inference function makes ``Z`` and ``q(u)``:
  ``[B, D]`` (one set of inducing variables per datapoint) or ``[B, S, D]`` (AR1: one per
  sample).

==========  ===============================  ==========================
rule        ``F``                            ``h``
==========  ===============================  ==========================
``ar1``     ``m_s + eps_s sqrt(v_s)``        ``F_s``
``ar2``     ``m_s + eps_s sqrt(v_s)``        ``sum_s w_s m_s`` (= mean)
``ar2p``    ``m_s + xi_s sqrt(v_s)``         ``sum_s w_s m_s``
==========  ===============================  ==========================

``eps`` is drawn independently for every datapoint, component and dimension, from a stateless
Philox generator keyed by ``seed``
(:func:`~gpflux_avdgp.core.random.stateless_standard_normal`), so a run restored from a
checkpoint, or compiled with XLA, draws the same numbers. With ``common_draws=True`` one set of
``S`` draws is shared by all datapoints (common random numbers: prediction is then
deterministic and independent of batching, like the sigma points of AR2P).

When the input mixture has one component (the output of the first layer) it is expanded to
``S`` components; otherwise component ``s`` feeds component ``s`` (paired propagation, as in
DSPP). A
deterministic input (rank-2 tensor) is used as is: ``F = h = x`` with one component, which is
what every rule reduces to at zero variance (the paper's consistency with the first layer).
"""

from __future__ import annotations

import enum
from typing import NamedTuple, Optional

import numpy as np
import tensorflow as tf
from check_shapes import check_shapes

from .checks import check_choice, check_positive_int
from .core.mixture import GaussianMixture
from .core.random import stateless_seed, stateless_standard_normal

__all__ = [
    "PropagationRule",
    "Propagated",
    "SharedPoints",
    "propagate",
]


class PropagationRule(str, enum.Enum):
    """How uncertainty and amortization inputs pass from one layer to the next."""

    AR1 = "ar1"  #: Monte Carlo samples; each sample has its own inducing variables.
    AR2 = "ar2"  #: Monte Carlo samples; inducing variables from the mixture mean.
    AR2P = "ar2p"  #: learnable sigma points and weights (deterministic).

    @property
    def is_sampled(self) -> bool:
        return self is not PropagationRule.AR2P


class SharedPoints(NamedTuple):
    """``F[b, s] = centres[b] + points[s] * scales[b]``: an expanded mixture's locations under
    AR2P or common draws, in factors (:mod:`gpflux_avdgp.core.shared_points`)."""

    centres: tf.Tensor  #: ``[B, D]``, the input mixture's mean
    scales: tf.Tensor  #: ``[B, D]``, its standard deviations
    points: tf.Tensor  #: ``[S, D]``, sigma points or standard-normal draws


class Propagated(NamedTuple):
    """What a GP layer consumes."""

    locations: tf.Tensor  #: ``F``, ``[B, S, D]``
    amortization_input: tf.Tensor  #: ``h``, ``[B, D]``, or ``[B, S, D]`` under AR1
    log_weights: tf.Tensor  #: ``[B, S]``
    #: ``F`` in factored form when its points are shared by all datapoints, else ``None``
    shared_points: Optional[SharedPoints] = None


@check_shapes(
    "mixture.means: [B, S_in, D]",
    "mixture.variances: [B, S_in, D]",
    "mixture.log_weights: [B, S_in]",
    "sigma_points: [S, D]",
    "log_weights: [S]",
    "return.locations: [B, S, D]",
    "return.amortization_input: [B, points..., D]",
    "return.log_weights: [B, S]",
)
def propagate(
    mixture: GaussianMixture,
    rule: PropagationRule,
    *,
    num_points: int,
    sigma_points: Optional[tf.Tensor] = None,
    log_weights: Optional[tf.Tensor] = None,
    seed: Optional[int | tf.Tensor] = None,
    common_draws: bool = False,
    replica: tuple = (0, 1),
) -> Propagated:
    """Apply ``rule`` to a (non-deterministic) input mixture.

    :param mixture: previous layer's output, ``S_in`` components of dimension ``D``.
    :param rule: the amortization rule.
    :param num_points: ``S``, components to produce when ``S_in == 1``; otherwise ``S_in``
        must equal ``num_points`` for AR2P, and ``S = S_in`` for the sampled rules.
    :param sigma_points: ``xi``, ``[S, D]``; required by AR2P.
    :param log_weights: ``[S]`` normalised log weights for an expanded mixture under AR2P (the
        model's shared ``omega``); ignored when the input already has ``S`` components, whose
        weights are kept.
    :param seed: key of the stateless Monte Carlo draws: an int, or a shape-``[2]`` integer
        tensor (e.g. ``[layer seed, step counter]``); ``None`` draws a fresh key from TF's
        global generator on every call.
    :param common_draws: share one set of draws ``[S, D]`` across the datapoints.
    :param replica: ``(replica id, number of replicas)`` under ``tf.distribute``: replica
        ``r`` of ``R`` with a local batch of ``B`` rows takes rows ``r B`` to ``(r + 1) B`` of
        the draws for ``R B`` rows, so data-parallel training draws what one device would for
        the global batch.
    """
    rule = check_choice("rule", rule, PropagationRule)
    num_points = check_positive_int("num_points", num_points)
    means, variances = mixture.means, mixture.variances  # [B, S_in, D]
    num_in = means.shape[1]
    expand = num_in == 1
    if rule is PropagationRule.AR2P:
        if sigma_points is None:
            raise ValueError("sigma_points: required by rule 'ar2p'")
        scale_draws = sigma_points[None, :, :]  # [1, S, D]
    else:
        batch = 1 if common_draws else tf.shape(means)[0]
        count = num_points if expand else tf.shape(means)[1]
        replica_id, num_replicas = (0, 1) if common_draws else replica
        shape = tf.stack([num_replicas * batch, count, tf.shape(means)[2]])
        scale_draws = stateless_standard_normal(
            shape, stateless_seed(seed), means.dtype
        )  # [R B, S, D] ([1, S, D] with common draws)
        if num_replicas != 1:
            scale_draws = scale_draws[replica_id * batch : (replica_id + 1) * batch]  # [B, S, D]
    scales = tf.sqrt(tf.maximum(variances, 0.0))  # [B, S_in, D]
    locations = means + scale_draws * scales  # [B, S, D]
    shared_points = None
    if expand and scale_draws.shape[0] == 1:  # sigma points, or common draws
        shared_points = SharedPoints(means[:, 0], scales[:, 0], scale_draws[0])
    batch_ones = tf.ones_like(means[..., 0]) * tf.ones_like(scale_draws[..., 0])  # [B, S]

    if not expand:
        out_log_weights = mixture.log_weights * tf.ones_like(batch_ones)
    elif rule is PropagationRule.AR2P:
        if log_weights is None:
            raise ValueError("log_weights: required by rule 'ar2p' when expanding a mixture")
        out_log_weights = log_weights[None, :] * batch_ones
    else:
        out_log_weights = -np.log(num_points) * batch_ones

    if rule is PropagationRule.AR1:
        amortization_input = locations
    else:
        amortization_input = mixture.mean()  # [B, D]
    return Propagated(locations, amortization_input, out_log_weights, shared_points)
