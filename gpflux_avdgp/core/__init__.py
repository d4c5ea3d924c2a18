"""Pure TensorFlow maths of the model: no Keras, no I/O.

* :mod:`~gpflux_avdgp.core.mixture`: the packed Gaussian mixture that flows between layers;
* :mod:`~gpflux_avdgp.core.covariances`: per-datapoint ``K_uu``, ``K_uf`` and ``k_ff``;
* :mod:`~gpflux_avdgp.core.cholesky`: their Cholesky factors with in-graph adaptive jitter;
* :mod:`~gpflux_avdgp.core.conditionals`: the amortized conditional and KL from the factor;
* :mod:`~gpflux_avdgp.core.random`: stateless draws that XLA reproduces.

Modules here import only TensorFlow, GPflow's kernels and :mod:`gpflux_avdgp.checks`.
"""
