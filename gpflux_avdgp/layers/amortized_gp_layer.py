"""The amortized sparse GP layer: per-datapoint inducing points from an inference function."""

from __future__ import annotations

from typing import Optional

import gpflow
import tensorflow as tf
from gpflow.keras import tf_keras

from ..checks import (
    check_choice,
    check_nonnegative_int,
    check_optional_positive_int,
    check_positive_int,
)
from ..core import shared_points
from ..core.anchors import revert_to_prior
from ..core.cholesky import jittered_cholesky
from ..core.conditionals import amortized_conditional, amortized_kl
from ..core.covariances import pointwise_covariances
from ..core.parameters import read_once
from ..gpflow_config import gpflow_float, module_from_config, module_to_config
from ..kernels import (
    KernelArg,
    MeanFunctionArg,
    check_kernel_width,
    make_kernel,
    make_mean_function,
)
from ..propagation import Propagated, PropagationRule, SharedPoints
from ..rules import KLConvention
from .base import MixtureLayer, translate_legacy_points
from .inference import AffineInference, InducingInit, InferenceKind, MLPInference
from .module_state import claim_module
from .prior_reversion import PriorReversion, reach_scale

__all__ = ["AmortizedGPLayer"]


@tf_keras.utils.register_keras_serializable(package="gpflux_avdgp")
class AmortizedGPLayer(PriorReversion, MixtureLayer):
    """A sparse GP layer whose inducing points and ``q(u)`` are amortized per datapoint.

    For every datapoint ``b`` the inference function maps the amortization input ``h_b``
    (the input itself in a first layer, the previous layer's mixture mean under AR2/AR2P, each
    sample under AR1) to ``M`` inducing points ``Z_b`` ``[M, D]`` and ``q(u_b)``; the layer then
    returns the marginal ``q(f)`` at each of the ``S`` locations ``F_b`` ``[S, D]``. One
    ``M x M`` Cholesky per datapoint is shared by all ``Q`` outputs and ``S`` locations (AR1:
    one per datapoint and sample). Memory is ``O(B M^2 (Q + S))``, never ``O(B^2)``.

    **Built by hand, the layer is the paper's** (no prior reversion: ``num_anchors=0``,
    ``whiten=False``, no reach gate); :func:`~gpflux_avdgp.build_avdgp`'s default preset adds
    prior reversion (32 anchors, whitened, reach gate 1.0, the shared inducing-point start),
    so its std grows far from the data. To build a layer as the builder does, pass
    ``**gpflux_avdgp.presets.layer_options()``.

    Attributes (after ``build``): ``kernel`` (GPflow kernel, shared by the ``Q`` outputs),
    ``mean_function`` (GPflow mean function or ``None``), ``inference``
    (:class:`~gpflux_avdgp.layers.inference.AffineInference` or
    :class:`~gpflux_avdgp.layers.inference.MLPInference`), ``sigma_points`` ``[S, D]`` (AR2P on a
    mixture input) and ``weight_logits`` ``[S]`` (in the layer that creates the sigma points'
    mixture; later layers reuse those weights).

    :param units: ``Q``, output dimension.
    :param num_inducing: ``M``, inducing points per datapoint (paper: 8 / 4 / 4).
    :param num_data: ``N``, training set size; required by ``kl_convention="paper"``.
    :param kernel: ``"matern52"`` (default) or another name in
        :data:`gpflux_avdgp.kernels.KERNELS`, or any GPflow kernel (non-stationary kernels use
        a slower exact path).
    :param ard: one lengthscale per input dimension (named kernels only).
    :param mean_function: ``None``/``"zero"`` (default), ``"linear"`` (learned ``F A + b``),
        ``"identity"`` (the fixed ``F A`` that keeps distances, DS-DGP's) or a GPflow mean
        function.
    :param inference: ``"affine"`` (default, the paper) or ``"mlp"`` (IDSGP).
    :param inducing_init: where the affine inducing points start: ``"global"`` (default,
        ``W_m = 0``: shared points ``b_m``) or ``"input"`` (the paper, ``W_m = I``: noisy copies
        of the input), see :class:`~gpflux_avdgp.layers.inference.InducingInit`. Affine
        inference only.
    :param full_rank: full-rank Cholesky ``q(u)`` instead of mean-field.
    :param whiten: whitened parameterisation ``u = m(Z) + L v``; default ``False`` (paper).
    :param hidden_layers: hidden layers of the inference MLPs (paper: 2).
    :param kl_convention: ``"paper"`` (default) or ``"per_point"``, see :class:`KLConvention`.
    :param num_anchors: ``K`` global anchors for prior reversion (``0``: none, the paper's
        layer): ``q(u)`` returns to the prior where the anchors no longer explain the
        amortization input (:mod:`gpflux_avdgp.core.anchors`). Needs ``whiten=True``. The
        anchors start at amortization inputs of rows spread over the training set, placed
        before training (:func:`~gpflux_avdgp.layers.anchor_placement.place_anchors`, which
        ``AVDGPModel.fit`` calls), and are then trained.
    :param reach_gate: ``None`` (the layer's default; :func:`~gpflux_avdgp.build_avdgp`'s
        default preset sets 1.0) or a scale ``s > 0``: the reversion weight becomes
        ``min(a(h), a_r(h))``, ``a_r`` 1 within the training rows' reach of an anchor and
        falling beyond it (:func:`~gpflux_avdgp.core.anchors.reach_weight`); the reach is
        measured where the anchors are placed and followed in training (``anchor_reach``, a
        running statistic updated in the forward pass as batch normalisation's are: a step
        stopped for a NaN gradient, or in Keras' own step for a NaN target, may have moved
        it, by the batch's finite inputs; under a distribution strategy the global batch's);
        with ``num_data <= num_anchors`` (every row an anchor), or with the layer frozen
        (``trainable = False``), training keeps it. Needs
        ``num_anchors``.
    :param rule: see :class:`~gpflux_avdgp.layers.base.MixtureLayer`.
    :param num_points: see :class:`~gpflux_avdgp.layers.base.MixtureLayer`.
    :param num_train_samples: see :class:`~gpflux_avdgp.layers.base.MixtureLayer`.
    :param seed: seed for initialisers and Monte Carlo draws.
    """

    num_inducing: int
    """``M``, inducing points per datapoint."""

    num_data: Optional[int]
    """``N``, the training set size the KL term is scaled by (``"paper"`` convention)."""

    kl_convention: KLConvention
    """How the layer's KL term enters the loss."""

    inference_kind: InferenceKind
    """Which inference function maps the amortization input to ``Z`` and ``q(u)``."""

    inference: AffineInference | MLPInference
    """The inference function (a Keras layer); built by :meth:`build`."""

    kernel: gpflow.kernels.Kernel
    """The layer's kernel; created by :meth:`build` (a name becomes a kernel of the input
    width, in the layer's float type)."""

    mean_function: gpflow.mean_functions.MeanFunction
    """The layer's mean function; created by :meth:`build`."""

    num_anchors: int
    """``K``, global anchors of prior reversion (``0``: none)."""

    anchors: Optional[tf.Variable]
    """``C`` ``[K, D]`` in the amortization-input space (``None`` without prior reversion);
    created by :meth:`build`."""

    def __init__(
        self,
        units: int,
        num_inducing: int,
        num_data: Optional[int] = None,
        *,
        kernel: KernelArg = "matern52",
        ard: bool = False,
        mean_function: MeanFunctionArg = None,
        inference: str | InferenceKind = InferenceKind.AFFINE,
        inducing_init: str | InducingInit = InducingInit.GLOBAL,
        full_rank: bool = False,
        whiten: bool = False,
        hidden_layers: int = 2,
        kl_convention: str | KLConvention = KLConvention.PAPER,
        num_anchors: int = 0,
        reach_gate: Optional[float] = None,
        rule: str | PropagationRule = PropagationRule.AR2P,
        num_points: Optional[int] = None,
        num_train_samples: Optional[int] = None,
        seed: Optional[int] = None,
        **kwargs,
    ):
        super().__init__(
            units,
            rule=rule,
            num_points=num_points,
            num_train_samples=num_train_samples,
            seed=seed,
            **kwargs,
        )
        self.num_inducing = check_positive_int("num_inducing", num_inducing)
        self.num_data = check_optional_positive_int("num_data", num_data)
        self.kl_convention = check_choice("kl_convention", kl_convention, KLConvention)
        if self.kl_convention is KLConvention.PAPER and self.num_data is None:
            raise ValueError(
                "num_data: required with kl_convention='paper' (the KL is scaled by 1/num_data)"
            )
        self.inference_kind = check_choice("inference", inference, InferenceKind)
        self.hidden_layers = check_nonnegative_int("hidden_layers", hidden_layers)
        for name, flag in (("ard", ard), ("full_rank", full_rank), ("whiten", whiten)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name}: expected a bool, got {flag!r}")
        self.ard, self.full_rank, self.whiten = ard, full_rank, whiten
        self.num_anchors = check_nonnegative_int("num_anchors", num_anchors)
        if self.num_anchors and not whiten:
            raise ValueError(
                f"num_anchors: prior reversion acts on the whitened q(u); pass whiten=True with "
                f"num_anchors={self.num_anchors}, or num_anchors=0"
            )
        self.reach_gate = reach_scale(reach_gate, self.num_anchors)
        if not isinstance(kernel, gpflow.kernels.Kernel):
            make_kernel(kernel, 1, ard=False)  # validates the name now, not at build
        if not isinstance(mean_function, gpflow.mean_functions.MeanFunction):
            make_mean_function(mean_function, 1, 1)  # validates the name now
        # Held untracked: Keras tracks a module where ``build`` assigns it, so the variables
        # (and the optimizer's slots) are in one order whether a kernel is given by name or
        # as an object, and a reloaded model's slots match the saved ones.
        object.__setattr__(self, "_kernel_arg", kernel)
        object.__setattr__(self, "_mean_function_arg", mean_function)
        self.inducing_init = check_choice("inducing_init", inducing_init, InducingInit)
        options = dict(
            full_rank=full_rank,
            hidden_layers=self.hidden_layers,
            seed=seed,
            dtype=self.dtype,
            name="inference",
        )
        if self.inference_kind is InferenceKind.AFFINE:
            options["inducing_init"] = self.inducing_init
            self.inference = AffineInference(self.num_inducing, self.units, **options)
        else:
            self.inference = MLPInference(self.num_inducing, self.units, **options)

    def build(self, input_shape: tf.TensorShape) -> None:
        """Create the kernel and mean function (named ones in the layer's float type) and the
        inference networks.

        :raises ValueError: if the kernel's per-column parameters do not fit the input width.
        :raises NotImplementedError: for a kernel or mean-function object that cannot be saved
            (see :func:`~gpflux_avdgp.gpflow_config.module_to_config`).
        """
        super().build(input_shape)
        with gpflow_float(self.dtype):
            self.kernel = make_kernel(self._kernel_arg, self.input_dim, ard=self.ard)
            self.mean_function = make_mean_function(
                self._mean_function_arg, self.input_dim, self.units
            )
        try:
            check_kernel_width(self.kernel, self.input_dim)
        except ValueError as error:
            raise ValueError(f"{self.name}: {error}") from None
        self._module_configs()  # refuses what cannot be saved now, not after training
        for module in self._gpflow_modules():
            claim_module(module, self)
        self.inference.build((None, self.input_dim))
        self._build_anchors()

    def _module_configs(self) -> tuple:
        """``(kernel, mean_function)`` as saved: a name, or a checked GPflow config."""
        kernel = self._kernel_arg
        if isinstance(kernel, gpflow.kernels.Kernel):
            kernel = module_to_config(kernel, "kernel", where=self.name)
        mean = self._mean_function_arg
        if isinstance(mean, gpflow.mean_functions.MeanFunction):
            mean = module_to_config(mean, "mean_function", where=self.name)
        return kernel, mean

    def _gpflow_modules(self) -> list[tf.Module]:
        modules = [self.kernel]
        return modules if self.mean_function is None else modules + [self.mean_function]

    def _mean_at(self, points: tf.Tensor) -> tf.Tensor:
        """``m(points)`` broadcastable to ``[..., Q]``; zero if there is no mean function."""
        if self.mean_function is None:
            return tf.zeros([], dtype=points.dtype)
        return self.mean_function(points)

    def _factored(self, kernel, inducing, shared: Optional[SharedPoints]) -> Optional[tuple]:
        """``(Kuu, Kuf, kff, m(F))`` from the factors of shared ``F``, or ``None`` if ``F``
        must be formed (:mod:`~gpflux_avdgp.core.shared_points`)."""
        if shared is None or not shared_points.shared_points_available(kernel):
            return None
        kuu, kuf, kff = shared_points.shared_point_covariances(kernel, inducing, *shared)
        mean = shared_points.mean_at_shared_points(self.mean_function, *shared)
        return kuu, kuf, kff, tf.zeros([], kuu.dtype) if mean is None else mean

    def _components(
        self, propagated: Propagated, training: bool, gate: Optional[tf.Tensor] = None
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        locations, amortization_input, log_weights, shared = propagated  # F [B, S, D]
        per_sample = self.rule is PropagationRule.AR1 and amortization_input.shape.rank == 3
        if per_sample:  # every (datapoint, sample) pair is its own problem with one location
            batch, num_points = tf.shape(locations)[0], tf.shape(locations)[1]
            amortization_input = tf.reshape(amortization_input, [-1, self.input_dim])
            locations = tf.reshape(locations, [-1, 1, self.input_dim])  # [B S, 1, D]

        # The name scopes group the ops in profiles (TensorBoard, benchmarks/profile_step.py).
        kernel = read_once(self.kernel)  # each parameter read once for all the uses below
        inducing, q_mu, q_sqrt = self.inference(amortization_input)  # Z [N, M, D]
        if self.num_anchors:
            with tf.name_scope("prior_reversion"):
                self._place_anchors(amortization_input, training)
                weight = self._anchor_weight(kernel, amortization_input, training)
                if gate is not None:  # one per datapoint; AR1's problems are datapoint-major
                    rows = tf.shape(weight)[0] // tf.shape(gate)[0]
                    weight = tf.minimum(weight, tf.repeat(tf.cast(gate, weight.dtype), rows))
                q_mu, q_sqrt = revert_to_prior(q_mu, q_sqrt, weight)
        with tf.name_scope("covariances"):
            factored = self._factored(kernel, inducing, None if per_sample else shared)
            if factored is None:
                kuu, kuf, kff = pointwise_covariances(kernel, inducing, locations)
                mean_at_locations = self._mean_at(locations)
            else:  # F [B, S, D] is never formed (graphs prune it)
                kuu, kuf, kff, mean_at_locations = factored
        with tf.name_scope("cholesky"):
            chol_kuu = jittered_cholesky(kuu)  # [N, M, M], relative and adaptive jitter
        with tf.name_scope("conditional"):
            if self.whiten:
                q_mu_centred = q_mu
            else:
                q_mu_centred = q_mu - self._mean_at(inducing)  # [N, M, Q]
            mean, var = amortized_conditional(
                chol_kuu, kuf, kff, q_mu_centred, q_sqrt, whiten=self.whiten
            )  # [N, P, Q]
            mean += mean_at_locations
        with tf.name_scope("kl"):
            kl = amortized_kl(chol_kuu, q_mu_centred, q_sqrt, whiten=self.whiten)  # [N]

        if per_sample:
            mean = tf.reshape(mean, [batch, num_points, self.units])
            var = tf.reshape(var, [batch, num_points, self.units])
            kl = tf.reduce_sum(tf.exp(log_weights) * tf.reshape(kl, [batch, num_points]), -1)
        loss_term = tf.reduce_mean(kl)
        if self.kl_convention is KLConvention.PAPER:
            loss_term = loss_term / tf.cast(self.num_data, loss_term.dtype)
        return mean, var, loss_term

    def get_config(self) -> dict:
        config = super().get_config()
        kernel, mean_function = self._module_configs()
        config.update(
            num_inducing=self.num_inducing,
            num_data=self.num_data,
            kernel=kernel,
            ard=self.ard,
            mean_function=mean_function,
            inference=self.inference_kind.value,
            inducing_init=self.inducing_init.value,
            full_rank=self.full_rank,
            whiten=self.whiten,
            hidden_layers=self.hidden_layers,
            kl_convention=self.kl_convention.value,
            num_anchors=self.num_anchors,
            reach_gate=self.reach_gate,
        )
        return config

    @classmethod
    def from_config(cls, config: dict) -> "AmortizedGPLayer":
        """Rebuild the layer; GPflow kernel and mean-function configs become new objects in
        their saved float type (the trained values come with the weights)."""
        config = translate_legacy_points(config)
        if config.pop("anchor_posterior", False):  # files saved before stop 63 name it
            raise ValueError(
                "anchor_posterior: the file's layer gives its anchors a global posterior, an "
                "option removed as a rejected design (docs/design.md); load it with the "
                "gpflux_avdgp commit that saved it"
            )
        if isinstance(config.get("kernel"), dict):
            config["kernel"] = module_from_config(config["kernel"], "kernel")
        if isinstance(config.get("mean_function"), dict):
            config["mean_function"] = module_from_config(config["mean_function"], "mean_function")
        return cls(**config)
