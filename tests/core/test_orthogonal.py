"""Anchors with a global posterior (``core/orthogonal.py``) against a NumPy construction of
``f = f_C + f_perp`` with explicit inverses, datapoint by datapoint."""

import gpflow
import numpy as np
import pytest
import tensorflow as tf

from gpflux_avdgp.core.cholesky import jittered_cholesky
from gpflux_avdgp.core.conditionals import amortized_conditional
from gpflux_avdgp.core.orthogonal import anchor_projections, global_part, orthogonal_covariances


def _se(a, b, lengthscale, variance):
    d2 = ((a[:, None, :] - b[None, :, :]) / lengthscale) ** 2
    return variance * np.exp(-0.5 * d2.sum(-1))


@pytest.mark.parametrize("full_rank", [False, True])
def test_the_marginal_is_the_sum_of_the_global_and_the_orthogonal_parts(full_rank):
    rng = np.random.default_rng(0)
    n, m, p, k, d, q = 3, 4, 5, 6, 2, 2
    lengthscale, variance = 0.9, 1.3
    anchors = rng.normal(size=(k, d))
    inducing = rng.normal(size=(n, m, d))
    locations = rng.normal(size=(n, p, d))
    m_c = rng.normal(size=(k, q))
    m_v = rng.normal(size=(n, m, q))
    if full_rank:
        r_c = np.tril(rng.normal(size=(q, k, k))) * 0.5
        s_v = np.tril(rng.normal(size=(n, q, m, m))) * 0.5
    else:
        r_c, s_v = rng.uniform(0.2, 1.0, (q, k)), rng.uniform(0.2, 1.0, (n, q, m))
    kernel = gpflow.kernels.SquaredExponential(lengthscales=lengthscale, variance=variance)

    chol_cc = jittered_cholesky(kernel.K(anchors)[None])[0]
    k_cz = np.stack([_se(anchors, z, lengthscale, variance) for z in inducing])
    k_cf = np.stack([_se(anchors, f, lengthscale, variance) for f in locations])
    k_c = np.concatenate([k_cz, k_cf], axis=-1).transpose(1, 0, 2)  # [K, N, M + P]
    b_z, b_f = anchor_projections(chol_cc, k_c, m)
    kuu = np.stack([_se(z, z, lengthscale, variance) for z in inducing])
    kuf = np.stack([_se(z, f, lengthscale, variance) for z, f in zip(inducing, locations)])
    kff = np.full((n, p), variance)
    c_uu, c_uf, c_ff = orthogonal_covariances(kuu, kuf, kff, b_z, b_f)
    chol = jittered_cholesky(c_uu)
    mean, var = amortized_conditional(
        chol, c_uf, c_ff, tf.constant(m_v), tf.constant(s_v), whiten=True
    )
    g_mean, g_var = global_part(b_f, tf.constant(m_c), tf.constant(r_c))
    mean, var = (mean + g_mean).numpy(), (var + g_var).numpy()

    kcc = _se(anchors, anchors, lengthscale, variance)
    jitter = gpflow.config.default_jitter()  # relative, as jittered_cholesky's first try
    kcc = kcc + jitter * np.mean(np.diag(kcc)) * np.eye(k)
    l_c = np.linalg.cholesky(kcc)
    for i in range(n):
        z, f = inducing[i], locations[i]
        k_fc, k_zc = _se(f, anchors, lengthscale, variance), _se(z, anchors, lengthscale, variance)
        project = np.linalg.solve(kcc, np.eye(k))
        c = {  # the orthogonal kernel on Z and F
            "zz": _se(z, z, lengthscale, variance) - k_zc @ project @ k_zc.T,
            "zf": _se(z, f, lengthscale, variance) - k_zc @ project @ k_fc.T,
            "ff": _se(f, f, lengthscale, variance) - k_fc @ project @ k_fc.T,
        }
        l_v = np.linalg.cholesky(c["zz"] + jitter * np.mean(np.diag(c["zz"])) * np.eye(m))
        to_f_c = k_fc @ project @ l_c  # f_C(F) = k_FC K_CC^-1 L_C v_C
        to_f_perp = c["zf"].T @ np.linalg.inv(l_v).T  # E[f_perp(F) | v] = C_FZ L^-T v
        for out in range(q):
            cov_c = r_c[out] @ r_c[out].T if full_rank else np.diag(r_c[out] ** 2)
            s = s_v[i, out] @ s_v[i, out].T if full_rank else np.diag(s_v[i, out] ** 2)
            want_mean = to_f_c @ m_c[:, out] + to_f_perp @ m_v[i, :, out]
            want_cov = (
                to_f_c @ cov_c @ to_f_c.T
                + c["ff"]
                - to_f_perp @ to_f_perp.T
                + to_f_perp @ s @ to_f_perp.T
            )
            np.testing.assert_allclose(mean[i, :, out], want_mean, rtol=1e-6, atol=1e-8)
            np.testing.assert_allclose(var[i, :, out], np.diag(want_cov), rtol=1e-6, atol=1e-8)


def test_far_from_the_anchors_the_orthogonal_part_is_the_whole_prior():
    kernel = gpflow.kernels.SquaredExponential(lengthscales=0.5)
    anchors = np.array([[0.0], [0.5], [1.0]])
    chol_cc = jittered_cholesky(kernel.K(anchors)[None])[0]

    def projections(points):
        k_c = kernel.K(anchors, points).numpy()[:, None]  # [K, 1, P]
        return anchor_projections(chol_cc, np.concatenate([k_c, k_c], axis=-1), len(points))

    _, b_f = projections(np.full((2, 1), 20.0))
    assert np.abs(b_f.numpy()).max() < 1e-30
    _, b_f = projections(np.array([[0.0], [1.0]]))
    explained = np.sum(b_f.numpy() ** 2, axis=1)  # k_fC K_CC^-1 k_Cf = k(f, f) on an anchor
    np.testing.assert_allclose(explained, 1.0, rtol=1e-5)
