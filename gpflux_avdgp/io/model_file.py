"""The check a saved model passes before anything in it is deserialised.

:func:`check_model_file` is the one gate every loader of the package calls
(:func:`gpflux_avdgp.load_model` for both formats, and through it ``avdgp predict`` and
``avdgp export``). It reads the files as data only (``zipfile``, JSON, HDF5 metadata, protocol
buffers), never past the caps of :mod:`.limits`, and refuses, in one
:class:`~gpflux_avdgp.io.errors.UnsafeModelError` line:

* a ``.keras`` archive with a member outside the three ``tf_keras`` writes (``config.json``,
  ``metadata.json``, ``model.weights.h5``) and its ``assets/`` folder, with an absolute or
  ``..`` path, a repeated name, or a size over a cap;
* a SavedModel folder holding a symbolic link, an asset path leaving the folder, no
  ``keras_metadata.pb`` (``tf_keras`` would then load a bare TensorFlow object), a file over
  a cap, or a graph op outside the allow list (:mod:`.graph_ops`);
* weights that are not plain numbers stored in the file (:mod:`.weights_data`);
* a config naming anything outside the allow list (:mod:`.allow_list`), or nested deeper than
  :data:`~.limits.MAX_CONFIG_DEPTH`.

Damaged files (truncated, corrupt, missing members) raise the parent
:class:`~gpflux_avdgp.io.errors.ModelFileError`.
"""

from __future__ import annotations

import collections
import io
import json
import os
import posixpath
import zipfile
import zlib
from typing import Any, Mapping, Optional

from .allow_list import check_config
from .errors import ModelFileError, UnsafeModelError
from .errors import one_line as _one_line
from .graph_ops import check_graph_ops
from .limits import (
    MAX_ARCHIVE_MEMBERS,
    MAX_ASSETS_BYTES,
    MAX_COMPRESSION_RATIO,
    MAX_CONFIG_BYTES,
    MAX_CONFIG_DEPTH,
    MAX_GRAPH_BYTES,
    MAX_WEIGHTS_BYTES,
    describe,
)
from .weights_data import check_checkpoint_index, check_h5_weights

__all__ = ["KERAS_ARCHIVE_MEMBERS", "check_model_file"]

#: Members every ``.keras`` archive written by ``tf_keras`` holds.
KERAS_ARCHIVE_MEMBERS = ("config.json", "metadata.json", "model.weights.h5")
_JSON_MEMBERS = ("config.json", "metadata.json")
_RATIO_FLOOR = 2**20  # members below 1 MiB unpack quickly whatever their ratio
_IN_MEMORY = 64 * 2**20  # weights checked from memory up to this size


def check_model_file(path: str, *, custom_objects: Optional[Mapping[str, Any]] = None) -> bool:
    """Check ``path`` (a ``.keras`` archive or a SavedModel folder) before deserialising it.

    :param custom_objects: objects the caller trusts, by the names the file uses.
    :returns: whether ``path`` is a SavedModel folder.
    :raises ModelFileError: a missing, damaged or foreign file, in one line.
    :raises UnsafeModelError: a file naming code or paths outside the allow list, or over a
        size cap, in one line.
    """
    if not os.path.exists(path):
        raise ModelFileError(f"{path}: no such file or directory")
    if os.path.isdir(path):
        _check_saved_model(path, custom_objects)
        return True
    _check_keras_archive(path, custom_objects)
    return False


# ---------------------------------------------------------------------------- .keras archive
def _check_keras_archive(path: str, custom_objects: Optional[Mapping[str, Any]]) -> None:
    if not path.endswith(".keras"):
        raise ModelFileError(
            f"{path}: expected a .keras archive or a SavedModel directory, got a file without "
            "the .keras suffix"
        )
    if not os.path.isfile(path) or not zipfile.is_zipfile(path):
        raise ModelFileError(f"{path}: not a valid .keras archive (truncated or corrupt?)")
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            _check_archive_layout(path, members)
            damaged = archive.testzip()  # CRC of every member, read in chunks, within the caps
            if damaged is not None:
                raise ModelFileError(
                    f"{path}: corrupt .keras archive ({damaged} fails its CRC check)"
                )
            config = _json(archive.read("config.json"), f"{path}/config.json")
            check_config(config, source=f"{path}/config.json", custom_objects=custom_objects)
            with archive.open("model.weights.h5") as weights:
                if archive.getinfo("model.weights.h5").file_size <= _IN_MEMORY:
                    weights = io.BytesIO(weights.read())  # HDF5 seeks; a zip member seeks slowly
                check_h5_weights(f"{path}/model.weights.h5", weights)
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError) as error:
        if isinstance(error, ModelFileError):
            raise
        raise ModelFileError(
            f"{path}: not a valid .keras archive (truncated or corrupt?): {_one_line(error)}"
        ) from error


def _check_archive_layout(path: str, members: list[zipfile.ZipInfo]) -> None:
    """``tf_keras``'s members only, each once, within the size caps; read from the archive's
    directory, before any member is unpacked."""
    if len(members) > MAX_ARCHIVE_MEMBERS:
        raise UnsafeModelError(
            f"{path}: refused: {len(members):,} archive members, over the cap of "
            f"{MAX_ARCHIVE_MEMBERS:,}"
        )
    names = [member.filename for member in members]
    for name in names:
        _check_archive_member(path, name)
    repeated = sorted(name for name, count in collections.Counter(names).items() if count > 1)
    if repeated:
        raise UnsafeModelError(f"{path}: refused: archive member {repeated[0]!r} appears twice")
    missing = [name for name in KERAS_ARCHIVE_MEMBERS if name not in names]
    if missing:
        raise ModelFileError(f"{path}: not a .keras model archive (missing {', '.join(missing)})")
    total = 0
    for member in members:
        cap = MAX_CONFIG_BYTES if member.filename in _JSON_MEMBERS else MAX_WEIGHTS_BYTES
        total += member.file_size
        if member.file_size > cap or total > MAX_WEIGHTS_BYTES + MAX_CONFIG_BYTES:
            raise UnsafeModelError(
                f"{path}: refused: {member.filename} unpacks to {describe(member.file_size)}, "
                f"over the cap of {describe(cap)}"
            )
        ratio = member.file_size / max(member.compress_size, 1)
        if member.file_size > _RATIO_FLOOR and ratio > MAX_COMPRESSION_RATIO:
            raise UnsafeModelError(
                f"{path}: refused: {member.filename} unpacks {ratio:,.0f} times its packed "
                f"size, over the cap of {MAX_COMPRESSION_RATIO} (model.save does not compress)"
            )
    _check_archive_sums(path, members)


def _check_archive_sums(path: str, members: list[zipfile.ZipInfo]) -> None:
    """The members together: many small members each under the ratio floor (1,000 of 1 MiB
    of zeros) would pass the per-member caps and unpack 1 GiB into the temporary folder."""
    assets = sum(m.file_size for m in members if m.filename.startswith("assets/"))
    if assets > MAX_ASSETS_BYTES:
        raise UnsafeModelError(
            f"{path}: refused: its assets unpack to {describe(assets)} together, over the cap "
            f"of {describe(MAX_ASSETS_BYTES)}"
        )
    unpacked = sum(member.file_size for member in members)
    ratio = unpacked / max(sum(member.compress_size for member in members), 1)
    if unpacked > _RATIO_FLOOR and ratio > MAX_COMPRESSION_RATIO:
        raise UnsafeModelError(
            f"{path}: refused: its members unpack {ratio:,.0f} times their packed size "
            f"together, over the cap of {MAX_COMPRESSION_RATIO} (model.save does not compress)"
        )


def _leaves_folder(name: str) -> bool:
    """Whether a relative path named by a file (archive member, asset) is absolute, has a
    drive or climbs out with ``..``, with either kind of slash."""
    normal = posixpath.normpath(name.replace("\\", "/"))
    return normal.startswith(("/", "../")) or normal == ".." or ":" in name


def _check_archive_member(path: str, name: str) -> None:
    """Only ``tf_keras``'s members, with relative paths that stay inside the archive."""
    if _leaves_folder(name) or "\\" in name:
        raise UnsafeModelError(f"{path}: refused: archive member {name!r} points outside it")
    if name not in KERAS_ARCHIVE_MEMBERS and not name.startswith("assets/"):
        raise UnsafeModelError(
            f"{path}: refused: archive member {name!r} is not one that model.save writes"
        )


def _json(text: Optional[bytes], source: str) -> Any:
    """``text`` decoded, nested at most :data:`MAX_CONFIG_DEPTH` deep."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise UnsafeModelError(
            f"{source}: refused: JSON nested deeper than the cap of {MAX_CONFIG_DEPTH} levels"
        ) from None
    except (TypeError, ValueError) as error:
        raise ModelFileError(f"{source}: not valid JSON ({_one_line(error)})") from None
    if _depth(value) > MAX_CONFIG_DEPTH:
        raise UnsafeModelError(
            f"{source}: refused: JSON nested deeper than the cap of {MAX_CONFIG_DEPTH} levels"
        )
    return value


def _depth(value: Any) -> int:
    """How deep lists and dicts nest in ``value`` (``1`` for a scalar), without recursion."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, level = pending.pop()
        deepest = max(deepest, level)
        if level > MAX_CONFIG_DEPTH:
            break
        children = item.values() if isinstance(item, dict) else item
        if isinstance(item, (dict, list)):
            pending.extend((child, level + 1) for child in children)
    return deepest


# ---------------------------------------------------------------------------- SavedModel folder
def _check_saved_model(path: str, custom_objects: Optional[Mapping[str, Any]]) -> None:
    if not os.path.isfile(os.path.join(path, "saved_model.pb")):
        raise ModelFileError(f"{path}: not a SavedModel directory (no saved_model.pb)")
    if not os.path.isfile(os.path.join(path, "variables", "variables.index")):
        raise ModelFileError(
            f"{path}: incomplete SavedModel (no variables/variables.index: the weights are "
            "missing)"
        )
    _check_no_links(path)
    metadata_file = os.path.join(path, "keras_metadata.pb")
    if not os.path.isfile(metadata_file):
        raise ModelFileError(
            f"{path}: not a Keras SavedModel (no keras_metadata.pb); load a bare TensorFlow "
            "SavedModel with tf.saved_model.load"
        )
    for node_path, metadata in _keras_metadata(metadata_file):
        check_config(
            _json(metadata.encode(), f"{metadata_file} ({node_path})"),
            source=f"{metadata_file} ({node_path})",
            custom_objects=custom_objects,
            legacy=True,
        )
    _check_graph(path)
    check_checkpoint_index(path, os.path.join(path, "variables", "variables"))


def _check_no_links(path: str) -> None:
    """No symbolic link anywhere in the folder (TensorFlow would follow it)."""
    for folder, subfolders, files in os.walk(path):
        for name in [*subfolders, *files]:
            if os.path.islink(os.path.join(folder, name)):
                link = os.path.relpath(os.path.join(folder, name), path)
                raise UnsafeModelError(f"{path}: refused: {link} is a symbolic link")


def _read_proto(path: str, message, problem: str, cap: int):
    """``message`` parsed from the file ``path`` of at most ``cap`` bytes; a file that does
    not parse is a :class:`ModelFileError` saying ``problem``."""
    from google.protobuf.message import DecodeError

    size = os.path.getsize(path)
    if size > cap:
        raise UnsafeModelError(
            f"{path}: refused: {describe(size)}, over the cap of {describe(cap)}"
        )
    try:
        with open(path, "rb") as handle:
            message.ParseFromString(handle.read(cap + 1))
    except (OSError, DecodeError, RecursionError) as error:
        raise ModelFileError(f"{problem}: {_one_line(error)}") from error
    return message


def _keras_metadata(metadata_file: str) -> list[tuple[str, str]]:
    from tf_keras.protobuf import saved_metadata_pb2

    problem = f"{metadata_file}: not valid Keras metadata"
    metadata = _read_proto(
        metadata_file, saved_metadata_pb2.SavedMetadata(), problem, MAX_CONFIG_BYTES
    )
    return [(node.node_path, node.metadata) for node in metadata.nodes]


def _check_graph(path: str) -> None:
    """Only allowed graph ops (:mod:`.graph_ops`), and no asset path leaving the folder."""
    from tensorflow.core.protobuf import saved_model_pb2

    problem = (
        f"{path}: the SavedModel cannot be loaded (truncated, corrupt or not written by "
        "model.save?)"
    )
    saved_model_file = os.path.join(path, "saved_model.pb")
    saved_model = _read_proto(
        saved_model_file, saved_model_pb2.SavedModel(), problem, MAX_GRAPH_BYTES
    )
    for meta_graph in saved_model.meta_graphs:
        for asset in meta_graph.asset_file_def:
            if _leaves_folder(asset.filename):
                raise UnsafeModelError(
                    f"{path}: refused: asset {asset.filename!r} points outside the folder"
                )
        check_graph_ops(path, meta_graph)
