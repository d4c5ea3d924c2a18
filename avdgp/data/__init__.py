"""Data: CSV and ``.npz`` files read and checked, splits, standardisation, shards larger than
memory, and the ``tf.data`` pipelines training reads.

Every problem with the user's data is a :class:`DataError` (a ``ValueError``) with a one-line
message naming the file, row and column. Nothing here imports Keras layers or the experiments.
"""

from .batching import epoch_shuffled_batches
from .csv_format import DataError
from .dataset import Dataset, Split
from .labels import MAX_CLASSES, encode_labels, format_label
from .pipeline import csv_shard_dataset
from .shard_files import has_glob_characters, resolve_shards
from .shards import ShardStatistics, scan_csv_shards
from .splits import split_dataset
from .standardizer import Standardizer, check_binary_targets
from .tables import load_dataset, uci_dataset_path

__all__ = [
    "MAX_CLASSES",
    "DataError",
    "Dataset",
    "ShardStatistics",
    "Split",
    "Standardizer",
    "check_binary_targets",
    "csv_shard_dataset",
    "encode_labels",
    "epoch_shuffled_batches",
    "format_label",
    "has_glob_characters",
    "load_dataset",
    "resolve_shards",
    "scan_csv_shards",
    "split_dataset",
    "uci_dataset_path",
]
