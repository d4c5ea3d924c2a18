"""Load a saved model with one-line errors for a missing, truncated or corrupt file.

``model.save(path)`` and ``tf_keras.models.load_model(path)`` work for every model the package
builds, in the ``.keras`` format and the TensorFlow SavedModel format (a path without suffix),
with no ``custom_objects``: the layers and the loss are registered Keras serializables.
:func:`load_model` adds what ``tf_keras`` lacks:

* the file is checked before anything in it is deserialised (:mod:`.model_file`): a file
  naming code outside the allow list raises :class:`UnsafeModelError`;
* a missing, truncated or corrupt file raises :class:`ModelFileError` (a ``ValueError``) with
  a one-line message naming the file and the problem, instead of whatever ``zipfile``,
  ``h5py``, ``protobuf`` or TensorFlow raise deep inside the loader;
* the optimizer state of a SavedModel (iteration count and slots such as Adam's moments) is
  restored: ``tf_keras`` keeps it in the file but starts a reloaded SavedModel with a fresh
  optimizer (the ``.keras`` format restores it either way).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Union

import tensorflow as tf
from gpflow.keras import tf_keras

from .. import optimizers  # noqa: F401 (a file may name FlatAdam; files never import)
from ..layers import gpflux_adapter, mixture_likelihood_layer  # noqa: F401 (registered)
from .errors import ModelFileError, UnsafeModelError
from .errors import one_line as _one_line
from .model_file import check_model_file

__all__ = ["ModelFileError", "UnsafeModelError", "load_model"]

_OPTIMIZER_PREFIX = "optimizer/"


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
    path: Union[str, os.PathLike],
    *,
    compile: bool = True,
    custom_objects: Optional[Mapping[str, Any]] = None,
) -> tf_keras.Model:
    """``tf_keras.models.load_model`` after a safety check, with clear errors and the
    SavedModel optimizer state.

    :func:`~gpflux_avdgp.io.model_file.check_model_file` first reads the file as data and
    refuses code outside the allow list (docs/saving.md); nothing of a refused file runs.

    :param path: a ``.keras`` file or a SavedModel directory written by ``model.save``.
    :param compile: compile the model with its saved loss and optimizer (with the saved
        optimizer state).
    :param custom_objects: classes and functions of your own code that the file may name, by
        the name it uses (as for ``tf_keras``); being your code, they are trusted.
    :raises UnsafeModelError: the file names code or paths outside the allow list (one line
        naming what and where); nothing of it was deserialised.
    :raises ModelFileError: if ``path`` is missing, not a ``.keras`` archive or SavedModel
        directory, truncated or corrupt, or does not describe a loadable model; the message
        is one line naming the file and the problem (the original error is chained).
    """
    path = os.fspath(path)
    is_saved_model = check_model_file(path, custom_objects=custom_objects)
    kind = "SavedModel" if is_saved_model else ".keras archive"
    try:
        with _removing_unpacked_archive(path, is_saved_model):
            model = tf_keras.models.load_model(
                path, custom_objects=custom_objects, compile=compile, safe_mode=True
            )
        if is_saved_model and compile:
            _restore_saved_model_optimizer(model, path)
    except Exception as error:  # any failure inside the loaders means a bad file
        raise ModelFileError(
            f"{path}: the {kind} cannot be loaded (truncated, corrupt or not written by "
            f"model.save?): {_one_line(error)}"
        ) from error
    if not isinstance(model, tf_keras.Model):
        raise ModelFileError(f"{path}: the {kind} holds a {type(model).__name__}, not a model")
    return model


@contextlib.contextmanager
def _removing_unpacked_archive(path: str, is_saved_model: bool) -> Iterator[None]:
    """Remove what ``tf_keras`` unpacked of the ``.keras`` archive ``path`` if loading fails.

    ``tf_keras`` unpacks a whole archive that holds assets into a new folder of the temporary
    folder and removes it only after a successful load. On failure, the folders made during the
    block whose ``config.json`` is this archive's are removed (so another process's unpacked
    archive is left alone).
    """
    if is_saved_model:
        yield
        return
    temporary = Path(tempfile.gettempdir())
    before = set(os.listdir(temporary))
    try:
        yield
    except BaseException:
        with zipfile.ZipFile(path) as archive:
            config = archive.read("config.json")
        for name in set(os.listdir(temporary)) - before:
            unpacked = temporary / name / "config.json"
            if not unpacked.parent.is_symlink() and unpacked.is_file():
                if unpacked.read_bytes() == config:
                    shutil.rmtree(unpacked.parent, ignore_errors=True)
        raise
