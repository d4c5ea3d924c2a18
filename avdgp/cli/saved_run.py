"""A model folder written by ``avdgp fit --save``, read back for ``predict`` and ``export``:
first what ``run.json`` says, with NumPy alone (:func:`read_saved_run`, every check that needs no
TensorFlow), then the model (:meth:`SavedRun.load_model`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CommandLineError
from .common import load_tensorflow, one_line

__all__ = ["SavedRun", "read_saved_run"]

#: The float types ``fit`` trains in (``avdgp.training.FLOAT_TYPES``, which loads TensorFlow).
SAVED_DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class SavedRun:
    """What ``run.json`` of a folder saved by ``avdgp fit --save`` says, checked.

    :param model_file: the Keras file inside the folder.
    :param standardizer: the inputs' (and regression targets') standardiser.
    :param task: ``"regression"`` or ``"classification"``.
    :param dtype: ``"float64"`` or ``"float32"``.
    :param label: the model's label, e.g. ``"avdgp-ar2p"``.
    :param data: the data layout recorded by ``fit`` (``target``, ``feature_names``,
        ``target_name``, ``classes``); empty for runs saved before it was recorded.
    :param command: the command reading it, for its messages (``"predict"``).
    """

    model_file: Path
    standardizer: Any
    task: str
    dtype: str
    label: str
    data: dict
    command: str

    @property
    def num_features(self) -> int:
        """``D``, the model's inputs (checked against the model when it loads)."""
        return int(self.standardizer.x_mean.size)

    def load_model(self):
        """Load TensorFlow and the Keras model, not compiled (predicting and exporting need no
        loss or optimizer state); a file that does not load, or a model whose input width is
        not the standardiser's, is a one-line CommandLineError."""
        load_tensorflow()
        from ..training import float_type

        with float_type(self.dtype):
            model = _load_keras_model(self.model_file, self.command)
        width = int(model.inputs[0].shape[-1])
        if width != self.num_features:
            raise CommandLineError(
                f"avdgp {self.command}: {self.model_file.parent / 'run.json'}: the standardizer "
                f"has {self.num_features} input means, the model takes {width} features"
            )
        return model


def _load_keras_model(path: Path, command: str):
    """``path`` (a ``.keras`` file) as a model; a file that does not load is a CommandLineError."""
    from avdgp.zoo.solve_gp import SAVED_OBJECTS
    from gpflux_avdgp.io.saving import ModelFileError, load_model

    try:
        return load_model(str(path), custom_objects=SAVED_OBJECTS, compile=False)
    except ModelFileError as error:
        raise CommandLineError(f"avdgp {command}: {one_line(error)}") from error
    except Exception as error:  # noqa: BLE001 - a corrupt file fails in many ways
        raise CommandLineError(
            f"avdgp {command}: {path}: could not load the model ({type(error).__name__}: "
            f"{one_line(error)[:300]})"
        ) from error


def _model_file(directory: Path, keras_file: Any, run_file: Path, command: str) -> Path:
    """``run.json``'s model file: a plain name of a file inside MODEL_DIR, nothing else."""
    name = keras_file if isinstance(keras_file, str) else ""
    inside = (
        name
        and "\x00" not in name
        and Path(name).name == name
        and name not in (".", "..")
        and (directory / name).resolve().parent == directory.resolve()
    )
    if not inside:
        raise CommandLineError(
            f"avdgp {command}: {run_file}: refused: keras_file {keras_file!r} is not a file "
            "name inside MODEL_DIR (a model is only loaded from its own folder)"
        )
    return directory / name


def read_saved_run(model_dir: str, command: str) -> SavedRun:
    """Read ``MODEL_DIR/run.json`` and check that its model file exists, without TensorFlow, or
    raise a one-line CommandLineError.

    A little over 60 lines: one check per way a folder can be wrong, each with its own message,
    in the order a user would fix them."""
    from ..data import Standardizer

    where = f"avdgp {command}: MODEL_DIR {model_dir}"
    directory = Path(model_dir)
    if not directory.exists():
        raise CommandLineError(f"{where}: no such folder")
    if not directory.is_dir():
        raise CommandLineError(
            f"{where}: is a file, expected a folder written by 'avdgp fit --save'"
        )
    run_file = directory / "run.json"
    if not run_file.is_file():
        raise CommandLineError(
            f"avdgp {command}: {run_file}: missing; MODEL_DIR must be a folder written by "
            "'avdgp fit --save'"
        )
    try:
        info = json.loads(run_file.read_text())
        spec, result = info["spec"], info.get("result") or {}
        task, dtype = spec["task"], result.get("dtype", "float64")
        keras_file = info.get("keras_file", "model.keras")
        scaling = info.get("standardizer")
        data = info.get("data") or {}
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise CommandLineError(
            f"avdgp {command}: {run_file}: not a run description written by 'avdgp fit "
            f"--save' ({type(e).__name__}: {one_line(e)[:200]})"
        ) from None
    if task not in ("regression", "classification") or dtype not in SAVED_DTYPES:
        raise CommandLineError(
            f"avdgp {command}: {run_file}: unknown task {task!r} or dtype {dtype!r}"
        )
    label = result.get("label") or spec.get("model", "model")
    if keras_file is None:
        raise CommandLineError(
            f"{where}: holds no model.keras (the {label} model could not be serialised when it "
            "was saved); fit it again with a newer 'avdgp fit --save'"
        )
    model_file = _model_file(directory, keras_file, run_file, command)
    if not model_file.is_file():
        raise CommandLineError(f"avdgp {command}: {model_file}: missing")
    if scaling is None:
        raise CommandLineError(
            f"avdgp {command}: {run_file}: records no standardiser (saved by an older 'avdgp "
            "fit' for classification), so raw features cannot be mapped; fit it again with "
            "--save"
        )
    try:
        standardizer = Standardizer(
            x_mean=np.asarray(scaling["x_mean"], dtype=np.float64),
            x_std=np.asarray(scaling["x_std"], dtype=np.float64),
            y_mean=float(scaling["y_mean"]),
            y_std=float(scaling["y_std"]),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise CommandLineError(
            f"avdgp {command}: {run_file}: bad standardizer ({type(e).__name__}: {e})"
        ) from None
    spreads = np.append(standardizer.x_std, standardizer.y_std)
    centres = np.append(standardizer.x_mean, standardizer.y_mean)
    shapes_agree = (
        standardizer.x_mean.ndim == 1 and standardizer.x_std.shape == standardizer.x_mean.shape
    )
    if not (
        shapes_agree
        and np.all(np.isfinite(spreads))
        and np.all(spreads > 0)
        and np.all(np.isfinite(centres))
    ):
        raise CommandLineError(
            f"avdgp {command}: {run_file}: bad standardizer (x_mean and x_std must be lists of "
            "one number per input, x_std and y_std positive and finite, x_mean and y_mean "
            "finite); the file was edited: fit the model again"
        )
    return SavedRun(model_file, standardizer, task, dtype, label, data, command)
