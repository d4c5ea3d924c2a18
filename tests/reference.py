"""NumPy loop references for the maths of gpflux_avdgp (GPflow ``tests/.../reference.py`` style).

Everything here is written from the formulas in ``docs/maths.md`` and the paper with plain NumPy
and explicit Python loops over datapoints, sigma points, outputs and inducing points. Nothing
here calls the package (or TensorFlow): the helpers in the last section only read a built
layer's weights as arrays. A test comparing the two checks the vectorised TensorFlow code
against an independent derivation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import scipy.special

KernelFn = Callable[[np.ndarray, np.ndarray], float]
DenseWeights = Sequence[tuple[np.ndarray, np.ndarray]]

#: LeakyReLU(0.2) as tf_keras applies it: the layer stores ``alpha`` with
#: ``backend.cast_to_floatx`` (float32 by default), so even a float64 network uses the slope
#: ``float32(0.2) = 0.2000000030``. Using exactly 0.2 here would differ by ~1.5e-8 relative.
LEAKY_SLOPE = float(np.float32(0.2))
#: Lower bound of ``q_sqrt``'s diagonal (the package's ``inference.MIN_SCALE``).
MIN_SCALE = 1e-6


# ------------------------------------------------------------------------------------ kernels
def _scaled_distance(x: np.ndarray, y: np.ndarray, lengthscales) -> float:
    lengthscales = np.broadcast_to(np.asarray(lengthscales, dtype=float), x.shape)
    total = 0.0
    for d in range(x.shape[0]):
        total += ((x[d] - y[d]) / lengthscales[d]) ** 2
    return math.sqrt(total)


def matern52(variance: float, lengthscales) -> KernelFn:
    """``k(x, y) = s2 (1 + sqrt(5) r + 5 r^2 / 3) exp(-sqrt(5) r)``, ``r`` the scaled distance."""

    def k(x: np.ndarray, y: np.ndarray) -> float:
        r = _scaled_distance(x, y, lengthscales)
        return (
            variance * (1.0 + math.sqrt(5.0) * r + 5.0 / 3.0 * r**2) * math.exp(-math.sqrt(5) * r)
        )

    return k


def squared_exponential(variance: float, lengthscales) -> KernelFn:
    """``k(x, y) = s2 exp(-r^2 / 2)``."""

    def k(x: np.ndarray, y: np.ndarray) -> float:
        r = _scaled_distance(x, y, lengthscales)
        return variance * math.exp(-0.5 * r**2)

    return k


def linear(variance, active_dims: Sequence[int] | None = None) -> KernelFn:
    """``k(x, y) = sum_d s2_d x_d y_d`` over the active dimensions."""

    def k(x: np.ndarray, y: np.ndarray) -> float:
        dims = range(x.shape[0]) if active_dims is None else active_dims
        variances = np.broadcast_to(np.asarray(variance, dtype=float), (x.shape[0],))
        return float(sum(variances[d] * x[d] * y[d] for d in dims))

    return k


def polynomial(variance: float, offset: float, degree: float) -> KernelFn:
    """``k(x, y) = (s2 x.y + offset)^degree``."""

    def k(x: np.ndarray, y: np.ndarray) -> float:
        return (variance * float(sum(x[d] * y[d] for d in range(x.shape[0]))) + offset) ** degree

    return k


def pointwise_covariances(kernel: KernelFn, inducing: np.ndarray, locations: np.ndarray):
    """``Kuu [B, M, M]``, ``Kuf [B, M, P]``, ``kff [B, P]`` with datapoint ``b``'s own ``Z_b``."""
    batch, num_inducing, _ = inducing.shape
    num_points = locations.shape[1]
    kuu = np.zeros((batch, num_inducing, num_inducing))
    kuf = np.zeros((batch, num_inducing, num_points))
    kff = np.zeros((batch, num_points))
    for b in range(batch):
        for i in range(num_inducing):
            for j in range(num_inducing):
                kuu[b, i, j] = kernel(inducing[b, i], inducing[b, j])
            for p in range(num_points):
                kuf[b, i, p] = kernel(inducing[b, i], locations[b, p])
        for p in range(num_points):
            kff[b, p] = kernel(locations[b, p], locations[b, p])
    return kuu, kuf, kff


# ------------------------------------------------------------------------------------ Gaussians
def q_covariance(q_sqrt_nq: np.ndarray) -> np.ndarray:
    """Covariance from one output's ``q_sqrt``: ``diag(s^2)`` ``[M]`` or ``L L^T`` ``[M, M]``."""
    if q_sqrt_nq.ndim == 1:
        return np.diag(q_sqrt_nq**2)
    return q_sqrt_nq @ q_sqrt_nq.T


def gaussian_kl(mu0: np.ndarray, cov0: np.ndarray, mu1: np.ndarray, cov1: np.ndarray) -> float:
    """``KL(N(mu0, cov0) || N(mu1, cov1))``."""
    dim = mu0.shape[0]
    cov1_inv = np.linalg.inv(cov1)
    diff = mu1 - mu0
    _, logdet0 = np.linalg.slogdet(cov0)
    _, logdet1 = np.linalg.slogdet(cov1)
    return 0.5 * (np.trace(cov1_inv @ cov0) + diff @ cov1_inv @ diff - dim + logdet1 - logdet0)


def sparse_gp_marginal(
    kuu: np.ndarray,
    kuf_p: np.ndarray,
    kff_p: float,
    u_mean: np.ndarray,
    u_cov: np.ndarray,
    prior_mean_z: np.ndarray,
    prior_mean_f: float,
):
    """Marginal of ``f(x)`` under ``q(u) = N(u_mean, u_cov)``, ``p(u) = N(m(Z), Kuu)``.

    ``mean = m(x) + k_xu Kuu^-1 (u_mean - m(Z))``,
    ``var = k_xx - k_xu Kuu^-1 k_ux + k_xu Kuu^-1 u_cov Kuu^-1 k_ux``.
    """
    kuu_inv = np.linalg.inv(kuu)
    alpha = kuu_inv @ kuf_p  # [M]
    mean = prior_mean_f + alpha @ (u_mean - prior_mean_z)
    var = kff_p - kuf_p @ kuu_inv @ kuf_p + alpha @ u_cov @ alpha
    return mean, var


def unwhiten(kuu: np.ndarray, q_mu: np.ndarray, q_cov: np.ndarray, prior_mean_z: np.ndarray):
    """``q(v) = N(q_mu, S)`` with ``u = m(Z) + L v`` gives ``q(u) = N(m(Z) + L q_mu, L S L^T)``."""
    chol = np.linalg.cholesky(kuu)
    return prior_mean_z + chol @ q_mu, chol @ q_cov @ chol.T


def conditional(kuu, kuf, kff, q_mu, q_sqrt, *, whiten: bool):
    """Loop reference of ``amortized_conditional`` (zero mean function): ``[N, P, Q]`` twice."""
    batch, num_inducing, num_points = kuf.shape
    num_outputs = q_mu.shape[-1]
    mean = np.zeros((batch, num_points, num_outputs))
    var = np.zeros((batch, num_points, num_outputs))
    zeros = np.zeros(num_inducing)
    for n in range(batch):
        for q in range(num_outputs):
            u_mean, u_cov = q_mu[n, :, q], q_covariance(q_sqrt[n, q])
            if whiten:
                u_mean, u_cov = unwhiten(kuu[n], u_mean, u_cov, zeros)
            for p in range(num_points):
                mean[n, p, q], var[n, p, q] = sparse_gp_marginal(
                    kuu[n], kuf[n, :, p], kff[n, p], u_mean, u_cov, zeros, 0.0
                )
    return mean, var


def kl(kuu, q_mu, q_sqrt, *, whiten: bool) -> np.ndarray:
    """Loop reference of ``amortized_kl``: ``sum_q KL(q(u_q) || p(u_q))`` per problem, ``[N]``."""
    batch, num_inducing, num_outputs = q_mu.shape
    out = np.zeros(batch)
    zeros = np.zeros(num_inducing)
    for n in range(batch):
        for q in range(num_outputs):
            cov = q_covariance(q_sqrt[n, q])
            if whiten:
                out[n] += gaussian_kl(q_mu[n, :, q], cov, zeros, np.eye(num_inducing))
            else:
                out[n] += gaussian_kl(q_mu[n, :, q], cov, zeros, kuu[n])
    return out


def anchor_weight(kernel: KernelFn, inputs: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    """``a(h) = k(h, C) K_CC^-1 k(C, h) / k(h, h)`` per row of ``inputs``, explicit inverse."""
    kcc_inv = np.linalg.inv(gram(kernel, anchors, anchors))
    out = np.zeros(len(inputs))
    for n, h in enumerate(inputs):
        khc = gram(kernel, h[None], anchors)[0]
        out[n] = khc @ kcc_inv @ khc / kernel(h, h)
    return out


def reach_weight(inputs: np.ndarray, anchors: np.ndarray, reach: float, scale: float):
    """The reach gate ``exp(-(max(0, d - r) / (s r))^2 / 2)`` of each row's distance ``d`` to
    its nearest anchor, ``[N]``; 1 where ``r = 0``."""
    out = np.ones(len(inputs))
    for n, h in enumerate(inputs):
        nearest = min(math.sqrt(np.sum((h - c) ** 2)) for c in anchors)
        if reach > 0:
            out[n] = math.exp(-0.5 * (max(0.0, nearest - reach) / (scale * reach)) ** 2)
    return out


def range_weight(inputs, lower, upper, spread, scale: float) -> np.ndarray:
    """The range gate ``exp(-(e / s)^2 / 2)``, ``e`` the largest distance beyond the range
    ``[lower_d, upper_d]`` over the inputs ``d`` with ``spread_d > 0``, in units of
    ``spread_d``, ``[N]``."""
    out = np.ones(len(inputs))
    for n, x in enumerate(inputs):
        excess = 0.0
        for d in range(len(x)):
            if spread[d] > 0:
                beyond = max(0.0, x[d] - upper[d], lower[d] - x[d])
                excess = max(excess, beyond / spread[d])
        out[n] = math.exp(-0.5 * (excess / scale) ** 2)
    return out


def anchor_spacing(anchors: np.ndarray) -> float:
    """The lower median over anchors of the distance to the nearest anchor at another place."""
    nearest = []
    for k, c in enumerate(anchors):
        others = [np.linalg.norm(c - o) for j, o in enumerate(anchors) if j != k]
        others = [d for d in others if d > 0]
        if others:
            nearest.append(min(others))
    if not nearest:
        return 0.0
    return float(np.sort(nearest)[(len(nearest) - 1) // 2])


def reach_of(inputs: np.ndarray, anchors: np.ndarray) -> float:
    """The ``floor(0.99 (M - 1))``-th smallest nearest-anchor distance of the ``M`` rows not on
    an anchor; half the anchors' spacing if every row is on one."""
    nearest = [min(np.linalg.norm(h - c) for c in anchors) for h in inputs]
    off = np.sort([d for d in nearest if d > 0])
    if len(off) == 0:
        return 0.5 * anchor_spacing(anchors)
    return float(off[int(np.floor(0.99 * (len(off) - 1)))])


def reverted_q(q_mu, q_sqrt, weight):
    """``q_a(v) = N(sqrt(a) m, a S + (1 - a) I)`` per problem and output: the means ``[N, M, Q]``
    and covariances ``[N, Q, M, M]``, from the definition."""
    batch, num_inducing, num_outputs = q_mu.shape
    means = np.zeros_like(q_mu)
    covariances = np.zeros((batch, num_outputs, num_inducing, num_inducing))
    for n in range(batch):
        for q in range(num_outputs):
            means[n, :, q] = math.sqrt(weight[n]) * q_mu[n, :, q]
            covariances[n, q] = weight[n] * q_covariance(q_sqrt[n, q]) + (1.0 - weight[n]) * np.eye(
                num_inducing
            )
    return means, covariances


def gram(kernel: KernelFn, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """``[len(left), len(right)]`` kernel matrix, entry by entry."""
    out = np.zeros((len(left), len(right)))
    for i in range(len(left)):
        for j in range(len(right)):
            out[i, j] = kernel(left[i], right[j])
    return out


def solve_gp_marginals(kernel: KernelFn, z_u, z_v, x, u_mean, u_cov, v_mean, v_cov):
    """SOLVE-GP's ``q(f(x_n))`` (Shi, Titsias and Mnih 2020, unwhitened), ``[N]`` twice.

    ``f = f_u + f_perp``; ``q(u) = N(u_mean, u_cov)`` with ``p(u) = N(0, Kuu)`` and
    ``q(v) = N(v_mean, v_cov)`` with ``p(v) = N(0, Cvv)``, ``v = f_perp(Z_v)``:
    ``mean = k_xu Kuu^-1 u_mean + c_xv Cvv^-1 v_mean`` and
    ``var = k_xu Kuu^-1 u_cov Kuu^-1 k_ux + c_xx - c_xv Cvv^-1 c_vx
    + c_xv Cvv^-1 v_cov Cvv^-1 c_vx``, with ``c(a, b) = k(a, b) - k_au Kuu^-1 k_ub``.
    """
    kuu_inv = np.linalg.inv(gram(kernel, z_u, z_u))
    kuv = gram(kernel, z_u, z_v)
    cvv_inv = np.linalg.inv(gram(kernel, z_v, z_v) - kuv.T @ kuu_inv @ kuv)
    mean, var = np.zeros(len(x)), np.zeros(len(x))
    for n in range(len(x)):
        k_u = gram(kernel, z_u, x[n : n + 1])[:, 0]  # [M1]
        c_v = gram(kernel, z_v, x[n : n + 1])[:, 0] - kuv.T @ kuu_inv @ k_u  # [M2]
        c_xx = kernel(x[n], x[n]) - k_u @ kuu_inv @ k_u
        alpha_u, alpha_v = kuu_inv @ k_u, cvv_inv @ c_v
        mean[n] = alpha_u @ u_mean + alpha_v @ v_mean
        var[n] = alpha_u @ u_cov @ alpha_u + c_xx - c_v @ alpha_v + alpha_v @ v_cov @ alpha_v
    return mean, var


def solve_gp_elbo(kernel: KernelFn, z_u, z_v, x, y, u_mean, u_cov, v_mean, v_cov, noise):
    """SOLVE-GP's ELBO with a Gaussian likelihood of variance ``noise``: the expected log
    likelihood of every ``y_n`` under :func:`solve_gp_marginals` minus both KL terms."""
    mean, var = solve_gp_marginals(kernel, z_u, z_v, x, u_mean, u_cov, v_mean, v_cov)
    expected = sum(
        -0.5 * math.log(2.0 * math.pi * noise) - 0.5 * ((y[n] - mean[n]) ** 2 + var[n]) / noise
        for n in range(len(x))
    )
    kuu = gram(kernel, z_u, z_u)
    kuv = gram(kernel, z_u, z_v)
    cvv = gram(kernel, z_v, z_v) - kuv.T @ np.linalg.inv(kuu) @ kuv
    kl_u = gaussian_kl(u_mean, u_cov, np.zeros(len(z_u)), kuu)
    kl_v = gaussian_kl(v_mean, v_cov, np.zeros(len(z_v)), cvv)
    return expected - kl_u - kl_v


# ------------------------------------------------------------------------------------ networks
def softplus(x: float) -> float:
    return math.log1p(math.exp(-abs(x))) + max(x, 0.0)


def leaky_relu(x: float) -> float:
    return x if x > 0 else LEAKY_SLOPE * x


def mlp(x: np.ndarray, dense: DenseWeights) -> np.ndarray:
    """One input vector through Dense layers (``y = x W + b``), LeakyReLU(0.2) between them."""
    out = np.asarray(x, dtype=float)
    for i, (kernel, bias) in enumerate(dense):
        nxt = np.zeros(kernel.shape[1])
        for j in range(kernel.shape[1]):
            nxt[j] = bias[j] + sum(out[k] * kernel[k, j] for k in range(kernel.shape[0]))
        if i < len(dense) - 1:
            nxt = np.array([leaky_relu(v) for v in nxt])
        out = nxt
    return out


def scale(x: float) -> float:
    """A diagonal entry of ``q_sqrt``: softplus, at least ``MIN_SCALE``."""
    return max(softplus(x), MIN_SCALE)


def raw_to_q_sqrt(raw: np.ndarray, num_inducing: int, num_outputs: int, full_rank: bool):
    """One datapoint's raw scale outputs to ``[Q, M]`` or ``[Q, M, M]``.

    Layout: ``M * Q`` diagonal entries ordered ``[M, Q]`` (:func:`scale`), then, if full rank,
    ``Q * M (M - 1) / 2`` strictly-lower entries ordered ``[Q, pairs]``, pairs in
    ``numpy.tril_indices(M, -1)`` order.
    """
    m_, q_ = num_inducing, num_outputs
    if not full_rank:
        out = np.zeros((q_, m_))
        for q in range(q_):
            for m in range(m_):
                out[q, m] = scale(raw[m * q_ + q])
        return out
    out = np.zeros((q_, m_, m_))
    rows, cols = np.tril_indices(m_, -1)
    num_pairs = len(rows)
    for q in range(q_):
        for m in range(m_):
            out[q, m, m] = scale(raw[m * q_ + q])
        for k in range(num_pairs):
            out[q, rows[k], cols[k]] = raw[m_ * q_ + q * num_pairs + k]
    return out


def affine_inference(
    h: np.ndarray,
    affine_weights: np.ndarray,
    affine_biases: np.ndarray,
    mean_dense: DenseWeights,
    scale_dense: DenseWeights,
    num_outputs: int,
    full_rank: bool,
):
    """The paper's inference function for a batch ``h`` ``[N, D]``: ``(Z, q_mu, q_sqrt)``.

    ``Z[n, m] = W_m h_n + b_m``; ``q_mu[n] = g(h_n)`` reshaped ``[M, Q]``; ``q_sqrt[n]`` from the
    scale network's raw outputs (see :func:`raw_to_q_sqrt`).
    """
    batch, dim = h.shape
    num_inducing = affine_weights.shape[0]
    inducing = np.zeros((batch, num_inducing, dim))
    q_mu = np.zeros((batch, num_inducing, num_outputs))
    q_sqrt = []
    for n in range(batch):
        for m in range(num_inducing):
            for i in range(dim):
                inducing[n, m, i] = affine_biases[m, i] + sum(
                    affine_weights[m, i, j] * h[n, j] for j in range(dim)
                )
        mean_raw = mlp(h[n], mean_dense)
        for m in range(num_inducing):
            for q in range(num_outputs):
                q_mu[n, m, q] = mean_raw[m * num_outputs + q]
        q_sqrt.append(raw_to_q_sqrt(mlp(h[n], scale_dense), num_inducing, num_outputs, full_rank))
    return inducing, q_mu, np.stack(q_sqrt)


def mlp_inference(h, dense: DenseWeights, num_inducing: int, num_outputs: int, full_rank: bool):
    """The IDSGP inference function: one MLP whose output is ``[M D | M Q | scale]``."""
    batch, dim = h.shape
    inducing = np.zeros((batch, num_inducing, dim))
    q_mu = np.zeros((batch, num_inducing, num_outputs))
    q_sqrt = []
    for n in range(batch):
        raw = mlp(h[n], dense)
        for m in range(num_inducing):
            for i in range(dim):
                inducing[n, m, i] = raw[m * dim + i]
            for q in range(num_outputs):
                q_mu[n, m, q] = raw[num_inducing * dim + m * num_outputs + q]
        scale_raw = raw[num_inducing * dim + num_inducing * num_outputs :]
        q_sqrt.append(raw_to_q_sqrt(scale_raw, num_inducing, num_outputs, full_rank))
    return inducing, q_mu, np.stack(q_sqrt)


# ------------------------------------------------------------------------------------ one layer
def amortized_layer(
    kernel: KernelFn,
    locations: np.ndarray,
    inducing: np.ndarray,
    q_mu: np.ndarray,
    q_sqrt: np.ndarray,
    *,
    whiten: bool,
    jitter: float,
    mean_weights: np.ndarray | None = None,
    mean_bias: np.ndarray | None = None,
):
    """One amortized GP layer at locations ``F`` ``[B, S, D]``: ``(means, vars [B, S, Q], KL [B])``.

    Datapoint ``b`` has inducing points ``Z_b`` ``[M, D]`` and ``q(u_b)``; the mean function is
    ``m(x) = x A + b`` (``mean_weights`` ``[D, Q]``) or zero. Whitened parameters are first
    mapped to ``q(u)`` (:func:`unwhiten`); the KL is then ``KL(q(u) || N(m(Z), Kuu))``, which
    equals the whitened ``KL(N(q_mu, S) || N(0, I))``. ``K_uu`` gets ``jitter`` times its mean
    diagonal added to the diagonal.
    """
    batch, num_points, _ = locations.shape
    num_inducing, num_outputs = q_mu.shape[1], q_mu.shape[2]

    def prior_mean(x: np.ndarray, q: int) -> float:
        if mean_weights is None:
            return 0.0
        return mean_bias[q] + sum(x[d] * mean_weights[d, q] for d in range(x.shape[0]))

    means = np.zeros((batch, num_points, num_outputs))
    variances = np.zeros((batch, num_points, num_outputs))
    kls = np.zeros(batch)
    for b in range(batch):
        kuu = np.zeros((num_inducing, num_inducing))
        for i in range(num_inducing):
            for j in range(num_inducing):
                kuu[i, j] = kernel(inducing[b, i], inducing[b, j])
        scale = sum(kuu[i, i] for i in range(num_inducing)) / num_inducing
        for i in range(num_inducing):
            kuu[i, i] += jitter * scale  # relative to the matrix's own prior variance
        for q in range(num_outputs):
            mean_z = np.array([prior_mean(inducing[b, m], q) for m in range(num_inducing)])
            u_mean, u_cov = q_mu[b, :, q], q_covariance(q_sqrt[b, q])
            if whiten:
                u_mean, u_cov = unwhiten(kuu, u_mean, u_cov, mean_z)
            kls[b] += gaussian_kl(u_mean, u_cov, mean_z, kuu)
            for s in range(num_points):
                x = locations[b, s]
                kuf = np.array([kernel(inducing[b, m], x) for m in range(num_inducing)])
                means[b, s, q], variances[b, s, q] = sparse_gp_marginal(
                    kuu, kuf, kernel(x, x), u_mean, u_cov, mean_z, prior_mean(x, q)
                )
    return means, variances, kls


# ------------------------------------------------------------------------------------ mixtures
def normal_logpdf(y: float, mean: float, var: float) -> float:
    return -0.5 * math.log(2.0 * math.pi * var) - 0.5 * (y - mean) ** 2 / var


def logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def mixture_moments(weights: np.ndarray, means: np.ndarray, variances: np.ndarray):
    """Law of total variance: ``mean = sum w m``, ``var = sum w (v + m^2) - mean^2``."""
    batch, num_points, dim = means.shape
    mean = np.zeros((batch, dim))
    var = np.zeros((batch, dim))
    for b in range(batch):
        for d in range(dim):
            mean[b, d] = sum(weights[b, s] * means[b, s, d] for s in range(num_points))
            second = sum(
                weights[b, s] * (variances[b, s, d] + means[b, s, d] ** 2)
                for s in range(num_points)
            )
            var[b, d] = second - mean[b, d] ** 2
    return mean, var


def gaussian_elbo_loss(y, weights, means, variances, noise_variance: float) -> np.ndarray:
    """``-sum_s w_s sum_d E_{N(f | m, v)}[log N(y_d | f, s2)]`` per datapoint, ``[B]``."""
    batch, num_points, dim = means.shape
    out = np.zeros(batch)
    for b in range(batch):
        for s in range(num_points):
            ell = 0.0
            for d in range(dim):
                m, v = means[b, s, d], variances[b, s, d]
                ell += (
                    -0.5 * math.log(2.0 * math.pi * noise_variance)
                    - 0.5 * ((y[b, d] - m) ** 2 + v) / noise_variance
                )
            out[b] -= weights[b, s] * ell
    return out


def gaussian_mixture_log_density(y, log_weights, means, variances, noise_variance: float):
    """``log sum_s w_s prod_d N(y_d | m_sd, v_sd + s2)`` per datapoint, ``[B]``."""
    batch, num_points, dim = means.shape
    out = np.zeros(batch)
    for b in range(batch):
        terms = []
        for s in range(num_points):
            log_density = sum(
                normal_logpdf(y[b, d], means[b, s, d], variances[b, s, d] + noise_variance)
                for d in range(dim)
            )
            terms.append(log_weights[b, s] + log_density)
        out[b] = logsumexp(terms)
    return out


def normal_cdf(x: float) -> float:
    """``Phi(x) = erfc(-x / sqrt(2)) / 2`` (no cancellation in the lower tail)."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def squashed_probit(x: float, jitter: float) -> float:
    """GPflow's ``inv_probit``: ``jitter + (1 - 2 jitter) Phi(x)`` (``jitter = 1e-3`` there)."""
    return jitter + (1.0 - 2.0 * jitter) * normal_cdf(x)


def probit_mixture_log_density(y, log_weights, means, variances, *, jitter: float):
    """``log sum_s w_s prod_d p_sd^y (1 - p_sd)^(1 - y)``, ``p_sd = Phi(m / sqrt(1 + v))``.

    ``Phi`` squashed into ``[jitter, 1 - jitter]`` as GPflow's Bernoulli likelihood does.
    """
    batch, num_points, dim = means.shape
    out = np.zeros(batch)
    for b in range(batch):
        terms = []
        for s in range(num_points):
            log_density = 0.0
            for d in range(dim):
                p = squashed_probit(means[b, s, d] / math.sqrt(1.0 + variances[b, s, d]), jitter)
                log_density += math.log(p if y[b, d] == 1 else 1.0 - p)
            terms.append(log_weights[b, s] + log_density)
        out[b] = logsumexp(terms)
    return out


def probit_elbo_loss(y, weights, means, variances, *, jitter: float, num_nodes: int):
    """``-sum_s w_s sum_d E_{N(f | m, v)}[log p(y_d | f)]`` by Gauss-Hermite, ``[B]``.

    ``p(y | f) = p^y (1 - p)^(1 - y)`` with ``p = squashed_probit(f)``;
    ``E[g(f)] = pi^-1/2 sum_i a_i g(m + sqrt(2 v) t_i)`` with ``num_nodes`` nodes.
    """
    nodes, node_weights = np.polynomial.hermite.hermgauss(num_nodes)
    batch, num_points, dim = means.shape
    out = np.zeros(batch)
    for b in range(batch):
        for s in range(num_points):
            ell = 0.0
            for d in range(dim):
                for t, a in zip(nodes, node_weights):
                    f = means[b, s, d] + math.sqrt(2.0 * variances[b, s, d]) * t
                    p = squashed_probit(f, jitter)
                    ell += a / math.sqrt(math.pi) * math.log(p if y[b, d] == 1 else 1.0 - p)
            out[b] -= weights[b, s] * ell
    return out


# ------------------------------------------------------------------------------------ layers
def dense_weights(network) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(kernel, bias)`` of every Dense-like layer of a built Keras network, as NumPy."""
    return [
        (layer.kernel.numpy(), layer.bias.numpy())
        for layer in network.layers
        if hasattr(layer, "kernel") and hasattr(layer, "bias")
    ]


def affine_layer_forward(layer, kernel: KernelFn, locations, h, *, jitter: float):
    """An ``AmortizedGPLayer`` with affine inference, from its weights (read as NumPy arrays).

    ``Z``, ``q_mu``, ``q_sqrt`` come from :func:`affine_inference` at ``h`` ``[B, D]``; the GP
    maths from :func:`amortized_layer` at ``locations`` ``[B, S, D]``. ``kernel`` is the NumPy
    kernel with the layer's hyperparameters.

    :returns: ``(means [B, S, Q], variances [B, S, Q], KL [B])``.
    """
    inference = layer.inference
    inducing, q_mu, q_sqrt = affine_inference(
        np.asarray(h),
        inference.affine_weights.numpy(),
        inference.affine_biases.numpy(),
        dense_weights(inference.mean_network),
        dense_weights(inference.scale_network),
        layer.units,
        layer.full_rank,
    )
    mean_weights = mean_bias = None
    if layer.mean_function is not None:
        mean_weights = layer.mean_function.A.numpy()
        mean_bias = layer.mean_function.b.numpy()
    return amortized_layer(
        kernel,
        np.asarray(locations),
        inducing,
        q_mu,
        q_sqrt,
        whiten=layer.whiten,
        jitter=jitter,
        mean_weights=mean_weights,
        mean_bias=mean_bias,
    )


def gaussian_mixture_crps_integral(y, weights, means, variances) -> np.ndarray:
    """CRPS of a Gaussian mixture per row by its definition, ``int (F(z) - [z >= y])^2 dz``,
    integrated numerically (trapezoid on 200001 points reaching 12 standard deviations past the
    mixture): independent of the closed form."""
    out = np.empty(len(y))
    for n in range(len(y)):
        w, m, s = weights[n], means[n], np.sqrt(variances[n])
        low = min(y[n], np.min(m - 12 * s)) - 1.0
        high = max(y[n], np.max(m + 12 * s)) + 1.0
        total = 0.0
        for start, stop, step in ((low, y[n], 0.0), (y[n], high, 1.0)):  # split at the jump
            z = np.linspace(start, stop, 100001)
            cdf = np.sum(w[:, None] * scipy.special.ndtr((z[None] - m[:, None]) / s[:, None]), 0)
            total += np.trapz((cdf - step) ** 2, z)
        out[n] = total
    return out


def mixture_quantile(weights, means, variances, probability: float) -> float:
    """``F^{-1}(p)`` of one mixture ``sum_s w_s N(m_s, v_s)`` by plain bisection on its CDF
    (``F`` summed term by term with ``math.erfc``), bracket widened until it holds the root."""

    def cdf(x: float) -> float:
        return sum(
            w * 0.5 * math.erfc(-(x - m) / math.sqrt(2.0 * v))
            for w, m, v in zip(weights, means, variances)
        )

    low, high = min(means) - 1.0, max(means) + 1.0
    while cdf(low) > probability:
        low -= 2.0 * (high - low)
    while cdf(high) < probability:
        high += 2.0 * (high - low)
    for _ in range(200):
        middle = 0.5 * (low + high)
        if cdf(middle) < probability:
            low = middle
        else:
            high = middle
    return 0.5 * (low + high)
