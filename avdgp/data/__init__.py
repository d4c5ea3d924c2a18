"""Data: CSV and ``.npz`` files read and checked, splits, standardisation, shards larger than
memory, and the ``tf.data`` pipelines training reads.

Every problem with the user's data is a :class:`DataError` (a ``ValueError``) with a one-line
message naming the file, row and column. Nothing here imports Keras layers or the experiments.

What this package exports reads and checks tables with NumPy alone, so ``avdgp fit`` refuses a
bad file before TensorFlow loads. The ``tf.data`` pipelines load TensorFlow and are imported from
their modules: :func:`avdgp.data.batching.epoch_shuffled_batches`,
:func:`avdgp.data.pipeline.csv_shard_dataset` and :func:`avdgp.data.shards.scan_csv_shards`.
"""

from .csv_format import DataError
from .dataset import Dataset, Split
from .labels import MAX_CLASSES, encode_labels, format_label
from .shard_files import has_glob_characters, resolve_shards
from .splits import split_dataset
from .standardizer import Standardizer, check_binary_targets
from .tables import load_dataset, uci_dataset_path

__all__ = [
    "MAX_CLASSES",
    "DataError",
    "Dataset",
    "Split",
    "Standardizer",
    "check_binary_targets",
    "encode_labels",
    "format_label",
    "has_glob_characters",
    "load_dataset",
    "resolve_shards",
    "split_dataset",
    "uci_dataset_path",
]
