"""Training: one model on one split, whatever the source of its data (:mod:`.skeleton`, with
arrays :mod:`.runner`, with CSV shards :mod:`.streaming`, the memory a step needs
:mod:`.memory`), settings and float type (:mod:`.config`), ``model.fit`` with selection, resume and
divergence reports (:mod:`.fit`), progress (:mod:`.progress`), the validation-NLL callback
(:mod:`.callbacks`), distribution strategies (:mod:`.distribute`), the typed result of a run
(:mod:`.record`) and run folders (:mod:`.rundir`). Nothing here imports the experiments or
the command line."""

from .config import FLOAT_TYPES, JITTER, TrainConfig, TrainingDiverged, float_type
from .fit import best_epoch_callbacks, fit_model, fit_model_on_dataset
from .progress import EpochProgress
from .record import DataColumns, RunRecord

__all__ = [
    "DataColumns",
    "EpochProgress",
    "FLOAT_TYPES",
    "JITTER",
    "RunRecord",
    "TrainConfig",
    "TrainingDiverged",
    "best_epoch_callbacks",
    "fit_model",
    "fit_model_on_dataset",
    "float_type",
]
