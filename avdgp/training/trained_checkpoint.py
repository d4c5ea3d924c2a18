"""The ``trained`` checkpoint of a run folder: a finished training kept until the run is saved.

``BackupAndRestore`` deletes its backup when training ends, so a run killed while it scored
the test set or wrote ``model.keras`` used to train again from epoch 0. Right after training,
:func:`write_trained` keeps the trained weights with the optimizer's state, the optimizer's
config and what the run's record needs of the training (:class:`TrainedState`) in
``DIR/trained``, written under a temporary name and renamed once complete. A rerun of the same
command finds it (:func:`read_trained`), restores the model exactly, and only scores and saves;
:func:`remove_trained` deletes it once ``run.json`` is written.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

from gpflow.keras import tf_keras

__all__ = ["TRAINED_DIR", "TrainedState", "read_trained", "remove_trained", "write_trained"]

TRAINED_DIR = "trained"
_STATE_FILE = "trained.json"
_WEIGHTS = "weights"


@dataclass(frozen=True)
class TrainedState:
    """What a finished training leaves for the record: the epochs' seconds and losses, the
    first epoch this process ran, and the data source's ``Trained`` fields."""

    seconds: list
    losses: list
    first_epoch: Optional[int]
    trained: dict


def write_trained(directory: Path, model: tf_keras.Model, state: TrainedState) -> None:
    """Keep ``model``'s weights (with the optimizer's state) and ``state`` in
    ``directory / "trained"``, complete or not at all."""
    target = directory / TRAINED_DIR
    partial = directory / f".{TRAINED_DIR}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        partial.mkdir(parents=True)
        model.save_weights(str(partial / _WEIGHTS))
        info = {"state": asdict(state), "optimizer": _optimizer_config(model)}
        (partial / _STATE_FILE).write_text(json.dumps(info))
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def read_trained(directory: Path, model: tf_keras.Model, compile_model) -> Optional[TrainedState]:
    """The state of a complete ``trained`` checkpoint in ``directory``, with ``model``
    compiled by ``compile_model(optimizer)`` and its weights and optimizer state restored;
    ``None`` if there is none.

    :raises ValueError: one line, if the checkpoint is damaged (delete it and rerun).
    """
    folder = directory / TRAINED_DIR
    if not (folder / _STATE_FILE).is_file():
        return None
    try:
        info = json.loads((folder / _STATE_FILE).read_text())
        state = TrainedState(**info["state"])
        optimizer = tf_keras.optimizers.deserialize(info["optimizer"], custom_objects=_optimizers())
        optimizer.build(model.trainable_variables)
        compile_model(optimizer)
        status = model.load_weights(str(folder / _WEIGHTS))
        status.assert_existing_objects_matched()
        status.expect_partial()
    except Exception as error:  # noqa: BLE001 - a damaged checkpoint fails in many ways
        raise ValueError(
            f"{folder}: the trained checkpoint of the interrupted run cannot be read "
            f"({type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
            f"); delete {folder} to train again"
        ) from None
    return state


def remove_trained(directory: Path) -> None:
    shutil.rmtree(directory / TRAINED_DIR, ignore_errors=True)


def _optimizer_config(model: tf_keras.Model) -> dict[str, Any]:
    return tf_keras.optimizers.serialize(model.optimizer)


def _optimizers() -> dict:
    from gpflux_avdgp.optimizers import FlatAdam

    return {"FlatAdam": FlatAdam}
