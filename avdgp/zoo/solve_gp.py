"""SOLVE-GP, the sparse orthogonal variational GP (Shi, Titsias and Mnih, AISTATS 2020).

The first baseline of the AVDGP paper's Tables 3 and 5. The prior GP is split into two
independent parts, ``f = f_u + f_perp``: ``f_u(x) = k_u(x)^T K_uu^{-1} u`` is spanned by the
first set of inducing points ``Z_u`` ``[M1, D]``, and ``f_perp`` is the orthogonal rest, a GP
with kernel ``c(x, x') = k(x, x') - k_u(x)^T K_uu^{-1} k_u(x')``, whose values at a second set
``Z_v`` ``[M2, D]`` are ``v ~ N(0, C_vv)``. Both get independent Gaussian posteriors, ``q(u)``
and ``q(v)``, each full-rank (the paper's "shallow models use full-rank variational
approximations"), so the model holds ``M1 + M2`` inducing points at the cost of two
factorisations of size ``M1`` and ``M2``.

Whitened, with ``L_u = chol(K_uu)``, ``A_u = L_u^{-1} K_uf`` ``[M1, B]``,
``L_c = chol(C_vv)`` and ``A_v = L_c^{-1} C_vf`` ``[M2, B]`` (``C_vf = K_vf - K_vu K_uu^{-1}
K_uf``), the marginal of output ``q`` at a point is (``||.||^2`` summing over the rows)::

    mean = A_u^T m_u + A_v^T m_v
    var  = k(x, x) - ||A_u||^2 - ||A_v||^2 + ||R_u^T A_u||^2 + ||R_v^T A_v||^2

for ``q(u_white) = N(m_u, R_u R_u^T)`` and ``q(v_white) = N(m_v, R_v R_v^T)``, and the ELBO's
KL term is ``KL[q(u_white) || N(0, I)] + KL[q(v_white) || N(0, I)]``. With ``M2 = 0``, or with
``q(v)`` equal to its prior, it is GPflow's whitened SVGP.
"""

from __future__ import annotations

from typing import Optional

import gpflow
import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from gpflux_avdgp.checks import check_nonnegative_int, check_positive_int
from gpflux_avdgp.core.cholesky import jittered_cholesky
from gpflux_avdgp.gpflow_config import module_from_config, module_to_config
from gpflux_avdgp.layers.base import MixtureLayer
from gpflux_avdgp.propagation import Propagated

__all__ = ["SAVED_OBJECTS", "SolveGPLayer", "PAPER_INDUCING"]

#: The paper's sizes: ``M1 = M2 = 512``.
PAPER_INDUCING = (512, 512)


def _lower(raw: tf.Tensor) -> tf.Tensor:
    """The lower triangle of ``raw`` ``[Q, M, M]``: the Cholesky factor ``R`` of ``q``'s
    whitened covariance (the sign of its diagonal does not matter)."""
    return tf.linalg.band_part(raw, -1, 0)


@tf_keras.utils.register_keras_serializable(package="avdgp")
class SolveGPLayer(MixtureLayer):
    """A SOLVE-GP layer: a shallow sparse GP with two orthogonal sets of inducing points.

    It reads the model's input ``[B, D]`` and writes a one-component packed mixture
    ``[B, 1, 2 Q + 1]``, so it trains with :class:`~gpflux_avdgp.AVDGPLoss` and
    :class:`~gpflux_avdgp.TrainableLikelihood` like the other models of the experiments. It
    adds ``KL / num_data`` with ``add_loss``.

    :param units: ``Q``, the outputs (independent GPs sharing kernel and inducing points).
    :param num_data: ``N``, the training rows (scales the KL).
    :param num_inducing: ``M1``, the first (standard) set; paper: 512.
    :param num_orthogonal: ``M2``, the orthogonal set; paper: 512; 0 gives SVGP.
    :param kernel: a GPflow kernel (default an isotropic Matern-5/2 with unit lengthscale and
        variance, as the zoo's SVGP).
    :param inducing_inputs: ``[M1 + M2, D]`` initial ``Z_u`` then ``Z_v`` (default standard
        normal draws from ``seed``).
    :param seed: seed of the default inducing inputs.
    """

    num_inducing: int
    """``M1``, the inducing points of ``f_u``."""

    num_orthogonal: int
    """``M2``, the inducing points of the orthogonal process ``f_perp``."""

    num_data: int
    """``N``, the training rows the KL is divided by."""

    kernel: gpflow.kernels.Kernel
    """The prior kernel ``k``, shared by the ``Q`` outputs."""

    def __init__(
        self,
        units: int,
        *,
        num_data: int,
        num_inducing: int = PAPER_INDUCING[0],
        num_orthogonal: int = PAPER_INDUCING[1],
        kernel: Optional[gpflow.kernels.Kernel] = None,
        inducing_inputs: Optional[np.ndarray] = None,
        seed: Optional[int] = None,
        **kwargs,
    ):
        kwargs.pop("rule", None)  # a first layer: its input is deterministic
        super().__init__(units, rule="ar2", seed=seed, **kwargs)
        self.num_data = check_positive_int("num_data", num_data)
        self.num_inducing = check_positive_int("num_inducing", num_inducing)
        self.num_orthogonal = check_nonnegative_int("num_orthogonal", num_orthogonal)
        if kernel is None:
            kernel = gpflow.kernels.Matern52()
        if not isinstance(kernel, gpflow.kernels.Kernel):
            raise TypeError(f"kernel: expected a gpflow.kernels.Kernel, got {kernel!r}")
        self.kernel = kernel
        total = self.num_inducing + self.num_orthogonal
        if inducing_inputs is not None:
            inducing_inputs = np.asarray(inducing_inputs, dtype=np.float64)
            if inducing_inputs.ndim != 2 or len(inducing_inputs) != total:
                raise ValueError(
                    f"inducing_inputs: expected [{total}, D] (num_inducing + num_orthogonal "
                    f"rows), got shape {inducing_inputs.shape}"
                )
        self._inducing_init = inducing_inputs

    def build(self, input_shape: tf.TensorShape) -> None:
        if tf.TensorShape(input_shape).rank != 2:
            raise ValueError(
                f"{self.name}: SOLVE-GP is a shallow model and reads the model's input "
                f"[batch, features]; got shape {tf.TensorShape(input_shape)}"
            )
        super().build(input_shape)
        dim, units = self.input_dim, self.units
        init = self._inducing_init
        if init is None:
            rng = np.random.default_rng(self.seed)
            init = rng.standard_normal((self.num_inducing + self.num_orthogonal, dim))
        elif init.shape[1] != dim:
            raise ValueError(
                f"inducing_inputs: expected width {dim} (the input's), got {init.shape[1]}"
            )

        def weight(name: str, value: np.ndarray) -> tf.Variable:
            return self.add_weight(
                name=name,
                shape=value.shape,
                initializer=tf_keras.initializers.Constant(value.tolist()),
            )

        def eye(count: int) -> np.ndarray:
            return np.tile(np.eye(count)[None], [units, 1, 1])

        m1, m2 = self.num_inducing, self.num_orthogonal
        self.inducing_u = weight("inducing_u", init[:m1])  # Z_u [M1, D]
        self.q_mu_u = weight("q_mu_u", np.zeros((m1, units)))  # [M1, Q]
        self.q_sqrt_u = weight("q_sqrt_u", eye(m1))  # R_u [Q, M1, M1]
        self.inducing_v = weight("inducing_v", init[m1:])  # Z_v [M2, D]
        self.q_mu_v = weight("q_mu_v", np.zeros((m2, units)))  # [M2, Q]
        self.q_sqrt_v = weight("q_sqrt_v", eye(m2))  # R_v [Q, M2, M2]

    def _gpflow_modules(self) -> list[tf.Module]:
        return [self.kernel]

    def marginals(self, inputs: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """``(mean, var)`` of ``q(f)`` at ``inputs`` ``[B, D]``, each ``[B, Q]``."""
        kernel = self.kernel
        z_u, z_v = self.inducing_u, self.inducing_v
        l_u = jittered_cholesky(kernel(z_u)[None])[0]  # [M1, M1]
        a_u = tf.linalg.triangular_solve(l_u, kernel(z_u, inputs))  # L_u^-1 K_uf [M1, B]
        kff = kernel(inputs, full_cov=False)  # [B]
        r_u = _lower(self.q_sqrt_u)  # [Q, M1, M1]
        mean = tf.linalg.matmul(a_u, self.q_mu_u, transpose_a=True)  # [B, Q]
        projected = tf.linalg.matmul(r_u, a_u[None], transpose_a=True)  # R_u^T A_u [Q, M1, B]
        var = (
            kff[None] - tf.reduce_sum(a_u**2, axis=0)[None] + tf.reduce_sum(projected**2, axis=1)
        )  # [Q, B]
        if self.num_orthogonal > 0:
            b_uv = tf.linalg.triangular_solve(l_u, kernel(z_u, z_v))  # L_u^-1 K_uv [M1, M2]
            c_vv = kernel(z_v) - tf.linalg.matmul(b_uv, b_uv, transpose_a=True)  # [M2, M2]
            l_c = jittered_cholesky(c_vv[None])[0]  # [M2, M2]
            c_vf = kernel(z_v, inputs) - tf.linalg.matmul(b_uv, a_u, transpose_a=True)
            a_v = tf.linalg.triangular_solve(l_c, c_vf)  # L_c^-1 C_vf [M2, B]
            r_v = _lower(self.q_sqrt_v)  # [Q, M2, M2]
            mean += tf.linalg.matmul(a_v, self.q_mu_v, transpose_a=True)
            projected_v = tf.linalg.matmul(r_v, a_v[None], transpose_a=True)  # [Q, M2, B]
            var += tf.reduce_sum(projected_v**2, axis=1) - tf.reduce_sum(a_v**2, axis=0)[None]
        return mean, tf.transpose(var)

    def prior_kl(self) -> tf.Tensor:
        """``KL[q(u) || p(u)] + KL[q(v) || p(v)]`` (whitened: against ``N(0, I)``), ``[]``."""
        kl = gpflow.kullback_leiblers.gauss_kl(self.q_mu_u, _lower(self.q_sqrt_u))
        if self.num_orthogonal > 0:
            kl += gpflow.kullback_leiblers.gauss_kl(self.q_mu_v, _lower(self.q_sqrt_v))
        return kl

    def _components(
        self, propagated: Propagated, training: bool
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        mean, var = self.marginals(propagated.amortization_input)  # [B, Q] each
        loss_term = self.prior_kl() / tf.cast(self.num_data, mean.dtype)
        return mean[:, None, :], var[:, None, :], loss_term

    def get_config(self) -> dict:
        config = super().get_config()
        for key in ("rule", "num_points", "num_train_samples"):
            config.pop(key, None)
        config.update(
            num_data=self.num_data,
            num_inducing=self.num_inducing,
            num_orthogonal=self.num_orthogonal,
            kernel=module_to_config(self.kernel, "kernel", where=self.name),
        )
        return config

    @classmethod
    def from_config(cls, config: dict) -> "SolveGPLayer":
        """Rebuild the layer; the kernel's and the variational values load with the weights."""
        config = dict(config)
        config["kernel"] = module_from_config(config["kernel"], "kernel")
        return cls(**config)


#: The application's Keras classes a saved model may name, for ``load_model``'s
#: ``custom_objects`` (the library's allow list knows only its own, GPflow's, GPflux's and
#: Keras' classes).
SAVED_OBJECTS = {"avdgp>SolveGPLayer": SolveGPLayer}
