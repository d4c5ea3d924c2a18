"""The caps on every size a model file declares, checked before anything is read past them.

A model file from elsewhere may declare sizes it does not hold (a 1.3 MB archive whose
``config.json`` unpacks to 1.2 GB, a 254 kB weights file declaring an 8 GiB dataset). Each cap
below is far above what a real model needs (the package's largest preset: a 9 kB
``config.json``, a 160 kB weights file) and low enough that checking a crafted file stays
within seconds and well under 1 GB of memory. A refusal names the cap; a file you trust that
meets one loads with ``tf_keras.models.load_model`` (docs/saving.md).
"""

from __future__ import annotations

__all__ = [
    "MAX_ARCHIVE_MEMBERS",
    "MAX_ASSETS_BYTES",
    "MAX_COMPRESSION_RATIO",
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_DEPTH",
    "MAX_GRAPH_BYTES",
    "MAX_WEIGHT_OBJECTS",
    "MAX_WEIGHTS_BYTES",
    "describe",
]

#: ``config.json``, ``metadata.json`` and ``keras_metadata.pb``: JSON text.
MAX_CONFIG_BYTES = 32 * 2**20
#: Nesting of a config's JSON (a Keras model nests about 10 deep).
MAX_CONFIG_DEPTH = 64
#: ``saved_model.pb``: the traced graph of a SavedModel.
MAX_GRAPH_BYTES = 256 * 2**20
#: ``model.weights.h5`` in an archive, or a SavedModel's variables (index and data together).
MAX_WEIGHTS_BYTES = 4 * 2**30
#: Members of a ``.keras`` archive (its assets included).
MAX_ARCHIVE_MEMBERS = 10_000
#: ``assets/`` members of a ``.keras`` archive together: ``tf_keras`` unpacks a whole archive
#: that has any into the temporary folder (the package's models write none).
MAX_ASSETS_BYTES = 64 * 2**20
#: Unpacked over packed size of an archive member above 1 MiB, and of the whole archive above
#: 1 MiB (weights compress about 1.1x).
MAX_COMPRESSION_RATIO = 100
#: Groups and datasets in a weights file (a layer holds a few).
MAX_WEIGHT_OBJECTS = 100_000


def describe(size: int) -> str:
    """``size`` in bytes as people read it: ``"32 MiB"``, ``"1.2 GiB"``, ``"512 bytes"``."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            value = size / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{size} bytes"
