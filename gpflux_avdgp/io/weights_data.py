"""The weights of a model file checked as data, before Keras or TensorFlow read them.

HDF5 can store a dataset's bytes outside the file (external storage, virtual datasets,
external links): a crafted ``model.weights.h5`` would make Keras read any local file into a
weight, and ``avdgp export`` copy it into the exported variables. HDF5 also decompresses
filtered chunks and fills unallocated ones, so a tiny file can declare gigabytes. Keras writes
every weight as a plain contiguous dataset of numbers; :func:`check_h5_weights` accepts exactly
that, reading only the file's metadata:

* hard links only (no soft or external links), each object reached once (a tree, as Keras
  writes: a group linked into itself would make the walk endless), at most
  :data:`~.limits.MAX_WEIGHT_OBJECTS` groups and datasets;
* every dataset numeric (``float``, ``int``, ``uint``, ``bool``), not virtual, without external
  storage or filters, its bytes all stored in the file (stored size equal to its size), so the
  data Keras reads is bounded by the file's own size.

:func:`check_checkpoint_index` does the same for a SavedModel's ``variables/``: the index
(a table of names, dtypes and shapes) declares no tensor larger than the data files hold.
"""

from __future__ import annotations

import os
from typing import IO, Union

import h5py
import numpy as np
import tensorflow as tf

from .errors import ModelFileError, UnsafeModelError
from .errors import one_line as _one_line
from .limits import MAX_WEIGHT_OBJECTS, MAX_WEIGHTS_BYTES, describe

__all__ = ["check_checkpoint_index", "check_h5_weights"]

_NUMERIC_KINDS = "fiub"


def check_h5_weights(source: str, file: Union[str, IO[bytes]]) -> None:
    """Refuse a weights file holding anything but plain numeric datasets stored in the file.

    :param source: the file's name for messages (``"model.keras/model.weights.h5"``).
    :param file: a path or a readable, seekable binary file.
    :raises UnsafeModelError: a link, external or virtual storage, a filter or an unallocated
        dataset, a non-numeric dataset, or more objects than the cap, in one line.
    :raises ModelFileError: a file HDF5 cannot read.
    """
    try:
        with h5py.File(file, "r") as weights:
            _check_group(source, weights, [0])
    except (UnsafeModelError, ModelFileError):
        raise
    except Exception as error:  # h5py raises OSError, KeyError, ValueError on damaged files
        raise ModelFileError(
            f"{source}: not a valid HDF5 weights file: {_one_line(error)}"
        ) from error


def _check_group(source: str, group, count: list[int]) -> None:
    pending, seen = [group], {group.id}
    while pending:
        group = pending.pop()
        for name in group:  # names only; nothing is dereferenced before its link is checked
            where = f"{group.name.rstrip('/')}/{name}"
            link = group.get(name, getlink=True)
            if not isinstance(link, h5py.HardLink):
                raise UnsafeModelError(
                    f"{source}: refused: {where} is a {type(link).__name__} (model.save writes "
                    "only datasets stored in the file)"
                )
            count[0] += 1
            if count[0] > MAX_WEIGHT_OBJECTS:
                raise UnsafeModelError(
                    f"{source}: refused: more than {MAX_WEIGHT_OBJECTS:,} groups and datasets "
                    "(the cap on weights objects)"
                )
            item = group[name]
            if item.id in seen:  # h5py's object ids compare by file and address
                raise UnsafeModelError(
                    f"{source}: refused: {where} links to an object reached before (model.save "
                    "writes a tree; a link loop would make reading it endless)"
                )
            seen.add(item.id)
            if isinstance(item, h5py.Group):
                pending.append(item)
            elif isinstance(item, h5py.Dataset):
                _check_dataset(source, where, item)
            else:
                raise UnsafeModelError(f"{source}: refused: {where} is a {type(item).__name__}")


def _check_dataset(source: str, where: str, dataset) -> None:
    problem = _dataset_problem(dataset)
    if problem is not None:
        raise UnsafeModelError(f"{source}: refused: dataset {where} {problem}")


def _dataset_problem(dataset) -> Union[str, None]:
    """Why ``dataset`` is not a plain numeric array stored in the file, or ``None``."""
    if dataset.is_virtual:
        return "is virtual (its data lives in other files)"
    plist = dataset.id.get_create_plist()
    if plist.get_external_count() > 0:
        return "has external storage (its data lives in another file)"
    if plist.get_nfilters() > 0:
        return "is compressed or filtered (model.save writes plain data)"
    if dataset.dtype.kind not in _NUMERIC_KINDS or dataset.dtype.itemsize > 16:
        return f"holds {dataset.dtype}, not numbers"
    size = int(np.prod(dataset.shape, dtype=np.float64)) * dataset.dtype.itemsize
    if size > MAX_WEIGHTS_BYTES:
        return f"declares {describe(size)}, over the cap of {describe(MAX_WEIGHTS_BYTES)}"
    stored = dataset.id.get_storage_size()
    if stored != size:
        return f"declares {describe(size)} but stores {describe(stored)} in the file"
    return None


def check_checkpoint_index(source: str, prefix: str) -> None:
    """Refuse a SavedModel checkpoint whose index declares more than its data files hold.

    :param source: the folder's name for messages.
    :param prefix: the checkpoint prefix (``.../variables/variables``).
    :raises UnsafeModelError: a declared tensor larger than the data files, or data files
        over :data:`~.limits.MAX_WEIGHTS_BYTES`, in one line.
    :raises ModelFileError: an index TensorFlow cannot read.
    """
    folder = os.path.dirname(prefix)
    stem = os.path.basename(prefix)
    files = [name for name in os.listdir(folder) if name.startswith(stem + ".")]
    held = sum(os.path.getsize(os.path.join(folder, name)) for name in files)
    if held > MAX_WEIGHTS_BYTES:
        raise UnsafeModelError(
            f"{source}: refused: variables/ holds {describe(held)}, over the cap of "
            f"{describe(MAX_WEIGHTS_BYTES)}"
        )
    try:
        reader = tf.train.load_checkpoint(prefix)
        shapes = reader.get_variable_to_shape_map()
        dtypes = reader.get_variable_to_dtype_map()
    except Exception as error:  # TensorFlow's errors for a damaged index
        raise ModelFileError(
            f"{source}: the variables index cannot be read: {_one_line(error)}"
        ) from error
    for name, shape in shapes.items():
        dtype = dtypes.get(name)
        itemsize = dtype.size if dtype is not None and dtype != tf.string else 1
        declared = int(np.prod(shape, dtype=np.float64)) * itemsize
        if declared > held:
            raise UnsafeModelError(
                f"{source}: refused: variable {name} declares {describe(declared)}, more than "
                f"the {describe(held)} its data files hold"
            )
