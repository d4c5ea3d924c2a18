"""A defensive mixture off the data: a sparse GP on the raw input takes a share of the
prediction where ``x`` leaves the training data.

An amortized deep GP's hidden layers can fold an input that lies in a gap of the data, or
shifted beyond it, back onto the training features, so no layer's reach gate sees that it left
(``docs/uncertainty.md``). The guard measures the distance where it is kept, on ``x`` itself:
``K`` fixed anchors ``C`` (training rows spread over the data) and their reach ``r`` (the 0.99
quantile of the training rows' nearest-anchor distance, :func:`~gpflux_avdgp.core.anchors.
reach_of`) give the gate ``a_x = reach_weight(d(x), r, s)``, lowered beyond the training
rows' range along any one input (:func:`~gpflux_avdgp.core.anchors.range_weight`: a shift along
one of many inputs hardly moves the nearest-anchor distance), and the model predicts

    p(y | x) = (1 - w) p_AVDGP(y | x) + w p_SVGP(y | x),   w = (1 - a_x)(1 - beta),

with an SVGP on ``x`` (a GPflux ``GPLayer``: global inducing points, whose variance grows in a
gap as a GP's does) trained on its own ELBO beside the model. Within the reach (``a_x = 1``)
the prediction is the AVDGP's; where ``a_x = 0`` its log density is at least the SVGP's plus
``log(1 - beta)``. The mixture is one more component of the packed mixture of ``f``, so the
likelihood layer, ``predict``, :func:`~gpflux_avdgp.predict_mixture` and the export read it
unchanged. ``docs/design.md`` ("A defensive mixture off the data") records the measurements.
"""

from __future__ import annotations

import gpflow
import gpflux
import numpy as np
import tensorflow as tf
from check_shapes import check_shapes
from gpflow.keras import tf_keras

from ..checks import check_positive_int
from ..core.anchors import (
    REACH_MOMENTUM,
    REACH_QUANTILE,
    every_replicas_rows,
    nearest_anchor_distance,
    range_weight,
    reach_of,
    reach_weight,
    spread_rows,
)
from ..core.mixture import GaussianMixture
from ..gpflow_config import likelihood_from_config, likelihood_to_config
from ..predictive import PredictiveDistribution
from ..rules import Objective
from .gpflux_config import (
    gp_layer_from_config,
    gp_layer_modules,
    gp_layer_to_config,
    use_mean_field,
)
from .module_state import GPflowModuleState

__all__ = ["InputGuard", "VARIANCE_GATE_LIMIT", "guard_gp_layer"]

#: The variance gate acts while the SVGP explains at least half of the prior variance on 99 %
#: of its training rows (``rho_r <= 0.5``): measured 0.0005-0.0025 on the 1-D and 2-D problems,
#: 0.56-0.97 on six UCI sets of 8-18 inputs, where it would gate 2-5 % of held-in rows and
#: cost elevators 11 % of its in-data RMSE (``docs/design.md``).
VARIANCE_GATE_LIMIT = 0.5


def guard_gp_layer(
    input_dim: int,
    output_dim: int,
    num_inducing: int,
    num_data: int,
    train_kernel: bool = True,
    mean_field: bool = False,
) -> gpflux.layers.GPLayer:
    """The guard's SVGP: a GPflux ``GPLayer`` with a Matérn-5/2 kernel shared by the outputs
    and ``num_inducing`` shared inducing points (placed on training rows with the anchors,
    :meth:`InputGuard.place`).

    :param input_dim: ``D``.
    :param output_dim: ``Q``, the model's latent outputs.
    :param num_inducing: ``M``.
    :param num_data: ``N``, scales its KL term.
    :param train_kernel: train the kernel's lengthscale and variance; ``False`` keeps GPflow's
        defaults (1 and 1, on standardised inputs and targets) and spares the step their
        gradients through ``chol(K_uu)``.
    :param mean_field: a mean-field ``q(u)`` (:func:`~.gpflux_config.use_mean_field`) instead of
        GPflux's full Cholesky factor.
    """
    kernel = gpflux.helpers.construct_basic_kernel(
        gpflow.kernels.Matern52(), output_dim=output_dim, share_hyperparams=True
    )
    inducing = gpflux.helpers.construct_basic_inducing_variables(
        num_inducing,
        input_dim,
        output_dim=output_dim,
        share_variables=True,
        z_init=np.zeros((num_inducing, input_dim)),
    )
    layer = gpflux.layers.GPLayer(
        kernel,
        inducing,
        num_data=num_data,
        num_latent_gps=output_dim,
        mean_function=gpflow.mean_functions.Zero(),
        name="guard_svgp",
        verbose=False,
    )
    gpflow.set_trainable(layer.kernel, train_kernel)
    return use_mean_field(layer) if mean_field else layer


@tf_keras.utils.register_keras_serializable(package="gpflux_avdgp")
class InputGuard(GPflowModuleState, tf_keras.layers.Layer):
    """The model's guard off the data (module docstring): anchors on ``x``, an SVGP on ``x``
    with its own copy of the likelihood, and the share ``w(x)`` it takes of the prediction.

    An :class:`~gpflux_avdgp.AVDGPModel` holds it (``build_avdgp(guard=True)``), places it with
    the anchors before ``fit``, trains it on its ELBO in every step and mixes it into the
    prediction; ``training=True`` calls leave the model's mixture as it is.

    :param svgp: the guard's SVGP, a GPflux ``GPLayer`` (:func:`guard_gp_layer`), read with
        its ``predict`` (its marginals at ``x``).
    :param likelihood: the guard's own likelihood (a copy of the model's: the guard's ELBO
        does not move the model's noise).
    :param input_dim: ``D``, the model's input width.
    :param num_anchors: ``K``, fixed anchors on ``x``; well below ``N`` (with most rows as
        anchors, held-in rows fall beyond the reach).
    :param keep: ``beta``, the AVDGP's share where ``a_x = 0``.
    :param scale: ``s`` of the reach gate (:func:`~gpflux_avdgp.core.anchors.reach_weight`).
    :param variance_gate: also lower ``a_x`` where the SVGP's own variance is beyond its
        training rows' (:meth:`gate`): a hole in the data that the anchors' reach spans; acts
        only where the SVGP knows the data (:data:`VARIANCE_GATE_LIMIT`).
    :param range_gate: also lower ``a_x`` beyond the training rows' range along any one
        input (:func:`~gpflux_avdgp.core.anchors.range_weight`, scale ``s`` in that input's
        standard deviations): a shift along one input, which the nearest-anchor distance of
        many inputs hardly sees. The range is the placement rows', widened in training to
        every batch's.
    :param train_every: train the SVGP, its likelihood and ``rho_r`` in every
        ``train_every``-th step only (:meth:`training_gradients`); the range widens in every
        step. Under a strategy of several replicas, only without the variance gate.
    """

    def __init__(
        self,
        svgp: gpflux.layers.GPLayer,
        likelihood: gpflow.likelihoods.Likelihood,
        *,
        input_dim: int,
        num_anchors: int = 128,
        keep: float = 0.2,
        scale: float = 0.5,
        variance_gate: bool = True,
        range_gate: bool = True,
        train_every: int = 1,
        **kwargs,
    ):
        if not isinstance(svgp, gpflux.layers.GPLayer):
            raise TypeError(f"svgp: expected a GPflux GPLayer (guard_gp_layer), got {svgp!r}")
        if not isinstance(likelihood, gpflow.likelihoods.Likelihood):
            raise TypeError(f"likelihood: expected a GPflow likelihood, got {likelihood!r}")
        if not 0.0 <= keep < 1.0 or not scale > 0.0:
            raise ValueError(
                f"keep, scale: expected 0 <= keep < 1 and scale > 0, got {keep}, {scale}"
            )
        kwargs.setdefault("dtype", gpflow.default_float())
        super().__init__(**kwargs)
        self.svgp = svgp
        self.likelihood = likelihood
        self.input_dim = check_positive_int("input_dim", input_dim)
        self.num_anchors = check_positive_int("num_anchors", num_anchors)
        self.keep = float(keep)
        self.scale = float(scale)
        self.variance_gate = bool(variance_gate)
        self.range_gate = bool(range_gate)
        self.train_every = check_positive_int("train_every", train_every)
        self.anchors = self.add_weight(
            name="anchors", shape=(self.num_anchors, self.input_dim), initializer="zeros",
            trainable=False,
        )  # fmt: skip
        #: 0 until placed: the gate is then 1 everywhere and the guard takes no share
        self.reach = self.add_weight(name="reach", shape=(), initializer="zeros", trainable=False)
        #: the training rows' range [lower, upper] per input: placed, then widened to every
        #: training batch's
        self.lower, self.upper = (
            self.add_weight(
                name=name, shape=(self.input_dim,), initializer="zeros", trainable=False,
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,  # assigned in the step
            )
            for name in ("lower", "upper")
        )  # fmt: skip
        #: the training rows' standard deviation per input, placed (0 until then: no range gate)
        self.spread = self.add_weight(
            name="spread", shape=(self.input_dim,), initializer="zeros", trainable=False
        )
        #: rho_r, 0 until measured in training (the variance gate is then 1)
        self.variance_reach = self.add_weight(
            name="variance_reach",
            shape=(),
            initializer="zeros",
            trainable=False,
            aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,  # assigned in the step
        )
        self.built = True

    def _gpflow_modules(self) -> list[tf.Module]:
        return [self.likelihood, *gp_layer_modules(self.svgp)]

    @property
    def placed(self) -> bool:
        """Whether the anchors, their reach and the inducing points are placed (eagerly)."""
        return bool(self.reach.numpy() > 0)

    def place(self, inputs: tf.Tensor) -> None:
        """Place the anchors and the SVGP's inducing points on rows spread over ``inputs``
        ``[N, D]`` (training rows, :func:`~gpflux_avdgp.layers.anchor_placement.
        placement_inputs`) and measure the reach on them."""
        inputs = tf.cast(tf.convert_to_tensor(inputs), self.dtype)
        self.anchors.assign(spread_rows(inputs, self.num_anchors))
        self.reach.assign(reach_of(nearest_anchor_distance(inputs, self.anchors), self.anchors))
        self.lower.assign(tf.reduce_min(inputs, axis=0))
        self.upper.assign(tf.reduce_max(inputs, axis=0))
        self.spread.assign(tf.math.reduce_std(inputs, axis=0))
        inducing = self.svgp.inducing_variable.inducing_variable
        inducing.Z.assign(spread_rows(inputs, int(inducing.Z.shape[0])))

    @tf.autograph.experimental.do_not_convert  # no control flow on tensors: traced as written
    def call(self, inputs: tf.Tensor, training=None) -> tuple[tf.Tensor, tf.Tensor]:
        """The guard at ``x`` ``[B, D]``: its component, a packed mixture ``[B, 1, 2 Q + 1]``,
        and its gate ``a_x`` ``[B]`` (:meth:`gate`)."""
        component = self._component(inputs)
        return component, self.gate(inputs, component)

    def _component(self, inputs: tf.Tensor) -> tf.Tensor:
        """The SVGP's marginals at ``inputs`` ``[B, D]`` (GPflux's ``predict``) as a
        one-component packed mixture ``[B, 1, 2 Q + 1]``."""
        inputs = tf.cast(inputs, self.dtype)  # as Keras casts a layer's inputs
        mean, variance = self.svgp.predict(inputs, full_cov=False, full_output_cov=False)
        zeros = tf.zeros_like(mean[:, :1])  # [B, 1]: log weight 0
        return GaussianMixture(mean[:, None], variance[:, None], zeros).pack()

    def _kl_term(self) -> tf.Tensor:
        """``(KL[q(u) || p(u)] - log p(kernel hyperparameters)) / N``, as GPflux's layers add
        it (the log prior is 0 for parameters without priors)."""
        svgp = self.svgp
        log_prior = tf.add_n(
            [tf.zeros([], self.dtype)]
            + [p.log_prior_density() for p in svgp.kernel.trainable_parameters]
        )
        return (svgp.prior_kl() - log_prior) / tf.cast(svgp.num_data, self.dtype)

    @check_shapes("inputs: [B, D]", "component: [B, 1, W]", "return: [B]")
    def gate(self, inputs: tf.Tensor, component: tf.Tensor) -> tf.Tensor:
        """``a_x`` ``[B]``: the reach gate of the anchors on ``x`` (1 within the reach and until
        placed); with ``range_gate`` at most the range gate; with ``variance_gate`` at most
        ``1 - (rho - rho_r) / (1 - rho_r)`` (clipped to ``[0, 1]``), ``rho`` the SVGP's ``f``
        variance over its prior variance (averaged over outputs) and ``rho_r`` its 0.99
        quantile on the training rows (followed in training); 1 while not measured or while
        ``rho_r`` is above :data:`VARIANCE_GATE_LIMIT`."""
        distances = nearest_anchor_distance(inputs, tf.convert_to_tensor(self.anchors))
        gate = reach_weight(distances, tf.convert_to_tensor(self.reach), self.scale)
        if self.range_gate:
            bounds = (tf.convert_to_tensor(w) for w in (self.lower, self.upper, self.spread))
            gate = tf.minimum(gate, range_weight(inputs, *bounds, self.scale))
        if not self.variance_gate:
            return gate
        reach = tf.convert_to_tensor(self.variance_reach)
        beyond = (self._variance_ratio(inputs, component) - reach) / tf.maximum(1.0 - reach, 1e-9)
        acts = (reach > 0) & (reach <= VARIANCE_GATE_LIMIT)
        by_variance = tf.where(acts, tf.clip_by_value(1.0 - beyond, 0.0, 1.0), 1.0)
        return tf.minimum(gate, by_variance)

    def _variance_ratio(self, inputs: tf.Tensor, component: tf.Tensor) -> tf.Tensor:
        """``rho`` ``[B]``: the component's ``f`` variance over the prior's, mean over outputs."""
        variances = GaussianMixture.unpack(component).variances[:, 0, :]  # [B, Q]
        prior = self.svgp.kernel.K_diag(inputs, full_output_cov=False)  # [B, Q]
        return tf.reduce_mean(variances / prior, axis=-1)

    def share(self, inputs) -> tf.Tensor:
        """``w(x) = (1 - a_x)(1 - beta)``, the guard's share of the prediction at ``inputs``
        ``[B, D]`` (an array or tensor), ``[B]``: 0 inside the data."""
        inputs = tf.convert_to_tensor(inputs, self.dtype)
        return (1.0 - self(inputs, training=False)[1]) * (1.0 - self.keep)

    def mix(self, packed: tf.Tensor, component: tf.Tensor, gate: tf.Tensor) -> tf.Tensor:
        """The model's packed mixture ``[B, S, 2 Q + 1]`` with the guard's ``component``
        ``[B, 1, 2 Q + 1]`` at weight ``w = (1 - gate)(1 - beta)``: ``[B, S + 1, 2 Q + 1]``."""
        model, guard = GaussianMixture.unpack(packed), GaussianMixture.unpack(component)
        share = ((1.0 - gate) * (1.0 - self.keep))[:, None]  # [B, 1]
        tiny = np.finfo(self.dtype).tiny  # log 0 would be -inf: a weight below tiny is 0 anyway
        log_weights = tf.concat(
            [model.log_weights + tf.math.log1p(-share), tf.math.log(tf.maximum(share, tiny))],
            axis=-1,
        )
        return GaussianMixture(
            means=tf.concat([model.means, guard.means], axis=1),
            variances=tf.concat([model.variances, guard.variances], axis=1),
            log_weights=log_weights,
        ).pack()

    def training_loss(self, x: tf.Tensor, y: tf.Tensor, sample_weight=None) -> tf.Tensor:
        """The guard's negative ELBO per datapoint on a batch, ``[]``: its expected log
        likelihood under its own likelihood (``sample_weight`` as Keras weighs the loss: the
        sum over the batch divided by its size) and its KL term over ``N``; under a
        ``tf.distribute`` strategy each replica's share (divided by the replicas in sync, as
        Keras scales its losses). With ``variance_gate``, ``rho_r`` follows the 0.99 quantile
        of ``rho`` over the global batch; with ``range_gate``, the range widens to the global
        batch's (the placement rows are a subset of the training rows)."""
        x = tf.cast(x, self.dtype)  # not through Keras' call, which would cast it
        self._widen_range(x)
        return self._negative_elbo(x, y, sample_weight)

    def training_gradients(
        self, x: tf.Tensor, y: tf.Tensor, sample_weight, step: tf.Tensor
    ) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """:meth:`training_loss` ``[]`` and its gradients for ``trainable_variables`` on one
        step's batch ``x`` ``[B, D]``, ``y`` ``[B, Q]``, on a tape of their own, where the
        step count ``step`` (the optimizer's, from 0) is a multiple of ``train_every``; zeros
        in the other steps, where only the range widens (no outer gradient passes through the
        conditional, so a skipped step costs its predicate).

        :raises ValueError: for ``train_every > 1`` with the variance gate under a strategy of
            several replicas.
        """
        x = tf.cast(x, self.dtype)
        self._widen_range(x)
        variables = self.trainable_variables

        def trained() -> list[tf.Tensor]:
            with tf.GradientTape() as tape:
                loss = self._negative_elbo(x, y, sample_weight)
            gradients = tape.gradient(loss, variables)
            return [loss] + [tf.zeros_like(v) if g is None else g
                             for g, v in zip(gradients, variables)]  # fmt: skip

        if self.train_every == 1:
            loss, *gradients = trained()
            return loss, gradients

        def skipped() -> list[tf.Tensor]:
            return [tf.zeros([], self.dtype)] + [tf.zeros_like(v) for v in variables]

        context = tf.distribute.get_replica_context()
        if self.variance_gate and context is not None and context.num_replicas_in_sync > 1:
            raise ValueError(
                f"{self.name}: train_every={self.train_every} with the variance gate under a "
                "strategy of several replicas (its quantile is gathered across replicas, which "
                "cannot happen in a conditional); use train_every=1 or variance_gate=False"
            )
        step = tf.cast(step, tf.int64)
        train_now = tf.equal(tf.math.floormod(step, self.train_every), 0)
        loss, *gradients = tf.cond(train_now, trained, skipped)
        return loss, gradients

    def _widen_range(self, x: tf.Tensor) -> None:
        """With ``range_gate``, widen the range to the global batch ``x`` ``[B, D]``'s."""
        if self.range_gate:
            rows = every_replicas_rows(tf.stop_gradient(x))
            self.lower.assign(tf.minimum(self.lower, tf.reduce_min(rows, axis=0)))
            self.upper.assign(tf.maximum(self.upper, tf.reduce_max(rows, axis=0)))

    def _negative_elbo(self, x: tf.Tensor, y: tf.Tensor, sample_weight) -> tf.Tensor:
        """:meth:`training_loss` without widening the range (``x`` in the guard's dtype)."""
        packed = self._component(x)
        if self.variance_gate:
            ratios = every_replicas_rows(tf.stop_gradient(self._variance_ratio(x, packed)))
            count = tf.shape(ratios)[0]
            rank = tf.cast(REACH_QUANTILE * tf.cast(count - 1, ratios.dtype), tf.int32)
            batch_reach = tf.gather(tf.sort(ratios), rank)
            reach = self.variance_reach
            followed = REACH_MOMENTUM * reach + (1.0 - REACH_MOMENTUM) * batch_reach
            self.variance_reach.assign(tf.where(reach > 0, followed, batch_reach))
        data = PredictiveDistribution.from_packed(self.likelihood, packed, Objective.ELBO)
        values = -data.objective_value(y)  # [B]
        if sample_weight is not None:
            values = values * tf.reshape(tf.cast(sample_weight, values.dtype), [-1])
        context = tf.distribute.get_replica_context()
        replicas = 1 if context is None else context.num_replicas_in_sync
        # each replica's share, as Keras scales its losses: the gradients are summed
        return (tf.reduce_mean(values) + self._kl_term()) / replicas

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            svgp=gp_layer_to_config(self.svgp, owner=self.name),
            likelihood=likelihood_to_config(self.likelihood),
            input_dim=self.input_dim,
            num_anchors=self.num_anchors,
            keep=self.keep,
            scale=self.scale,
            variance_gate=self.variance_gate,
            range_gate=self.range_gate,
            train_every=self.train_every,
        )
        return config

    @classmethod
    def from_config(cls, config: dict) -> "InputGuard":
        """Rebuild the guard; its trained values come with the weights."""
        config = dict(config)
        config["svgp"] = gp_layer_from_config(config["svgp"])
        config["likelihood"] = likelihood_from_config(config["likelihood"])
        return cls(**config)
