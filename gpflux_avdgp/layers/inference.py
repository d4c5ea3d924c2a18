"""Inference functions: map an amortization input ``h`` to ``(Z, q_mu, q_sqrt)`` per datapoint.

* :class:`AffineInference` (the paper's Eq. affine_func): ``M`` affine maps
  ``Z[n, m] = W_m h_n + b_m`` plus two MLPs, ``g`` for ``q_mu`` and ``h`` for ``q_sqrt``.
* :class:`MLPInference` (the original IDSGP): one MLP produces ``Z``, ``q_mu`` and ``q_sqrt``.

Both return an :class:`AmortizedParameters` with ``inducing`` ``[N, M, D]``, ``q_mu``
``[N, M, Q]`` and ``q_sqrt`` ``[N, Q, M]`` (mean-field standard deviations) or ``[N, Q, M, M]``
(full-rank lower-triangular factors, softplus on the diagonal).
"""

from __future__ import annotations

import enum
from typing import NamedTuple, Optional

import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from ..checks import check_choice, check_nonnegative_int, check_positive_int

__all__ = [
    "InferenceKind",
    "AmortizedParameters",
    "AffineInference",
    "InducingInit",
    "MLPInference",
    "build_mlp",
]

_LEAKY_SLOPE = 0.2
#: softplus^{-1}(1): the scale network's bias starts the scales at one.
_SOFTPLUS_INV_ONE = float(np.log(np.expm1(1.0)))
#: Lower bound of the diagonal of ``q_sqrt``. ``softplus`` underflows to exactly 0 for raw
#: outputs below about -745 (float64; -104 in float32), and ``log q_sqrt`` in the KL then
#: makes the loss infinite and the scale network's gradients NaN. Measured: protein, seed 0,
#: epoch 19, where a datapoint whose inputs lie 50 standard deviations from the mean drove one
#: raw output that low. A standard deviation of 1e-6 is far below any scale a posterior over
#: ``u`` needs (the prior's is ``sqrt`` of the kernel variance), so the bound changes nothing
#: else; below it the gradient is zero.
MIN_SCALE = 1e-6


class InferenceKind(str, enum.Enum):
    """Which inference function produces the layer's ``Z`` and ``q(u)``."""

    AFFINE = "affine"  #: the paper's affine maps + two MLPs (:class:`AffineInference`)
    MLP = "mlp"  #: the original IDSGP single MLP (:class:`MLPInference`)


class AmortizedParameters(NamedTuple):
    """Per-datapoint variational parameters of one GP layer."""

    inducing: tf.Tensor  #: ``Z``, ``[N, M, D]``
    q_mu: tf.Tensor  #: ``[N, M, Q]``
    q_sqrt: tf.Tensor  #: ``[N, Q, M]`` or ``[N, Q, M, M]``


def build_mlp(
    output_dim: int,
    width: int,
    hidden_layers: int,
    *,
    final_kernel_initializer: tf_keras.initializers.Initializer,
    final_bias_initializer: tf_keras.initializers.Initializer,
    dtype: tf.DType,
    name: str,
    seed: Optional[int] = None,
) -> tf_keras.Sequential:
    """An MLP with ``hidden_layers`` Dense layers of ``width`` units and LeakyReLU(0.2)."""
    layers: list[tf_keras.layers.Layer] = []
    for i in range(hidden_layers):
        layers.append(
            tf_keras.layers.Dense(
                width,
                kernel_initializer=tf_keras.initializers.GlorotUniform(
                    seed=None if seed is None else seed + i
                ),
                dtype=dtype,
                name=f"hidden_{i}",
            )
        )
        layers.append(tf_keras.layers.LeakyReLU(_LEAKY_SLOPE, dtype=dtype, name=f"leaky_relu_{i}"))
    layers.append(
        tf_keras.layers.Dense(
            output_dim,
            kernel_initializer=final_kernel_initializer,
            bias_initializer=final_bias_initializer,
            dtype=dtype,
            name="output",
        )
    )
    return tf_keras.Sequential(layers, name=name)


@tf_keras.utils.register_keras_serializable(package="gpflux_avdgp")  # copy.deepcopy clones it
class _TiledGlorot(tf_keras.initializers.Initializer):
    """Glorot-uniform ``[H, block]`` weights tiled ``repeats`` times along the output axis.

    Output unit ``r * block + j`` gets the same weights for every ``r``, so the network's
    initial outputs are equal across the ``M`` inducing points (paper, "Model initialization").
    Columns past ``repeats * block`` (off-diagonal scale entries) start at zero.
    """

    def __init__(self, block: int, repeats: int, seed: Optional[int] = None):
        self.block, self.repeats, self.seed = block, repeats, seed

    def __call__(self, shape, dtype=None, **kwargs):
        fan_in, fan_out = int(shape[0]), int(shape[1])
        base = tf_keras.initializers.GlorotUniform(seed=self.seed)((fan_in, self.block), dtype)
        tiled = tf.tile(base, [1, self.repeats])
        return tf.pad(tiled, [[0, 0], [0, fan_out - self.block * self.repeats]])

    def get_config(self):
        return {"block": self.block, "repeats": self.repeats, "seed": self.seed}


def _scale_bias(diag_size: int, total_size: int) -> tf_keras.initializers.Initializer:
    """Bias with ``softplus^-1(1)`` on the diagonal entries and zero elsewhere."""
    values = np.zeros(total_size)
    values[:diag_size] = _SOFTPLUS_INV_ONE
    return tf_keras.initializers.Constant(values.tolist())


def scale_output_size(num_inducing: int, output_dim: int, full_rank: bool) -> int:
    """Raw outputs the scale head needs: ``M Q`` diagonal, plus ``Q M (M - 1) / 2`` if full."""
    diag = num_inducing * output_dim
    return diag + (output_dim * num_inducing * (num_inducing - 1) // 2 if full_rank else 0)


def raw_to_q_sqrt(raw: tf.Tensor, num_inducing: int, output_dim: int, full_rank: bool):
    """Turn raw network outputs ``[N, scale_output_size]`` into ``q_sqrt``.

    Layout of ``raw``: first ``M * Q`` entries, ordered ``[M, Q]``, pass through softplus
    (bounded below by :data:`MIN_SCALE`) and form the diagonal; if ``full_rank``, the next
    ``Q * M (M - 1) / 2`` entries, ordered ``[Q, pairs]`` with pairs in
    ``numpy.tril_indices(M, -1)`` order, fill the strictly lower triangle.

    :returns: ``[N, Q, M]`` (mean-field) or ``[N, Q, M, M]`` (full-rank).
    """
    diag_size = num_inducing * output_dim
    diag = tf.maximum(tf.math.softplus(raw[:, :diag_size]), MIN_SCALE)  # [N, M * Q]
    diag = tf.transpose(tf.reshape(diag, [-1, num_inducing, output_dim]), [0, 2, 1])  # [N, Q, M]
    if not full_rank:
        return diag
    num_pairs = num_inducing * (num_inducing - 1) // 2
    off = tf.reshape(raw[:, diag_size:], [-1, output_dim, num_pairs])  # [N, Q, pairs]
    gather_index = np.zeros((num_inducing, num_inducing), dtype=np.int32)
    rows, cols = np.tril_indices(num_inducing, -1)
    gather_index[rows, cols] = np.arange(1, num_pairs + 1)
    padded = tf.pad(off, [[0, 0], [0, 0], [1, 0]])  # index 0 -> zero, [N, Q, pairs + 1]
    lower = tf.gather(padded, gather_index.reshape(-1), axis=-1)  # [N, Q, M * M]
    lower = tf.reshape(lower, [-1, output_dim, num_inducing, num_inducing])
    return tf.linalg.set_diag(lower, diag)  # [N, Q, M, M]


class _InferenceBase(tf_keras.layers.Layer):
    """Shared arguments and validation of the inference functions."""

    def __init__(
        self,
        num_inducing: int,
        output_dim: int,
        *,
        full_rank: bool = False,
        hidden_layers: int = 2,
        seed: Optional[int] = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_inducing = check_positive_int("num_inducing", num_inducing)
        self.output_dim = check_positive_int("output_dim", output_dim)
        self.hidden_layers = check_nonnegative_int("hidden_layers", hidden_layers)
        if not isinstance(full_rank, bool):
            raise TypeError(f"full_rank: expected a bool, got {full_rank!r}")
        self.full_rank = full_rank
        self.seed = seed

    def _seed(self, offset: int) -> Optional[int]:
        return None if self.seed is None else self.seed + 1000 * offset

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            num_inducing=self.num_inducing,
            output_dim=self.output_dim,
            full_rank=self.full_rank,
            hidden_layers=self.hidden_layers,
            seed=self.seed,
        )
        return config


class InducingInit(str, enum.Enum):
    """Where the affine inducing points ``Z[n, m] = W_m h_n + b_m`` start.

    * ``"global"``: ``W_m = 0``, so every datapoint starts with the same ``M`` points ``b_m``
      (like a sparse GP's global inducing points) and the kernel makes the layer
      input-dependent from the first step; ``W_m`` then learns how the points follow the input.
    * ``"input"`` (the paper): ``W_m = I``, noisy copies ``h_n + b_m`` of the input. With a
      stationary kernel ``K_uu`` and ``k(h_n, Z_n)`` then do not depend on ``h_n`` at the start,
      and the layer's mean is the output of the ``q(u)`` network alone until ``W_m`` moves
      away from ``I``; training is much slower (``docs/experiments/learning.md``).
    """

    GLOBAL = "global"
    INPUT = "input"


@tf_keras.utils.register_keras_serializable(package="gpflux_avdgp")
class AffineInference(_InferenceBase):
    """The paper's inference function: affine maps for ``Z``, MLPs ``g`` and ``h`` for q(u).

    ``Z[n, m] = W_m h_n + b_m`` with ``W_m`` ``[D, D]`` and ``b_m`` ``[D]``; ``b_m`` starts
    uniform in ``+-1/sqrt(D)`` and ``W_m`` at zero (``inducing_init="global"``, the default)
    or at the identity (``"input"``, the paper), see :class:`InducingInit`. ``g`` and ``h``
    have ``hidden_layers`` hidden layers of width ``min(D, output size)`` and LeakyReLU(0.2);
    their outputs start equal across the ``M`` inducing points, with scales starting at one.

    :param num_inducing: ``M``, inducing points per datapoint.
    :param output_dim: ``Q``, outputs of the GP layer.
    :param full_rank: full-rank Cholesky ``q_sqrt`` instead of mean-field.
    :param hidden_layers: hidden layers of each MLP (the paper: 2).
    :param inducing_init: ``"global"`` (default) or ``"input"`` (the paper).
    :param seed: seed for the initialisers.
    """

    def __init__(
        self,
        num_inducing: int,
        output_dim: int,
        *,
        inducing_init: str | InducingInit = InducingInit.GLOBAL,
        **kwargs,
    ):
        super().__init__(num_inducing, output_dim, **kwargs)
        self.inducing_init = check_choice("inducing_init", inducing_init, InducingInit)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(inducing_init=self.inducing_init.value)
        return config

    def build(self, input_shape: tf.TensorShape) -> None:
        dim = int(input_shape[-1])
        self.input_dim = dim
        m, q = self.num_inducing, self.output_dim
        self.affine_weights = self.add_weight(
            name="affine_weights",
            shape=(m, dim, dim),
            initializer=tf_keras.initializers.Constant(
                np.tile(
                    np.eye(dim) * (self.inducing_init is InducingInit.INPUT), (m, 1, 1)
                ).tolist()
            ),
        )  # W_m, [M, D, D]
        bound = 1.0 / np.sqrt(dim)
        self.affine_biases = self.add_weight(
            name="affine_biases",
            shape=(m, dim),
            initializer=tf_keras.initializers.RandomUniform(-bound, bound, seed=self._seed(1)),
        )  # b_m, [M, D]
        mean_size = m * q
        scale_size = scale_output_size(m, q, self.full_rank)
        self.mean_network = build_mlp(
            mean_size,
            min(dim, mean_size),
            self.hidden_layers,
            final_kernel_initializer=_TiledGlorot(q, m, seed=self._seed(2)),
            final_bias_initializer=tf_keras.initializers.Zeros(),
            dtype=self.dtype,
            name="mean_network",
            seed=self._seed(3),
        )
        self.scale_network = build_mlp(
            scale_size,
            min(dim, scale_size),
            self.hidden_layers,
            final_kernel_initializer=_TiledGlorot(q, m, seed=self._seed(4)),
            final_bias_initializer=_scale_bias(m * q, scale_size),
            dtype=self.dtype,
            name="scale_network",
            seed=self._seed(5),
        )
        # build on a typed Input: .build((None, dim)) makes a float32 Input that rounds h
        self.mean_network(tf_keras.Input((dim,), dtype=self.dtype))
        self.scale_network(tf_keras.Input((dim,), dtype=self.dtype))
        super().build(input_shape)

    def call(self, inputs: tf.Tensor) -> AmortizedParameters:
        """:param inputs: amortization input ``h``, ``[N, D]``."""
        m, dim = self.num_inducing, self.input_dim
        weights = tf.reshape(self.affine_weights, [m * dim, dim])  # rows (m, i), a view
        inducing = tf.matmul(inputs, weights, transpose_b=True)  # (W_m h)_i, [N, M D]
        inducing = tf.reshape(inducing, [-1, m, dim])  # [N, M, D]
        inducing += self.affine_biases
        q_mu = tf.reshape(self.mean_network(inputs), [-1, self.num_inducing, self.output_dim])
        q_sqrt = raw_to_q_sqrt(
            self.scale_network(inputs), self.num_inducing, self.output_dim, self.full_rank
        )
        return AmortizedParameters(inducing, q_mu, q_sqrt)


@tf_keras.utils.register_keras_serializable(package="gpflux_avdgp")
class MLPInference(_InferenceBase):
    """The original IDSGP inference function: one MLP outputs ``Z``, ``q_mu`` and ``q_sqrt``.

    The MLP has ``hidden_layers`` hidden layers of width ``min(D, output size)`` and
    LeakyReLU(0.2); its output ``[M D | M Q | scale]`` is split into the three parameters.
    Use it for the paper's inference-function ablation.
    """

    def build(self, input_shape: tf.TensorShape) -> None:
        dim = int(input_shape[-1])
        self.input_dim = dim
        m, q = self.num_inducing, self.output_dim
        scale_size = scale_output_size(m, q, self.full_rank)
        total = m * dim + m * q + scale_size
        bias = np.zeros(total)
        bias[m * dim + m * q : m * dim + m * q + m * q] = _SOFTPLUS_INV_ONE
        self.network = build_mlp(
            total,
            min(dim, total),
            self.hidden_layers,
            final_kernel_initializer=tf_keras.initializers.GlorotUniform(seed=self._seed(1)),
            final_bias_initializer=tf_keras.initializers.Constant(bias.tolist()),
            dtype=self.dtype,
            name="network",
            seed=self._seed(2),
        )
        self.network(tf_keras.Input((dim,), dtype=self.dtype))
        super().build(input_shape)

    def call(self, inputs: tf.Tensor) -> AmortizedParameters:
        """:param inputs: amortization input ``h``, ``[N, D]``."""
        m, q, dim = self.num_inducing, self.output_dim, self.input_dim
        raw = self.network(inputs)  # [N, total]
        inducing = tf.reshape(raw[:, : m * dim], [-1, m, dim])
        q_mu = tf.reshape(raw[:, m * dim : m * dim + m * q], [-1, m, q])
        q_sqrt = raw_to_q_sqrt(raw[:, m * dim + m * q :], m, q, self.full_rank)
        return AmortizedParameters(inducing, q_mu, q_sqrt)
