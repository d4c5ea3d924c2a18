"""Model files with planted payloads, for the tests that load them (library and command line)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Callable


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
