"""Model files with planted payloads, for the tests that load them (library and command line)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    import h5py


def read_config(path: Path) -> dict:
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read("config.json"))


def planted(
    saved: Path, folder: Path, edit: Callable[[dict], None], extra: dict | None = None
) -> Path:
    """A copy of ``saved`` in ``folder`` whose config ``edit`` changed, with ``extra`` members
    (``{name: bytes}``) added to the archive."""
    config = read_config(saved)
    edit(config)
    target = folder / "model.keras"
    with zipfile.ZipFile(saved) as source, zipfile.ZipFile(target, "w") as archive:
        for name in source.namelist():
            data = json.dumps(config).encode() if name == "config.json" else source.read(name)
            archive.writestr(name, data)
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return target


def insert_layer(config: dict, layer: dict, index: int = 2) -> None:
    config["config"]["layers"].insert(index, layer)


def pipepager_lambda(marker: Path) -> dict:
    """The attack of issue 33: a Lambda whose function is ``pydoc.pipepager``, which runs its
    ``cmd`` argument in a shell."""
    return {
        "module": "keras.layers",
        "class_name": "Lambda",
        "config": {
            "name": "lam",
            "trainable": True,
            "dtype": "float64",
            "function": {
                "module": "pydoc",
                "class_name": "function",
                "config": "pipepager",
                "registered_name": "function",
            },
            "function_type": "function",
            "module": "builtins",
            "output_shape": None,
            "output_shape_type": "raw",
            "output_shape_module": None,
            "arguments": {"cmd": f"touch {marker}"},
        },
        "registered_name": None,
        "build_config": {"input_shape": [None, 2]},
    }


def rewritten_weights(
    saved: Path, folder: Path, rewrite: Callable[["h5py.File", "h5py.File"], None]
) -> Path:
    """A copy of ``saved`` in ``folder`` whose ``model.weights.h5`` ``rewrite(source, target)``
    wrote anew (``source`` is the original file, open for reading)."""
    import h5py

    original, weights = folder / "original.h5", folder / "model.weights.h5"
    with zipfile.ZipFile(saved) as archive:
        original.write_bytes(archive.read("model.weights.h5"))
    with h5py.File(original, "r") as source, h5py.File(weights, "w") as target:
        rewrite(source, target)
    target_path = folder / "model.keras"
    with zipfile.ZipFile(saved) as source, zipfile.ZipFile(target_path, "w") as archive:
        for name in source.namelist():
            data = weights.read_bytes() if name == "model.weights.h5" else source.read(name)
            archive.writestr(name, data)
    return target_path


def first_dataset(weights: "h5py.File") -> str:
    """The path of the first dataset of a weights file (a layer's first variable)."""
    import h5py

    found: list[str] = []
    weights.visititems(
        lambda name, item: found.append(name) if isinstance(item, h5py.Dataset) else None
    )
    return sorted(found)[0]


def copy_except(source: "h5py.File", target: "h5py.File", skip: str) -> None:
    """Every group and dataset of ``source`` into ``target`` but the dataset ``skip``."""
    import h5py

    def copy(name: str, item) -> None:
        if isinstance(item, h5py.Group):
            target.require_group(name)
        elif name != skip:
            target.create_dataset(name, data=item[()])

    source.visititems(copy)
