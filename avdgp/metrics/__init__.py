"""Test metrics for Gaussian-mixture predictive distributions, in plain NumPy (float64).

A predictive distribution for ``N`` scalar targets ``y`` is a Gaussian mixture with ``S``
components per datapoint, given as three arrays of shape ``[N, S]``::

    p(y_n) = sum_s weights[n, s] * N(y_n | means[n, s], variances[n, s])

Every row of ``weights`` is non-negative and sums to one (to within ``1e-6``; the weights are
used as given, not renormalised). A trailing singleton axis is accepted and squeezed: ``y`` may be
``[N, 1]`` and the mixture arrays ``[N, S, 1]`` (one output, as
:class:`~gpflux_avdgp.PredictiveMixture` stores them). To report metrics in the original units
of standardised targets, map the mixture back with :func:`rescale_mixture` first.

Regression: :func:`gaussian_mixture_nll` (log-sum-exp over components), :func:`rmse` of the
mixture mean, :func:`mean_crps` (closed form of Grimit et al., 2006) and
:func:`central_interval_coverage`; :func:`regression_metrics` bundles them. Binary
classification with labels in ``{0, 1}`` and predicted ``p(y = 1)``: :func:`error_rate`,
:func:`brier_score`, :func:`bernoulli_nll` and :func:`expected_calibration_error`, bundled in
:func:`classification_metrics` (the probabilities come from the model's likelihood, through
the library's predictive module). K classes: :func:`multiclass_metrics` (error rate, NLL,
Brier, top-label ECE of ``[N, K]`` class probabilities). :func:`average_ranks` ranks methods
across datasets.

The package imports neither TensorFlow nor GPflow, so it can score predictions saved to disk.
Modules: :mod:`.regression`, :mod:`.quantiles`, :mod:`.classification`, :mod:`.multiclass`,
:mod:`.ranks`, and :mod:`.common` (input checks shared by them).
"""

from .classification import (
    PROBABILITY_CLIP,
    bernoulli_nll,
    brier_score,
    classification_metrics,
    error_rate,
    expected_calibration_error,
)
from .common import DEFAULT_CHUNK_ROWS, WEIGHT_SUM_TOLERANCE
from .multiclass import check_class_probabilities, multiclass_metrics
from .quantiles import (
    central_interval_coverage,
    mixture_cdf,
)
from .ranks import average_ranks
from .regression import (
    gaussian_crps,
    gaussian_mixture_crps,
    gaussian_mixture_log_density,
    gaussian_mixture_nll,
    mean_crps,
    mixture_mean_and_variance,
    regression_metrics,
    rescale_mixture,
    rmse,
)

__all__ = [
    "DEFAULT_CHUNK_ROWS",
    "PROBABILITY_CLIP",
    "WEIGHT_SUM_TOLERANCE",
    "average_ranks",
    "bernoulli_nll",
    "brier_score",
    "check_class_probabilities",
    "central_interval_coverage",
    "classification_metrics",
    "error_rate",
    "expected_calibration_error",
    "gaussian_crps",
    "gaussian_mixture_crps",
    "gaussian_mixture_log_density",
    "gaussian_mixture_nll",
    "mean_crps",
    "mixture_cdf",
    "mixture_mean_and_variance",
    "multiclass_metrics",
    "regression_metrics",
    "rescale_mixture",
    "rmse",
]
