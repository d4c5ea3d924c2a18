"""Planted payloads: loading a model never executes code named by the file.

Each test plants a payload in a model written by ``model.save`` (a function named by module,
a module shipped beside the file, marshalled bytecode, an archive member leaving the folder, a
graph op writing a file, ...), loads it with :func:`gpflux_avdgp.load_model`, and asserts the
one-line :class:`UnsafeModelError` and that the marker file the payload would create never
appears. The two main payloads are also shown to be live: plain ``tf_keras`` runs them.
The command-line variants (``avdgp predict``, ``avdgp export``, ``python -m avdgp`` in the
model's folder) are in ``tests/application/cli/test_cli_unsafe.py``.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import sys
import time
import zipfile
from pathlib import Path

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras
from payloads import insert_layer, pipepager_lambda, planted

import gpflux_avdgp
from gpflux_avdgp.io.allow_list import check_config
from gpflux_avdgp.io.errors import ModelFileError, UnsafeModelError
from gpflux_avdgp.io.model_file import check_model_file

REFUSED = r"refused"


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    """A compiled one-layer AVDGP regression model as ``model.keras`` (metrics and optimizer in
    its ``compile_config``)."""
    folder = tmp_path_factory.mktemp("legit")
    likelihood = gpflow.likelihoods.Gaussian(0.1)
    model = gpflux_avdgp.build_avdgp(2, [1], 2, 16, likelihood, seed=0)
    model.compile(tf_keras.optimizers.Adam(0.01), metrics=[gpflux_avdgp.MixtureNLL(), "mse"])
    model.save(folder / "model.keras")
    return folder / "model.keras"


def assert_refused(path: Path, marker: Path, match: str) -> UnsafeModelError:
    with pytest.raises(UnsafeModelError, match=match) as info:
        gpflux_avdgp.load_model(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path))
    assert isinstance(info.value, ModelFileError) and isinstance(info.value, ValueError)
    assert not marker.exists(), "the payload ran"
    return info.value


def test_the_legitimate_model_loads(saved):
    model = gpflux_avdgp.load_model(saved)
    assert isinstance(model, gpflux_avdgp.AVDGPModel)
    assert check_model_file(str(saved)) is False


def test_a_function_named_by_module_in_a_lambda_never_runs(saved, tmp_path):
    marker = tmp_path / "marker"
    path = planted(saved, tmp_path, lambda c: insert_layer(c, pipepager_lambda(marker), 1))
    assert_refused(path, marker, "refused at config.layers\\[1\\]: layer .*Lambda")


def test_a_payload_planted_as_the_model_s_guard_never_runs(saved, tmp_path):
    """``AVDGPModel``'s config carries its input guard beside the layers: checked the same."""
    marker = tmp_path / "marker"
    path = planted(saved, tmp_path, lambda c: c["config"].update(guard=pipepager_lambda(marker)))
    assert_refused(path, marker, "refused at config.guard: layer .*Lambda")


@pytest.mark.slow  # runs a shell through Keras; the refusal above is the default-suite test
def test_the_lambda_payload_is_live_under_plain_keras(saved, tmp_path):
    """Control: ``tf_keras`` alone (``safe_mode=True``) runs the shell command."""
    marker = tmp_path / "marker"
    path = planted(saved, tmp_path, lambda c: insert_layer(c, pipepager_lambda(marker), 1))
    with pytest.raises(TypeError, match="must be str"):  # after the shell started
        tf_keras.models.load_model(path, safe_mode=True)
    for _ in range(100):  # the shell runs in a child process that Keras' failure does not await
        if marker.exists():
            break
        time.sleep(0.05)
    assert marker.exists()


def test_lambda_bytecode_is_refused(saved, tmp_path):
    layer = pipepager_lambda(tmp_path / "unused")
    layer["config"]["function"] = {
        "class_name": "__lambda__",
        "config": {
            "value": "4wEAAAAAAAAAAAAAAAEAAAABAAAAQwAAAHMEAAAAfABTACkB",
            "closure": None,
            "defaults": None,
        },
    }
    layer["config"]["function_type"] = "lambda"
    path = planted(saved, tmp_path, lambda c: insert_layer(c, layer))
    assert_refused(path, tmp_path / "marker", "refused at")


def dense(activation, **options) -> dict:
    config = {
        "name": "d",
        "trainable": True,
        "dtype": "float64",
        "units": 3,
        "activation": activation,
        "use_bias": True,
        **options,
    }
    return {
        "module": "keras.layers",
        "class_name": "Dense",
        "config": config,
        "registered_name": None,
    }


def os_system() -> dict:
    return {
        "module": "os",
        "class_name": "function",
        "config": "system",
        "registered_name": "function",
    }


def planted_module(tmp_path: Path, monkeypatch, name: str) -> Path:
    """A module file ``name.py`` on ``sys.path`` (as the working folder is under ``python -m``)
    that creates a marker when imported."""
    marker = tmp_path / f"{name}.marker"
    (tmp_path / f"{name}.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n"
        "class Payload:\n    @classmethod\n"
        "    def from_config(cls, config):\n        return cls()\n"
        "def payload(*args, **kwargs):\n    return args[0] if args else None\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return marker


@pytest.mark.parametrize(
    "where",
    [
        "activation",
        "kernel_initializer",
        "kernel_regularizer",
        "loss",
        "metric",
        "optimizer",
        "nested",
        "top level",
        "registered_name",
    ],
)
def test_a_module_shipped_beside_the_file_is_never_imported(saved, tmp_path, monkeypatch, where):
    """The module is importable (it is on ``sys.path``) but never imported, wherever the
    config names it: layer options, ``compile_config``, a layer nested in a wrapper, the top."""
    name = f"payload_{where.replace(' ', '_')}"
    marker = planted_module(tmp_path, monkeypatch, name)
    as_class = {"module": name, "class_name": "Payload", "config": {}, "registered_name": None}
    as_function = {
        "module": name,
        "class_name": "function",
        "config": "payload",
        "registered_name": "function",
    }

    def edit(config: dict) -> None:
        layers = config["config"]["layers"]
        compiled = config["compile_config"]
        if where == "activation":
            insert_layer(config, dense(as_function))
        elif where in ("kernel_initializer", "kernel_regularizer"):
            insert_layer(config, dense("linear", **{where: as_class}))
        elif where == "loss":
            compiled["loss"] = as_function
        elif where == "metric":
            compiled["metrics"].append(as_class)
        elif where == "optimizer":
            compiled["optimizer"] = as_class
        elif where == "nested":
            wrapper = {
                "module": "keras.layers",
                "class_name": "TimeDistributed",
                "config": {"name": "t", "layer": dense(as_function)},
                "registered_name": None,
            }
            layers.insert(2, wrapper)
        elif where == "top level":
            config.clear()
            config.update(as_class)
        else:  # a registered-looking name with an unknown module
            layers[1]["registered_name"] = "payload>Payload"
            layers[1]["module"] = name

    path = planted(saved, tmp_path, edit)
    assert_refused(path, marker, REFUSED)
    assert name not in sys.modules


@pytest.mark.parametrize(
    "entry, match",
    [
        (os_system(), "function os.system"),
        (
            {
                "module": "subprocess",
                "class_name": "Popen",
                "config": {"args": ["true"]},
                "registered_name": None,
            },
            "class subprocess.Popen",
        ),
        (
            {
                "module": "builtins",
                "class_name": "function",
                "config": "eval",
                "registered_name": "function",
            },
            "function builtins.eval",
        ),
        (
            {
                "module": "keras.activations",
                "class_name": "function",
                "config": "deserialize",
                "registered_name": "function",
            },
            "function keras.activations.deserialize",
        ),
    ],
)
def test_functions_and_classes_outside_the_list_are_refused(saved, tmp_path, entry, match):
    """``os.system`` as an activation and as the whole model, ``subprocess.Popen`` as a layer,
    builtins and Keras' own (de)serialisation helpers."""
    path = planted(saved, tmp_path, lambda c: insert_layer(c, dense(entry)))
    assert_refused(path, tmp_path / "marker", match)
    path = planted(saved, tmp_path, lambda c: (c.clear(), c.update(copy.deepcopy(entry))))
    assert_refused(path, tmp_path / "marker", REFUSED)


@pytest.mark.parametrize(
    "function, allowed",
    [
        ("io.write_file", False),
        ("py_function", False),
        ("math.add", True),
        ("__operators__.getitem", True),
    ],
)
def test_tensorflow_op_layers_call_only_pure_maths(function, allowed):
    layer = {
        "module": "tf_keras.src.layers.core.tf_op_layer",
        "class_name": "TFOpLambda",
        "config": {"name": "op", "function": function},
        "registered_name": "TFOpLambda",
    }
    if allowed:
        check_config(layer, source="config.json")
    else:
        with pytest.raises(UnsafeModelError, match="TensorFlow op layer calling"):
            check_config(layer, source="config.json")


@pytest.mark.parametrize(
    "entry",
    [
        {"module": "keras.layers", "class_name": "Lambda", "config": {}, "registered_name": None},
        {
            "module": None,
            "class_name": "DistributionLambda",
            "config": {},
            "registered_name": "DistributionLambda",
        },  # registered by tfp; unpickles on load
        {
            "module": "keras.layers",
            "class_name": "StringLookup",
            "config": {"vocabulary": "/etc/passwd"},
            "registered_name": None,
        },
        {
            "class_name": "__typespec__",
            "spec_name": "Payload",
            "module": "payload",
            "config": [],
            "registered_name": None,
        },
    ],
)
def test_keras_objects_that_run_or_read_what_the_file_names_are_refused(entry):
    with pytest.raises(UnsafeModelError, match="^config.json: refused at top level: "):
        check_config(entry, source="config.json")


def test_the_callers_own_objects_load_when_named_in_custom_objects():
    entry = {
        "module": "mypackage",
        "class_name": "MyLayer",
        "config": {},
        "registered_name": "mypackage>MyLayer",
    }
    with pytest.raises(UnsafeModelError, match="module 'mypackage', which is not loaded"):
        check_config(entry, source="config.json")

    class MyLayer(tf_keras.layers.Layer):
        pass

    check_config(entry, source="config.json", custom_objects={"mypackage>MyLayer": MyLayer})


@pytest.mark.parametrize(
    "member",
    [
        "../escape.txt",
        "/tmp/absolute.txt",
        "payload.py",
        "assets/../../escape.txt",
        "C:\\windows.txt",
    ],
)
def test_archive_members_outside_keras_layout_are_refused(saved, tmp_path, member):
    path = planted(saved, tmp_path, lambda c: None, extra={member: b"x"})
    assert_refused(path, tmp_path / "marker", "archive member '")
    assert not (tmp_path.parent / "escape.txt").exists()


# ------------------------------------------------------------------------ SavedModel folders
@pytest.fixture(scope="module")
def saved_model_with_lambda(tmp_path_factory) -> tuple[Path, Path]:
    """A Keras SavedModel whose ``Lambda`` (bytecode) creates a marker when it runs."""
    folder = tmp_path_factory.mktemp("lambda")
    marker = folder / "marker"
    code = f"lambda x: (open({str(marker)!r}, 'w').close(), x)[1]"
    model = tf_keras.Sequential(
        [tf_keras.Input((2,)), tf_keras.layers.Lambda(eval(code)), tf_keras.layers.Dense(1)]
    )
    model.save(folder / "model")
    marker.unlink()  # tracing at save time ran it
    return folder / "model", marker


def test_a_saved_model_with_lambda_bytecode_is_refused(saved_model_with_lambda):
    path, marker = saved_model_with_lambda
    assert_refused(
        path,
        marker,
        r"keras_metadata.pb \(root\): refused at config.layers\[1\]: " r"layer .*Lambda",
    )


@pytest.mark.slow  # control for the test above: Keras' SavedModel loader runs the bytecode
def test_the_saved_model_lambda_is_live_under_plain_keras(saved_model_with_lambda):
    path, marker = saved_model_with_lambda
    tf_keras.models.load_model(path, safe_mode=True)
    assert marker.exists()
    marker.unlink()


def file_writer(marker: str) -> tf.Module:
    """A module whose saved function writes ``marker`` (``tf.io.write_file``)."""
    module = tf.Module()
    module.v = tf.Variable(1.0)

    @tf.function(input_signature=[tf.TensorSpec([], tf.float32)], autograph=False)
    def write(x):
        tf.io.write_file(marker, "ran")
        return x * module.v

    module.write = write
    return module


def test_graph_ops_that_write_files_are_refused(saved_model_with_lambda, tmp_path):
    """A SavedModel function holding ``WriteFile``; the weight-saving function that every
    SavedModel holds (``SaveV2``) passes."""
    from gpflux_avdgp.io.model_file import _check_graph  # noqa: PLC0415

    legit, _ = saved_model_with_lambda
    _check_graph(str(legit))  # holds SaveV2 / MergeV2Checkpoints in its traced save function
    tf.saved_model.save(file_writer(str(tmp_path / "marker")), str(tmp_path / "writer"))
    with pytest.raises(UnsafeModelError, match="holds a WriteFile op .* not on the allow list"):
        _check_graph(str(tmp_path / "writer"))
    assert not (tmp_path / "marker").exists()


def test_saved_model_links_and_missing_keras_metadata_are_refused(
    saved_model_with_lambda, tmp_path
):
    legit, _ = saved_model_with_lambda
    linked = tmp_path / "linked"
    shutil.copytree(legit, linked)
    os.symlink("/etc/passwd", linked / "assets" / "vocabulary.txt")
    with pytest.raises(UnsafeModelError, match="assets/vocabulary.txt is a symbolic link"):
        gpflux_avdgp.load_model(linked)
    bare = tmp_path / "bare"
    shutil.copytree(legit, bare)
    (bare / "keras_metadata.pb").unlink()
    with pytest.raises(ModelFileError, match="not a Keras SavedModel \\(no keras_metadata.pb\\)"):
        gpflux_avdgp.load_model(bare)


def test_a_functional_model_with_tensorflow_maths_loads(tmp_path):
    """Slicing, operators, ``tf.math`` and ``tf.concat`` become op layers in a Functional
    model's config; pure maths passes the check and the model loads."""
    inputs = tf_keras.Input((3,), dtype="float64")
    outputs = tf.concat([inputs[:, :1] + 1.0, tf.math.exp(inputs)], axis=1)
    model = tf_keras.Model(inputs, outputs)
    model.save(tmp_path / "functional.keras")
    classes = {layer["class_name"] for layer in read_config_of(tmp_path / "functional.keras")}
    assert {"SlicingOpLambda", "TFOpLambda"} <= classes
    reloaded = gpflux_avdgp.load_model(tmp_path / "functional.keras")
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(reloaded(x).numpy(), model(x).numpy())


def read_config_of(path: Path) -> list[dict]:
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read("config.json"))["config"]["layers"]


@pytest.mark.parametrize("module", ["kerasevil", "tf_kerasevil", "keras_evil", "tf_keras_evil"])
def test_module_names_match_whole_keras_packages(saved, tmp_path, monkeypatch, module):
    """Issue 47, row 3: a metric ``{"module": "kerasevil", "config": "relu"}`` only *starts
    with* ``keras``; ``tf_keras`` reads it as ``tf_kerasevil`` and imports a module of that
    name shipped beside the file. Refused; the module is never imported."""
    imported = "tf_" + module if module.startswith("keras") else module
    marker = planted_module(tmp_path, monkeypatch, imported)
    entry = {"module": module, "class_name": "function", "config": "relu"}
    path = planted(saved, tmp_path, lambda c: c["compile_config"]["metrics"].append(entry))
    assert_refused(path, marker, f"module '{imported}', which is not loaded")
    assert imported not in sys.modules


@pytest.mark.slow  # control for the test above: plain tf_keras imports the shipped module
def test_the_shipped_prefix_module_is_live_under_plain_keras(saved, tmp_path, monkeypatch):
    marker = planted_module(tmp_path, monkeypatch, "tf_kerasevil")
    entry = {"module": "kerasevil", "class_name": "function", "config": "relu"}
    path = planted(saved, tmp_path, lambda c: c["compile_config"]["metrics"].append(entry))
    try:
        tf_keras.models.load_model(path, safe_mode=True)
    except Exception:  # the module ran on import, whatever Keras makes of it after
        pass
    finally:
        sys.modules.pop("tf_kerasevil", None)
    assert marker.exists()
