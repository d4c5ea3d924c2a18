"""gpflux_avdgp: amortized variational inference for deep Gaussian processes in GPflux/Keras.

Layers read and write packed Gaussian mixtures (:mod:`gpflux_avdgp.core.mixture`), so an amortized
deep GP is a ``tf_keras.Sequential`` trained with ``model.fit`` and
:class:`~gpflux_avdgp.AVDGPLoss`.
"""

from ._quiet_tensorflow import import_tensorflow_quietly, running_the_cli

if running_the_cli():  # a library import leaves stderr and the devices alone
    import_tensorflow_quietly()

from . import kernels, metrics
from ._version import __version__  # noqa: E402, F401 (re-exported)
from .avdgp_model import AVDGPModel
from .core.conditionals import amortized_conditional, amortized_kl
from .core.covariances import pointwise_covariances
from .core.mixture import GaussianMixture, to_mixture
from .data import ShardStatistics, csv_shard_dataset, resolve_shards, scan_csv_shards
from .deep_gp import MixtureLikelihoodLayer, as_deep_gp
from .inference import AffineInference, AmortizedParameters, InducingInit, MLPInference
from .io.saving import ModelFileError, load_model
from .io.serving import export
from .keras_metrics import (
    MixtureAccuracy,
    MixtureBrier,
    MixtureCRPS,
    MixtureMetric,
    MixtureNLL,
    MixtureRMSE,
)
from .layers import (
    AmortizedGPLayer,
    InferenceKind,
    KLConvention,
    MixtureLayer,
    MixtureMean,
    MixtureSample,
    SigmaPointGPLayer,
    TrainableLikelihood,
)
from .models import build_avdgp
from .objectives import AVDGPLoss, Objective, mixture_log_density
from .prediction import PredictiveMixture, predict_mixture
from .propagation import PropagationRule, propagate
from .training.callbacks import ValidationNLL

__all__ = [
    "AVDGPLoss",
    "AVDGPModel",
    "AffineInference",
    "AmortizedGPLayer",
    "AmortizedParameters",
    "GaussianMixture",
    "InducingInit",
    "InferenceKind",
    "KLConvention",
    "MLPInference",
    "MixtureAccuracy",
    "MixtureBrier",
    "MixtureCRPS",
    "MixtureLayer",
    "MixtureLikelihoodLayer",
    "MixtureMean",
    "MixtureMetric",
    "MixtureNLL",
    "MixtureRMSE",
    "MixtureSample",
    "ModelFileError",
    "Objective",
    "PredictiveMixture",
    "PropagationRule",
    "ShardStatistics",
    "SigmaPointGPLayer",
    "TrainableLikelihood",
    "ValidationNLL",
    "amortized_conditional",
    "amortized_kl",
    "as_deep_gp",
    "build_avdgp",
    "csv_shard_dataset",
    "export",
    "kernels",
    "load_model",
    "metrics",
    "mixture_log_density",
    "pointwise_covariances",
    "predict_mixture",
    "propagate",
    "resolve_shards",
    "scan_csv_shards",
    "to_mixture",
]
