"""Base class of the layers that read and write packed Gaussian mixtures.

It owns what every mixture-propagating GP layer shares: the amortization rule, the number of
components, the learnable sigma points (AR2P), the model's sigma-point weights (created by the
layer that first expands a one-component mixture), input checks, and how the layer's KL term
is added to the Keras loss.
"""

from __future__ import annotations

import abc
from typing import Optional

import gpflow
import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from ..checks import (
    check_choice,
    check_optional_positive_int,
    check_positive_int,
    checked_finite,
)
from ..core.mixture import GaussianMixture, mixture_width_to_dim, to_mixture
from ..propagation import Propagated, PropagationRule, propagate
from .module_state import GPflowModuleState
from .readers import check_mixture_readers, refuse_gpflux_reader

__all__ = [
    "MixtureLayer",
    "DEFAULT_NUM_POINTS",
    "NON_FINITE_MESSAGE",
    "add_draw_counter",
    "translate_legacy_points",
]

#: Components created from a one-component mixture when ``num_points`` is not given (paper).
DEFAULT_NUM_POINTS = 32
#: Message of the error a layer raises when its output or gradient is not finite.
NON_FINITE_MESSAGE = "non-finite values (NaN or inf) in the layer output"


def _replica_position() -> tuple:
    """``(replica id, number of replicas)`` of the current ``tf.distribute`` replica."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return (0, 1)
    return (context.replica_id_in_sync_group, context.num_replicas_in_sync)


def translate_legacy_points(config: dict) -> dict:
    """A layer config of version 0.1 files in today's words, with the same components.

    0.1 trained with ``num_points`` components (default 1 for AR1, 32 otherwise) and predicted
    AR1/AR2 with ``num_predict_points`` (default 32 for AR1, the training count for AR2); today
    ``num_points`` is ``S`` and ``num_train_samples`` AR1/AR2's training samples.
    """
    if "num_predict_points" not in config:
        return config
    config = dict(config)
    train, predict = config.get("num_points"), config.pop("num_predict_points")
    rule = str(config.get("rule", "ar2p")).lower()
    if rule == "ar1":
        config["num_points"], config["num_train_samples"] = predict, train
    elif rule == "ar2":
        train = train or (DEFAULT_NUM_POINTS if predict is not None else None)
        config["num_points"], config["num_train_samples"] = predict or train, train
    return config


def add_draw_counter(layer: tf_keras.layers.Layer) -> tf.Variable:
    """The layer's count of training draws so far (int64, not trained, saved with the model):
    it keys the stateless Monte Carlo draws, so a restored run draws the same numbers."""
    return layer.add_weight(
        name="draw_counter",
        shape=(),
        dtype=tf.int64,
        initializer=tf_keras.initializers.Zeros(),
        trainable=False,
        aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
    )


class MixtureLayer(GPflowModuleState, tf_keras.layers.Layer, metaclass=abc.ABCMeta):
    """A GP layer whose input and output are packed mixtures (see :mod:`gpflux_avdgp.core.mixture`).

    Subclasses implement :meth:`_components`, mapping the propagated locations to the
    per-component means and variances of their outputs and the layer's loss term.

    :param units: ``Q``, output dimension.
    :param rule: amortization rule, ``"ar1"``, ``"ar2"`` or ``"ar2p"`` (AR2PP is AR2P with the
        predictive objective: choose it in :class:`~gpflux_avdgp.AVDGPLoss`).
    :param num_points: ``S``, the components this layer creates when its input mixture has one
        component (the output of a first layer): AR2P's sigma points, or the Monte Carlo
        samples AR1/AR2 predict with; default 32 (the paper's). A layer whose input already has
        ``S`` components keeps them (paired propagation) and may leave this unset. The same
        word, with the same meaning, as :func:`~gpflux_avdgp.build_avdgp`'s.
    :param num_train_samples: the Monte Carlo samples AR1/AR2 train with; default 1 for AR1
        (the paper: "S can be as small as 1 when we train with stochastic gradient
        optimizers") and ``num_points`` for AR2. AR2P has no samples.
    :param seed: seed for initialisers and Monte Carlo draws.
    :param noise_seed: key of the Monte Carlo draws of AR1/AR2 (default ``seed``, or drawn
        from NumPy's global generator when ``seed`` is ``None``; saved in the config). Draws
        are stateless: training draw ``t`` uses the key ``[noise_seed, t]``, with ``t`` a
        saved step counter (the ``draw_counter`` weight), so a model restored from a
        checkpoint continues with the same draws; prediction uses the fixed key
        ``[noise_seed, 0]`` and one set of draws shared by all datapoints (deterministic).
    """

    #: Reads a packed mixture (see :func:`check_mixture_readers`).
    reads_mixture: bool = True

    units: int
    """``Q``, the output dimension."""

    rule: PropagationRule
    """The amortization rule the layer propagates its input mixture with."""

    num_points: Optional[int]
    """``S`` as given (``None``: the default, 32); see the parameter."""

    num_train_samples: Optional[int]
    """AR1/AR2's training samples as given (``None``: the default); see the parameter."""

    seed: Optional[int]
    """Seed of the initialisers (and of the draws, unless ``noise_seed`` is given)."""

    noise_seed: int
    """Key of the stateless Monte Carlo draws of AR1/AR2."""

    input_dim: int
    """``D``, the input width; set by :meth:`build`."""

    input_components: Optional[int]
    """The input mixture's components ``S_in`` (``None`` for a deterministic ``[B, D]``
    input; ``1`` when this layer expands the mixture); set by :meth:`build`."""

    sigma_points: Optional[tf.Variable]
    """AR2P's sigma points ``xi`` ``[S, D]``, applied to the input mixture; created by
    :meth:`build` (``None`` for the sampled rules and for a deterministic input)."""

    weight_logits: Optional[tf.Variable]
    """Logits of the model's sigma-point weights ``omega`` ``[S]``; created by the
    :meth:`build` of the layer that expands a one-component mixture under AR2P, else ``None``."""

    draw_counter: Optional[tf.Variable]
    """AR1/AR2's count of training draws (int64, saved with the model, keys the draws);
    created by :meth:`build` for a mixture input, else ``None``."""

    def __init__(
        self,
        units: int,
        *,
        rule: str | PropagationRule = PropagationRule.AR2P,
        num_points: Optional[int] = None,
        num_train_samples: Optional[int] = None,
        seed: Optional[int] = None,
        noise_seed: Optional[int] = None,
        **kwargs,
    ):
        kwargs.setdefault("dtype", gpflow.default_float())
        super().__init__(**kwargs)
        self.units = check_positive_int("units", units)
        if isinstance(rule, str) and rule.lower() == "ar2pp":
            raise ValueError(
                "rule: 'ar2pp' is AR2P trained with the predictive objective; use rule='ar2p' "
                "here and AVDGPLoss(..., objective='predictive')"
            )
        self.rule = check_choice("rule", rule, PropagationRule)
        self.num_points = check_optional_positive_int("num_points", num_points)
        self.num_train_samples = check_optional_positive_int("num_train_samples", num_train_samples)
        if self.rule is PropagationRule.AR2P and self.num_train_samples is not None:
            raise ValueError(
                f"num_train_samples: rule 'ar2p' has no samples (its sigma points are "
                f"num_points), got {self.num_train_samples}"
            )
        self.seed = seed
        if noise_seed is None:
            noise_seed = seed if seed is not None else int(np.random.randint(2**31 - 1))
        if not isinstance(noise_seed, (int, np.integer)) or isinstance(noise_seed, bool):
            raise TypeError(f"noise_seed: expected an int, got {noise_seed!r}")
        self.noise_seed = int(noise_seed)

    # ---------------------------------------------------------------- build and inputs
    def build(self, input_shape: tf.TensorShape) -> None:
        input_shape = tf.TensorShape(input_shape)
        rank = input_shape.rank
        if rank in (2, 3) and input_shape[-1] is None:
            raise ValueError(
                f"{self.name}: the input width is unknown (shape {input_shape}); give it to the "
                "model's input, e.g. tf_keras.Input((D,)) or gpflux.models.DeepGP(..., "
                "input_dim=D)"
            )
        if rank == 2:
            self.input_dim = int(input_shape[-1])
            self.input_components: Optional[int] = None  # deterministic input
            self.input_spec = tf_keras.layers.InputSpec(ndim=2, axes={-1: self.input_dim})
        elif rank == 3:
            self.input_dim = mixture_width_to_dim(int(input_shape[-1]))
            self.input_components = input_shape[1]
            axes = {-1: int(input_shape[-1])}
            if self.rule is PropagationRule.AR2P and self.input_components is not None:
                axes[1] = int(self.input_components)  # the sigma points fix the components
            self.input_spec = tf_keras.layers.InputSpec(ndim=3, axes=axes)
        else:
            raise ValueError(
                f"{self.name}: expected input of rank 2 [batch, features] or a rank-3 packed "
                f"mixture [batch, components, 2 * D + 1], got shape {input_shape}"
            )
        self._build_sigma_points()
        self.draw_counter = None
        if self.rule.is_sampled and self.input_components is not None:
            self.draw_counter = add_draw_counter(self)
        super().build(input_shape)

    @property
    def expands(self) -> bool:
        """Whether this layer turns a one-component mixture into ``S`` components."""
        return self.input_components == 1

    def _resolved_num_points(self, training: bool) -> int:
        """The components an expanding layer creates: ``num_points``, or AR1/AR2's
        ``num_train_samples`` while training."""
        points = self.num_points or DEFAULT_NUM_POINTS
        if not training or self.rule is PropagationRule.AR2P:
            return points
        default = 1 if self.rule is PropagationRule.AR1 else points
        return self.num_train_samples or default

    def _build_sigma_points(self) -> None:
        """Create ``xi`` ``[S, D]`` (AR2P on a mixture input) and ``omega`` (when expanding)."""
        self.sigma_points = None
        self.weight_logits = None
        if self.rule is not PropagationRule.AR2P or self.input_components is None:
            return
        if self.expands:
            count = self.num_points or DEFAULT_NUM_POINTS
        else:
            count = self.input_components
            if count is None:
                raise ValueError(
                    f"{self.name}: rule 'ar2p' needs a static number of input components"
                )
            if self.num_points is not None and self.num_points != count:
                raise ValueError(
                    f"num_points: layer {self.name!r} receives {count} sigma points from the "
                    f"previous layer, got num_points={self.num_points}"
                )
        rng = np.random.default_rng(self.seed)
        self.sigma_points = self.add_weight(
            name="sigma_points",
            shape=(count, self.input_dim),
            initializer=tf_keras.initializers.Constant(
                rng.standard_normal((count, self.input_dim)).tolist()
            ),
        )  # xi, [S, D]
        if self.expands:
            self.weight_logits = self.add_weight(
                name="sigma_point_logits",
                shape=(count,),
                initializer=tf_keras.initializers.Zeros(),
            )  # omega = softmax(logits), [S], shared by all later layers

    def _propagate(self, inputs: tf.Tensor, training: bool) -> Propagated:
        """Locations, amortization input and log weights for this layer."""
        if self.input_components is None:  # deterministic input
            return Propagated(
                locations=inputs[:, None, :],
                amortization_input=inputs,
                log_weights=tf.zeros_like(inputs[:, :1]),
            )
        mixture = to_mixture(inputs)
        log_weights = None if self.weight_logits is None else tf.nn.log_softmax(self.weight_logits)
        return propagate(
            mixture,
            self.rule,
            num_points=self._resolved_num_points(training),
            sigma_points=self.sigma_points,
            log_weights=log_weights,
            seed=self._draw_key(training),
            common_draws=not training,
            replica=_replica_position(),
        )

    def _draw_key(self, training: bool) -> Optional[tf.Tensor]:
        """``[noise_seed, t]``: ``t`` counts training calls (advanced here); 0 at prediction."""
        if self.draw_counter is None:
            return None
        step = self.draw_counter.assign_add(1) if training else tf.zeros([], tf.int64)
        return tf.stack([tf.constant(self.noise_seed, tf.int64), step])

    # ---------------------------------------------------------------- call
    @abc.abstractmethod
    def _components(
        self, propagated: Propagated, training: bool
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """Return ``(means [B, S, Q], variances [B, S, Q], loss_term [])``."""

    @tf.autograph.experimental.do_not_convert  # no control flow on tensors: traced as written
    def call(
        self, inputs: tf.Tensor, training: Optional[bool] = None, gate: Optional[tf.Tensor] = None
    ) -> tf.Tensor:
        """Evaluate the layer on a packed mixture (or a deterministic ``[B, D]`` input).

        ``gate`` ``[B]`` in ``[0, 1]`` caps the prior-reversion weight of each datapoint (an
        :class:`~gpflux_avdgp.AmortizedGPLayer` with anchors only; the model's
        :class:`~gpflux_avdgp.layers.input_guard.InputGuard` passes its gate on ``x``).

        Adds the layer's KL term with ``add_loss`` (an :class:`~gpflux_avdgp.AVDGPModel` logs
        the sum over its GP layers as ``kl``).

        :returns: packed mixture ``[B, S, 2 Q + 1]``.
        :raises ValueError: if a layer of the model that does not read mixtures reads the
            output (see :func:`check_mixture_readers`).
        :raises tf.errors.InvalidArgumentError: (outside XLA) if the output, or its gradient in
            the backward pass, holds NaN or inf; the message names the layer.
        """
        training = bool(training)
        check_mixture_readers(self)
        if inputs.shape.rank == 2:  # a deterministic input: the data, or features of it
            inputs = checked_finite(inputs, f"the inputs x of {self.name}")
        with tf.name_scope("propagate"):
            propagated = self._propagate(inputs, training)
        if gate is None:
            means, variances, loss_term = self._components(propagated, training)
        else:
            means, variances, loss_term = self._components(propagated, training, gate=gate)
        self.add_loss(loss_term)
        packed = GaussianMixture(means, variances, propagated.log_weights).pack()
        # Stops a step whose output (or, in the backward pass, whose gradient) is NaN or inf
        # before the optimizer applies it, naming this layer. XLA compiles this to a no-op.
        packed = tf.debugging.check_numerics(packed, f"{self.name}: {NON_FINITE_MESSAGE}")
        refuse_gpflux_reader(packed, self, "a Gaussian mixture [batch, components, 2 * D + 1]")
        return packed

    def compute_output_shape(self, input_shape: tf.TensorShape) -> tf.TensorShape:
        input_shape = tf.TensorShape(input_shape)
        components = 1 if input_shape.rank == 2 else input_shape[1]
        if components == 1 and input_shape.rank == 3:
            components = self._resolved_num_points(training=False)
        return tf.TensorShape([input_shape[0], components, 2 * self.units + 1])

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            units=self.units,
            rule=self.rule.value,
            num_points=self.num_points,
            num_train_samples=self.num_train_samples,
            seed=self.seed,
            noise_seed=self.noise_seed,
        )
        return config
