"""The check a saved model passes before anything in it is deserialised.

:func:`check_model_file` is the one gate every loader of the package calls
(:func:`gpflux_avdgp.load_model` for both formats, and through it ``avdgp predict`` and
``avdgp export``). It reads the files as data only (``zipfile``, JSON, protocol buffers) and
refuses, in one :class:`~gpflux_avdgp.io.errors.UnsafeModelError` line:

* a ``.keras`` archive with a member outside the three ``tf_keras`` writes (``config.json``,
  ``metadata.json``, ``model.weights.h5``) and its ``assets/`` folder, or with an absolute or
  ``..`` path;
* a SavedModel folder holding a symbolic link, an asset path leaving the folder, no
  ``keras_metadata.pb`` (``tf_keras`` would then load a bare TensorFlow object), or a graph op
  that runs Python or writes files (:data:`PYTHON_OPS`, :data:`WRITE_OPS`; the checkpoint save
  ops are allowed only in the function ``model.save`` traced to write the weights);
* a config naming anything outside the allow list (:mod:`.allow_list`).

Damaged files (truncated, corrupt, missing members) raise the parent
:class:`~gpflux_avdgp.io.errors.ModelFileError`.
"""

from __future__ import annotations

import json
import os
import posixpath
import zipfile
import zlib
from typing import Any, Iterable, Mapping, Optional

from .allow_list import check_config
from .errors import ModelFileError, UnsafeModelError
from .errors import one_line as _one_line

__all__ = ["KERAS_ARCHIVE_MEMBERS", "PYTHON_OPS", "WRITE_OPS", "check_model_file"]

#: Members every ``.keras`` archive written by ``tf_keras`` holds.
KERAS_ARCHIVE_MEMBERS = ("config.json", "metadata.json", "model.weights.h5")
#: Graph ops that call back into Python.
PYTHON_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})
#: Graph ops that write files (summaries, datasets, checkpoints, plain files).
WRITE_OPS = frozenset(
    {
        "WriteFile",
        "Save",
        "SaveV2",
        "SaveSlices",
        "MergeV2Checkpoints",
        "CreateSummaryFileWriter",
        "CreateSummaryDbWriter",
        "WriteSummary",
        "WriteScalarSummary",
        "WriteHistogramSummary",
        "WriteImageSummary",
        "WriteAudioSummary",
        "WriteGraphSummary",
        "WriteRawProtoSummary",
        "ImportEvent",
        "DatasetToTFRecord",
        "ExperimentalDatasetToTFRecord",
        "SaveDataset",
        "SaveDatasetV2",
        "SnapshotDataset",
        "SnapshotDatasetV2",
        "DebugIdentityV2",
        "DebugIdentityV3",
    }
)
_CHECKPOINT_SAVE_OPS = frozenset({"SaveV2", "MergeV2Checkpoints"})
_ARCHIVE_WEIGHTS = ("model.weights.h5", "model.weights.npz")


def check_model_file(path: str, *, custom_objects: Optional[Mapping[str, Any]] = None) -> bool:
    """Check ``path`` (a ``.keras`` archive or a SavedModel folder) before deserialising it.

    :param custom_objects: objects the caller trusts, by the names the file uses.
    :returns: whether ``path`` is a SavedModel folder.
    :raises ModelFileError: a missing, damaged or foreign file, in one line.
    :raises UnsafeModelError: a file naming code or paths outside the allow list, in one line.
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
    if not zipfile.is_zipfile(path):
        raise ModelFileError(f"{path}: not a valid .keras archive (truncated or corrupt?)")
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            damaged = archive.testzip()  # CRC of every member
            config_text = (
                archive.read("config.json") if damaged is None and "config.json" in names else None
            )
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError) as error:
        raise ModelFileError(
            f"{path}: not a valid .keras archive (truncated or corrupt?): {_one_line(error)}"
        ) from error
    for name in names:
        _check_archive_member(path, name)
    missing = [name for name in KERAS_ARCHIVE_MEMBERS if name not in names]
    if missing == ["model.weights.h5"] and "model.weights.npz" in names:
        missing = []
    if missing:
        raise ModelFileError(f"{path}: not a .keras model archive (missing {', '.join(missing)})")
    if damaged is not None:
        raise ModelFileError(f"{path}: corrupt .keras archive ({damaged} fails its CRC check)")
    config = _json(config_text, f"{path}/config.json")
    check_config(config, source=f"{path}/config.json", custom_objects=custom_objects)


def _leaves_folder(name: str) -> bool:
    """Whether a relative path named by a file (archive member, asset) is absolute, has a
    drive or climbs out with ``..``, with either kind of slash."""
    normal = posixpath.normpath(name.replace("\\", "/"))
    return normal.startswith(("/", "../")) or normal == ".." or ":" in name


def _check_archive_member(path: str, name: str) -> None:
    """Only ``tf_keras``'s members, with relative paths that stay inside the archive."""
    if _leaves_folder(name) or "\\" in name:
        raise UnsafeModelError(f"{path}: refused: archive member {name!r} points outside it")
    if name not in (*KERAS_ARCHIVE_MEMBERS, *_ARCHIVE_WEIGHTS) and not name.startswith("assets/"):
        raise UnsafeModelError(
            f"{path}: refused: archive member {name!r} is not one that model.save writes"
        )


def _json(text: Optional[bytes], source: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError) as error:
        raise ModelFileError(f"{source}: not valid JSON ({_one_line(error)})") from None


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


def _check_no_links(path: str) -> None:
    """No symbolic link anywhere in the folder (TensorFlow would follow it)."""
    for folder, subfolders, files in os.walk(path):
        for name in [*subfolders, *files]:
            if os.path.islink(os.path.join(folder, name)):
                link = os.path.relpath(os.path.join(folder, name), path)
                raise UnsafeModelError(f"{path}: refused: {link} is a symbolic link")


def _read_proto(path: str, message, problem: str):
    """``message`` parsed from the file ``path``; a file that does not parse is a
    :class:`ModelFileError` saying ``problem``."""
    from google.protobuf.message import DecodeError

    try:
        with open(path, "rb") as handle:
            message.ParseFromString(handle.read())
    except (OSError, DecodeError) as error:
        raise ModelFileError(f"{problem}: {_one_line(error)}") from error
    return message


def _keras_metadata(metadata_file: str) -> Iterable[tuple[str, str]]:
    from tf_keras.protobuf import saved_metadata_pb2

    problem = f"{metadata_file}: not valid Keras metadata"
    metadata = _read_proto(metadata_file, saved_metadata_pb2.SavedMetadata(), problem)
    return [(node.node_path, node.metadata) for node in metadata.nodes]


def _check_graph(path: str) -> None:
    """Refuse graph ops that run Python or write files, and asset paths leaving the folder."""
    from tensorflow.core.protobuf import saved_model_pb2

    problem = (
        f"{path}: the SavedModel cannot be loaded (truncated, corrupt or not written by "
        "model.save?)"
    )
    saved_model_file = os.path.join(path, "saved_model.pb")
    saved_model = _read_proto(saved_model_file, saved_model_pb2.SavedModel(), problem)
    for meta_graph in saved_model.meta_graphs:
        for asset in meta_graph.asset_file_def:
            _check_asset(path, asset.filename)
        _check_ops(path, meta_graph)


def _check_asset(path: str, filename: str) -> None:
    if _leaves_folder(filename):
        raise UnsafeModelError(f"{path}: refused: asset {filename!r} points outside the folder")


def _called_functions(nodes) -> set[str]:
    """Names of the functions that graph nodes call (``f``, branches, loop bodies)."""
    names = set()
    for node in nodes:
        for value in node.attr.values():
            if value.HasField("func"):
                names.add(value.func.name)
            names.update(function.name for function in value.list.func)
    return names


def _closure(roots: set[str], library: dict) -> set[str]:
    reached, pending = set(), list(roots)
    while pending:
        name = pending.pop()
        if name in reached or name not in library:
            continue
        reached.add(name)
        pending.extend(_called_functions(library[name].node_def))
    return reached


def _check_ops(path: str, meta_graph) -> None:
    """Python ops nowhere; file writes only in the function the saver calls to write weights,
    and only if nothing else calls it."""
    library = {
        function.signature.name: function for function in meta_graph.graph_def.library.function
    }
    save_node = meta_graph.saver_def.save_tensor_name.split(":")[0]
    main_nodes = list(meta_graph.graph_def.node)
    saver = _closure(_called_functions(n for n in main_nodes if n.name == save_node), library)
    roots = _called_functions(n for n in main_nodes if n.name != save_node)
    objects = meta_graph.object_graph_def
    roots.update(objects.concrete_functions.keys())
    for node in objects.nodes:
        kind = node.WhichOneof("kind")
        if kind == "function":
            roots.update(node.function.concrete_functions)
        elif kind == "bare_concrete_function":
            roots.add(node.bare_concrete_function.concrete_function_name)
    callable_elsewhere = _closure(roots, library)
    places = [("the main graph", main_nodes, False)] + [
        (f"function {name}", function.node_def, name in saver and name not in callable_elsewhere)
        for name, function in library.items()
    ]
    for where, nodes, saves_weights in places:
        for node in nodes:
            allowed = saves_weights and node.op in _CHECKPOINT_SAVE_OPS
            if node.op in PYTHON_OPS or (node.op in WRITE_OPS and not allowed):
                raise UnsafeModelError(
                    f"{path}: refused: {where} holds a {node.op} op ({node.name}), which "
                    f"{'runs Python' if node.op in PYTHON_OPS else 'writes files'}"
                )
