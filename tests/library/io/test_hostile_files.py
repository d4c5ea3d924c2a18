"""Issue 47: a model file is data. Payloads the first round of tests did not plant: graph ops that
write or read local files, weights stored outside the file, size bombs, deep nesting.

Each payload is shown live where the check is bypassed (plain ``tf_keras`` or the bare graph),
so each refusal test can fail; :func:`gpflux_avdgp.load_model` refuses it in one line before
anything of it runs or is read.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import zipfile
from pathlib import Path

import gpflow
import h5py
import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras
from payloads import copy_except, first_dataset, rewritten_weights

import gpflux_avdgp
from gpflux_avdgp.io import limits
from gpflux_avdgp.io.errors import ModelFileError, UnsafeModelError
from gpflux_avdgp.io.graph_ops import ALLOWED_OPS
from gpflux_avdgp.io.model_file import _check_graph


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("legit")
    model = gpflux_avdgp.build_avdgp(2, [1], 2, 16, gpflow.likelihoods.Gaussian(0.1), seed=0)
    model.compile(tf_keras.optimizers.Adam(0.01))
    model.save(folder / "model.keras")
    return folder / "model.keras"


def refused(path: Path, match: str) -> str:
    start = time.perf_counter()
    with pytest.raises(UnsafeModelError, match=match) as info:
        gpflux_avdgp.load_model(path)
    assert time.perf_counter() - start < 10.0
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path))
    return message


# ------------------------------------------------------------------ graph ops (rows 1 and 2)
def payload_module(kind: str, target: str) -> tf.Module:
    """A module whose saved function writes or reads ``target`` by the op ``kind`` names."""
    module = tf.Module()
    if kind == "table":  # a tracked resource: SavedModel reinitialises it from the file
        initializer = tf.lookup.TextFileInitializer(
            target,
            tf.string,
            tf.lookup.TextFileIndex.WHOLE_LINE,
            tf.int64,
            tf.lookup.TextFileIndex.LINE_NUMBER,
        )
        module.table = tf.lookup.StaticHashTable(initializer, -1)

    @tf.function(input_signature=[tf.TensorSpec([], tf.float32)], autograph=False)
    def run(x):
        if kind == "print":
            tf.print("payload", output_stream=f"file://{target}")
        elif kind == "debug_identity":
            x = tf.raw_ops.DebugIdentity(input=x, debug_urls=[f"file://{target}"])
        elif kind == "cache":
            data = tf.data.Dataset.from_tensors(x).cache(target)
            x = tf.data.experimental.get_single_element(data)
        elif kind == "read_file":
            x += tf.cast(tf.strings.length(tf.io.read_file(target)), tf.float32)
        elif kind == "immutable_const":
            x += tf.reduce_sum(
                tf.raw_ops.ImmutableConst(dtype=tf.float32, shape=[1], memory_region_name=target)
            )
        elif kind == "text_line":
            line = tf.data.experimental.get_single_element(tf.data.TextLineDataset(target))
            x += tf.cast(tf.strings.length(line), tf.float32)
        elif kind == "table":
            x += tf.cast(module.table.size(), tf.float32)
        elif kind == "matching_files":
            x += tf.cast(tf.size(tf.io.matching_files(target)), tf.float32)
        return x

    module.run = run
    return module


def graph_ops(folder: Path) -> set[str]:
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel.FromString((folder / "saved_model.pb").read_bytes())
    graph = saved_model.meta_graphs[0].graph_def
    return {node.op for function in graph.library.function for node in function.node_def}


PAYLOADS = {
    "print": "PrintV2",
    "debug_identity": "DebugIdentity",
    "cache": "Dataset",
    "read_file": "ReadFile",
    "immutable_const": "ImmutableConst",
    "text_line": "TextLineDataset",
    "table": "HashTable|InitializeTable",
    "matching_files": "MatchingFiles",
}


@pytest.mark.parametrize("kind", sorted(PAYLOADS))
def test_graph_ops_that_touch_files_are_refused_by_the_allow_list(tmp_path, kind):
    """Rows 1 and 2: each op acts on a local file when the saved function runs (the control
    calls it); the check refuses the graph, naming the op."""
    target = tmp_path / "target.txt"
    target.write_text("secret line\n")
    folder = tmp_path / "payload"
    tf.saved_model.save(payload_module(kind, str(target)), str(folder))
    with pytest.raises(UnsafeModelError, match="holds a \\w+ op .* not on the allow list"):
        _check_graph(str(folder))
    file_ops = {op for op in graph_ops(folder) if re.search(PAYLOADS[kind], op)}
    assert file_ops and not file_ops & ALLOWED_OPS
    if kind in ("print", "read_file", "text_line", "matching_files", "table"):  # the control
        before = target.read_text()
        value = float(tf.saved_model.load(str(folder)).run(tf.constant(0.0)))
        assert target.read_text() != before or value > 0.0


class FilePrinter(tf_keras.layers.Layer):
    """An unregistered layer whose call appends to a file (issue 47, row 1)."""

    def __init__(self, target: str = "", **kwargs):
        super().__init__(**kwargs)
        self.target = target

    def call(self, inputs):
        tf.print("payload", output_stream=f"file://{self.target}")
        return inputs

    def get_config(self):
        return {**super().get_config(), "target": self.target}


@pytest.fixture(scope="module")
def printer_model(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("printer")
    target = folder / "shell_rc"
    target.write_text("")
    model = tf_keras.Sequential(
        [tf_keras.Input((2,)), FilePrinter(str(target)), tf_keras.layers.Dense(1)]
    )
    model.save(folder / "model")
    return folder / "model", target


def test_a_saved_model_layer_of_unknown_class_is_refused(printer_model):
    """Keras revives a layer it cannot find from the file's traced call, which then runs the
    file's ops: refused by class before the graph is read."""
    path, target = printer_model
    refused(path, "class 'FilePrinter', unknown to Keras and not registered")
    assert target.read_text() == ""


@pytest.mark.slow  # control: plain tf_keras revives the layer and its call writes the file
def test_the_file_printer_is_live_under_plain_keras(printer_model):
    path, target = printer_model
    reloaded = tf_keras.models.load_model(path)
    reloaded(np.zeros((1, 2), np.float32))
    assert "payload" in target.read_text()


def test_a_registered_class_does_not_open_the_graph(printer_model, tmp_path):
    """With its class found (registered under the file's name) the layer is rebuilt from its
    config, yet the graph still holds the PrintV2 op: the allow list refuses it."""
    path, _ = printer_model
    with pytest.raises(UnsafeModelError, match="holds a (StringFormat|PrintV2) op"):
        gpflux_avdgp.load_model(path, custom_objects={"FilePrinter": FilePrinter})


# ------------------------------------------------------------------ weights as data (row 4)
def external_copy(secret: Path):
    """A rewrite of the weights whose first dataset is stored in ``secret`` (HDF5 external
    storage); ``secret`` is filled with as many bytes as the dataset holds."""

    def rewrite(source: h5py.File, target: h5py.File) -> None:
        name = first_dataset(source)
        copy_except(source, target, name)
        data = source[name]
        secret.write_bytes(np.full(data.shape, 7.0, data.dtype).tobytes())
        target.create_dataset(
            name, data.shape, data.dtype, external=[(str(secret), 0, h5py.h5f.UNLIMITED)]
        )

    return rewrite


def test_weights_stored_outside_the_file_are_refused(saved, tmp_path):
    """Row 4: plain tf_keras reads the local file's bytes into a weight (the control); the
    check refuses the dataset."""
    path = rewritten_weights(saved, tmp_path, external_copy(tmp_path / "secret.bin"))
    model = tf_keras.models.load_model(path)
    assert any(np.all(weight.numpy() == 7.0) for weight in model.weights)
    refused(path, "has external storage")


def linked(kind: str, secret: Path):
    def rewrite(source: h5py.File, target: h5py.File) -> None:
        name = first_dataset(source)
        copy_except(source, target, name)
        if kind == "external link":
            with h5py.File(secret, "w") as other:
                other.create_dataset("data", data=source[name][()])
            target[name] = h5py.ExternalLink(str(secret), "data")
        elif kind == "soft link":
            target[name] = h5py.SoftLink("/" + first_dataset(target))
        else:  # virtual dataset
            with h5py.File(secret, "w") as other:
                other.create_dataset("data", data=source[name][()])
            layout = h5py.VirtualLayout(source[name].shape, source[name].dtype)
            layout[...] = h5py.VirtualSource(str(secret), "data", source[name].shape)
            target.create_virtual_dataset(name, layout)

    return rewrite


@pytest.mark.parametrize(
    "kind, match",
    [
        ("external link", "is a ExternalLink"),
        ("soft link", "is a SoftLink"),
        ("virtual", "is virtual"),
    ],
)
def test_links_and_virtual_datasets_in_the_weights_are_refused(saved, tmp_path, kind, match):
    path = rewritten_weights(saved, tmp_path, linked(kind, tmp_path / "other.h5"))
    refused(path, match)


# ------------------------------------------------------------------ size bombs (row 5)
def test_a_compressed_dataset_declaring_gigabytes_is_refused_quickly(saved, tmp_path):
    """Row 5: a chunked, compressed 8 GiB dataset in a small file (Keras would unpack it)."""

    def rewrite(source: h5py.File, target: h5py.File) -> None:
        name = first_dataset(source)
        copy_except(source, target, name)
        target.create_dataset(
            name, (2**30,), "float64", chunks=(2**20,), compression="gzip", fillvalue=0.0
        )
        target[name][: 2**20] = 0.0

    path = rewritten_weights(saved, tmp_path, rewrite)
    assert path.stat().st_size < 2**20
    refused(path, "compressed or filtered")


def test_an_unallocated_dataset_declaring_gigabytes_is_refused(saved, tmp_path):
    def rewrite(source: h5py.File, target: h5py.File) -> None:
        name = first_dataset(source)
        copy_except(source, target, name)
        target.create_dataset(name, (2**27,), "float64", chunks=(2**16,))

    path = rewritten_weights(saved, tmp_path, rewrite)
    refused(path, "declares 1 GiB but stores 0 bytes")


def rezipped(saved: Path, tmp_path: Path, replace: dict, compression=zipfile.ZIP_DEFLATED) -> Path:
    target = tmp_path / "model.keras"
    with zipfile.ZipFile(saved) as source, zipfile.ZipFile(target, "w", compression) as archive:
        for name in source.namelist():
            archive.writestr(name, replace.get(name, source.read(name)))
    return target


def test_a_config_over_its_cap_is_refused_before_it_is_read(saved, tmp_path):
    """Row 5: a small archive whose ``config.json`` unpacks past the cap (padding spaces)."""
    with zipfile.ZipFile(saved) as archive:
        config = archive.read("config.json")
    padded = config + b" " * (limits.MAX_CONFIG_BYTES + 1)
    path = rezipped(saved, tmp_path, {"config.json": padded})
    assert path.stat().st_size < 2**20
    refused(path, f"config.json unpacks to .*over the cap of {limits.describe(2**25)}")


def test_a_member_unpacking_far_beyond_its_packed_size_is_refused(saved, tmp_path):
    """A weights member 2,000 times its packed size (zeros): refused by the ratio cap."""
    path = rezipped(saved, tmp_path, {"model.weights.h5": bytes(2**24)})
    refused(path, "model.weights.h5 unpacks .* times its packed size, over the cap of 100")


def test_a_deeply_nested_config_is_refused_in_one_line(saved, tmp_path):
    """A leftover of issue 41: a ``RecursionError`` escaped the loader."""
    for depth in (100, 100_000):
        path = rezipped(saved, tmp_path, {"config.json": b"[" * depth + b"]" * depth})
        refused(path, f"JSON nested deeper than the cap of {limits.MAX_CONFIG_DEPTH} levels")


def test_a_repeated_member_is_refused(saved, tmp_path):
    target = tmp_path / "model.keras"
    with zipfile.ZipFile(saved) as source, zipfile.ZipFile(target, "w") as archive:
        for name in source.namelist():
            archive.writestr(name, source.read(name))
        with pytest.warns(UserWarning, match="Duplicate name"):
            archive.writestr("config.json", json.dumps({"class_name": "Sequential"}))
    refused(target, "archive member 'config.json' appears twice")


def test_a_weights_file_that_is_not_hdf5_is_a_damaged_file(saved, tmp_path):
    path = rezipped(saved, tmp_path, {"model.weights.h5": b"not hdf5"}, zipfile.ZIP_STORED)
    with pytest.raises(ModelFileError, match="not a valid HDF5 weights file"):
        gpflux_avdgp.load_model(path)


def test_a_saved_model_index_declaring_more_than_its_data_is_refused(printer_model, tmp_path):
    """The index of a SavedModel's variables names shapes; a tensor larger than the data
    files hold is refused before TensorFlow reads it."""
    from gpflux_avdgp.io.weights_data import check_checkpoint_index

    path, _ = printer_model
    check_checkpoint_index(str(path), str(path / "variables" / "variables"))
    big = tmp_path / "big"
    checkpoint = tf.train.Checkpoint(v=tf.Variable(tf.zeros([1000, 1000], tf.float64)))
    prefix = checkpoint.write(str(big / "variables"))
    data = next(big.glob("variables.data-*"))
    data.write_bytes(data.read_bytes()[:1000])  # the index still declares 8 MB
    with pytest.raises(UnsafeModelError, match="declares 7.6 MiB, more than the 1.2 KiB"):
        check_checkpoint_index("big", prefix)


_MEMORY_PROBE = """
import resource, sys, time
import gpflux_avdgp
from gpflux_avdgp.io.errors import UnsafeModelError
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
try:
    gpflux_avdgp.load_model(sys.argv[1])
except UnsafeModelError as error:
    print(str(error))
print(time.perf_counter() - start, before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


@pytest.mark.slow  # a fresh process per bomb, for its peak memory
@pytest.mark.parametrize("bomb", ["compressed dataset", "config"])
def test_a_size_bomb_is_refused_within_seconds_and_little_memory(saved, tmp_path, bomb):
    """Row 5: in a fresh process, the refusal takes under 10 s and the loader's peak memory
    grows by under 1 GB (it had reached 13.5 GB)."""
    import subprocess
    import sys

    if bomb == "config":
        with zipfile.ZipFile(saved) as archive:
            config = archive.read("config.json")
        path = rezipped(saved, tmp_path, {"config.json": config + b" " * 2**28})
    else:

        def rewrite(source: h5py.File, target: h5py.File) -> None:
            name = first_dataset(source)
            copy_except(source, target, name)
            target.create_dataset(name, (2**30,), "float64", chunks=(2**20,), compression="gzip")
            target[name][: 2**20] = 0.0

        path = rewritten_weights(saved, tmp_path, rewrite)
    assert path.stat().st_size < 2 * 2**20
    result = subprocess.run(
        [sys.executable, "-c", _MEMORY_PROBE, str(path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    refusal, numbers = result.stdout.strip().splitlines()
    assert "refused" in refusal and ("cap of" in refusal or "compressed" in refusal), refusal
    seconds, before, peak = (float(value) for value in numbers.split())
    assert seconds < 10.0
    assert (peak - before) * 1024 < 2**30, (before, peak)  # ru_maxrss is in KiB


# ------------------------------------------------------------------ many small members (issue 71)
def _with_assets(saved: Path, target: Path, assets: dict, compression=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(saved) as source, zipfile.ZipFile(target, "w", compression) as archive:
        for name in source.namelist():
            archive.writestr(name, source.read(name))
        for name, data in assets.items():
            archive.writestr(f"assets/{name}", data)
    return target


@pytest.fixture
def private_temp(tmp_path, monkeypatch) -> Path:
    """``tempfile``'s folder, where ``tf_keras`` unpacks an archive with assets, made private."""
    import tempfile

    folder = tmp_path / "temp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.mark.parametrize(
    "count, match",
    [
        (50, "its members unpack .* times their packed size together, over the cap of 100"),
        (200, "its assets unpack to 200 MiB together, over the cap of 64 MiB"),
    ],
)
def test_many_small_members_are_refused_by_their_sum_before_unpacking(
    saved, tmp_path, private_temp, count, match
):
    """Row 4: each member of 1 MiB of zeros is under the per-member ratio floor; together
    they unpack about 1,000 times their packed size (50 of them) or past the assets' cap (200;
    the issue's 1,000 too). Nothing reaches the temporary folder."""
    assets = {f"a{k}": bytes(2**20) for k in range(count)}
    path = _with_assets(saved, tmp_path / "model.keras", assets)
    assert path.stat().st_size < 2**20
    refused(path, match)
    assert list(private_temp.iterdir()) == []


def test_assets_over_their_cap_are_refused(saved, tmp_path, monkeypatch, private_temp):
    from gpflux_avdgp.io import model_file

    monkeypatch.setattr(model_file, "MAX_ASSETS_BYTES", 2**20)
    noise = np.random.default_rng(0).bytes(2**20 + 1)  # incompressible: no ratio cap applies
    path = _with_assets(saved, tmp_path / "model.keras", {"noise": noise}, zipfile.ZIP_STORED)
    refused(path, "its assets unpack to 1.0 MiB together, over the cap of 1 MiB")
    assert list(private_temp.iterdir()) == []


def test_what_tf_keras_unpacked_is_removed_when_the_load_fails(
    saved, tmp_path, private_temp, monkeypatch
):
    """An archive within every cap, with an asset (so ``tf_keras`` unpacks it all into the
    temporary folder) and a weights file missing a variable (so the load fails after). Another
    archive unpacked meanwhile (another process's load) is left alone."""
    original_load = tf_keras.models.load_model

    def load_beside_another(*args, **kwargs):
        other = private_temp / "another_process"
        other.mkdir(exist_ok=True)
        (other / "config.json").write_text('{"another": "model"}')
        (other / "metadata.json").write_text("{}")
        return original_load(*args, **kwargs)

    monkeypatch.setattr(tf_keras.models, "load_model", load_beside_another)
    folder = tmp_path / "broken"
    folder.mkdir()
    rewritten = rewritten_weights(
        saved, folder, lambda source, target: copy_except(source, target, first_dataset(source))
    )
    path = _with_assets(rewritten, tmp_path / "model.keras", {"note.txt": b"an asset"})
    with pytest.raises(ModelFileError, match="cannot be loaded"):
        gpflux_avdgp.load_model(path)
    assert [p.name for p in private_temp.iterdir()] == ["another_process"]
    shutil.rmtree(private_temp / "another_process")
    monkeypatch.setattr(tf_keras.models, "load_model", original_load)
    with_asset = _with_assets(saved, tmp_path / "fine.keras", {"note.txt": b"an asset"})
    gpflux_avdgp.load_model(with_asset)  # loads; tf_keras removes its own folder
    assert list(private_temp.iterdir()) == []


def test_an_endless_loop_of_allowed_ops_passes_the_check_as_documented(tmp_path):
    """Row 5, decided (docs/saving.md, "What loading does not bound: time"): the allow list
    keeps loops because our own exports hold them; whether one ends is not read from the graph.
    The loop below never ends, and the check accepts it."""
    from tensorflow.core.protobuf import saved_model_pb2

    module = tf.Module()
    module.spin = tf.function(
        lambda: tf.while_loop(  # always true, even after the counter wraps
            lambda i: tf.logical_or(i >= 0, i < 0), lambda i: i + 1, [tf.constant(0)]
        ),
        input_signature=[],
    )
    folder = tmp_path / "endless"
    tf.saved_model.save(module, str(folder))
    graph = saved_model_pb2.SavedModel.FromString((folder / "saved_model.pb").read_bytes())
    ops = {
        node.op
        for meta_graph in graph.meta_graphs
        for function in meta_graph.graph_def.library.function
        for node in function.node_def
    }
    assert ops & {"While", "StatelessWhile"}
    _check_graph(str(folder))  # accepted: a time limit is the caller's


def test_a_hard_link_loop_in_the_weights_is_refused_at_once(saved, tmp_path):
    """Row 10: a group hard-linked into itself made the walk go 100,000 levels deep (33-167 s,
    up to 4.4 GB); each object is now reached once, so a loop or a dataset linked twice is
    refused."""

    def linked(make_link):
        def rewrite(source: h5py.File, target: h5py.File) -> None:
            copy_except(source, target, skip="")
            make_link(target, first_dataset(source))

        folder = tmp_path / make_link.__name__
        folder.mkdir()
        return rewritten_weights(saved, folder, rewrite)

    def loop(target, dataset):
        group = target[dataset].parent
        group["loop"] = group

    def twice(target, dataset):
        target["twice"] = target[dataset]

    message = refused(linked(loop), "links to an object reached before")
    assert "/loop links to an object reached before (model.save writes a tree" in message
    refused(linked(twice), "links to an object reached before")
