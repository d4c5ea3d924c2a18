"""Load a saved model with one-line errors for a missing, truncated or corrupt file.

``model.save(path)`` and ``tf_keras.models.load_model(path)`` work for every model the package
builds, in the ``.keras`` format and the TensorFlow SavedModel format (a path without suffix),
with no ``custom_objects``: the layers and the loss are registered Keras serializables.
:func:`load_model` adds what ``tf_keras`` lacks:

* a missing, truncated or corrupt file raises :class:`ModelFileError` (a ``ValueError``) with
  a one-line message naming the file and the problem, instead of whatever ``zipfile``,
  ``h5py``, ``protobuf`` or TensorFlow raise deep inside the loader;
* the optimizer state of a SavedModel (iteration count and slots such as Adam's moments) is
  restored: ``tf_keras`` keeps it in the file but starts a reloaded SavedModel with a fresh
  optimizer (the ``.keras`` format restores it either way).
"""

from __future__ import annotations

import os
import zipfile
import zlib
from typing import Union

import tensorflow as tf
from gpflow.keras import tf_keras

from ..layers.likelihood_layer import TrainableLikelihood
from ..objectives import AVDGPLoss

__all__ = ["ModelFileError", "load_model"]

#: Members every ``.keras`` archive written by ``tf_keras`` holds.
KERAS_ARCHIVE_MEMBERS = ("config.json", "metadata.json", "model.weights.h5")
_OPTIMIZER_PREFIX = "optimizer/"


class ModelFileError(ValueError):
    """A saved model file or SavedModel directory that cannot be loaded."""


def _one_line(error: BaseException, limit: int = 200) -> str:
    """``"Type: first line of the message"``, at most ``limit`` characters."""
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_keras_archive(path: str) -> None:
    if not path.endswith(".keras"):
        raise ModelFileError(
            f"{path}: expected a .keras archive or a SavedModel directory, got a file without "
            "the .keras suffix"
        )
    if not zipfile.is_zipfile(path):
        raise ModelFileError(f"{path}: not a valid .keras archive (truncated or corrupt?)")
    try:
        with zipfile.ZipFile(path) as archive:
            missing = [name for name in KERAS_ARCHIVE_MEMBERS if name not in archive.namelist()]
            damaged = archive.testzip()  # CRC of every member
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError) as error:
        raise ModelFileError(
            f"{path}: not a valid .keras archive (truncated or corrupt?): {_one_line(error)}"
        ) from error
    if missing:
        raise ModelFileError(f"{path}: not a .keras model archive (missing {', '.join(missing)})")
    if damaged is not None:
        raise ModelFileError(f"{path}: corrupt .keras archive ({damaged} fails its CRC check)")


def _check_saved_model_dir(path: str) -> None:
    if not os.path.isfile(os.path.join(path, "saved_model.pb")):
        raise ModelFileError(f"{path}: not a SavedModel directory (no saved_model.pb)")
    if not os.path.isfile(_variables_prefix(path) + ".index"):
        raise ModelFileError(
            f"{path}: incomplete SavedModel (no variables/variables.index: the weights are "
            "missing)"
        )


def _variables_prefix(path: str) -> str:
    return os.path.join(path, "variables", "variables")


def _restore_saved_model_optimizer(model: tf_keras.Model, path: str) -> None:
    """Restore the optimizer's iterations and slots saved in a SavedModel's checkpoint."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None:
        return
    prefix = _variables_prefix(path)
    saved = [name for name, _ in tf.train.list_variables(prefix)]
    if not any(name.startswith(_OPTIMIZER_PREFIX) for name in saved):
        return  # saved without optimizer state (include_optimizer=False or never compiled)
    if any(name.startswith(_OPTIMIZER_PREFIX + "_variables/") for name in saved):
        optimizer.build(model.trainable_variables)  # create the slots to restore
    status = tf.train.Checkpoint(optimizer=optimizer).read(prefix)
    status.assert_existing_objects_matched()
    status.expect_partial()  # the model's own values were restored by the loader: no warnings


def load_model(
    path: Union[str, os.PathLike], *, safe_mode: bool = True, compile: bool = True
) -> tf_keras.Model:
    """``tf_keras.models.load_model`` with clear errors and the SavedModel optimizer state.

    :param path: a ``.keras`` file or a SavedModel directory written by ``model.save``.
    :param safe_mode: refuse to deserialise Python ``lambda`` code (``.keras`` format; the
        package's own layers never need it).
    :param compile: compile the model with its saved loss and optimizer (with the saved
        optimizer state).
    :raises ModelFileError: if ``path`` is missing, not a ``.keras`` archive or SavedModel
        directory, truncated or corrupt, or does not describe a loadable model; the message
        is one line naming the file and the problem (the original error is chained).
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ModelFileError(f"{path}: no such file or directory")
    is_saved_model = os.path.isdir(path)
    if is_saved_model:
        _check_saved_model_dir(path)
    else:
        _check_keras_archive(path)
    try:
        model = tf_keras.models.load_model(path, safe_mode=safe_mode, compile=compile)
        if is_saved_model and compile:
            _restore_saved_model_optimizer(model, path)
    except Exception as error:  # any failure inside the loaders means a bad file
        kind = "SavedModel" if is_saved_model else ".keras archive"
        raise ModelFileError(
            f"{path}: the {kind} cannot be loaded (truncated, corrupt or not written by "
            f"model.save?): {_one_line(error)}"
        ) from error
    _bind_reloaded_loss(model)
    return model


def _bind_reloaded_loss(model: tf_keras.Model) -> None:
    """A reloaded :class:`~gpflux_avdgp.AVDGPLoss` takes the likelihood of the model's
    :class:`~gpflux_avdgp.TrainableLikelihood` now rather than at its first call."""
    loss = getattr(model, "loss", None)
    last = model.layers[-1] if getattr(model, "layers", None) else None
    if isinstance(loss, AVDGPLoss) and loss.adopts_model_likelihood:
        if isinstance(last, TrainableLikelihood):
            loss.adopt(last.likelihood)
