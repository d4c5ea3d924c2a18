"""Which objects a saved model's config may name: the allow list checked before deserialising.

A Keras config names classes and functions by ``module`` and ``class_name`` (or a registered
name), and ``tf_keras`` imports that module and calls what it finds: a crafted file can name
``pydoc.pipepager`` as a ``Lambda``'s function, ``os.system`` as an activation or a module it
ships beside itself. :func:`check_config` walks a config (a ``.keras`` archive's
``config.json`` or a SavedModel's ``keras_metadata.pb`` entries) *before* Keras sees it and
accepts only

* Keras' own layers, models, optimizers, losses, metrics, initializers, regularizers,
  constraints and learning-rate schedules (from ``tf_keras``, found through Keras' public API
  names, never by importing what the file names), except the layers that run a function named
  by the file: ``Lambda`` always, ``TFOpLambda`` / ``SlicingOpLambda`` unless the TensorFlow
  op is pure maths (:data:`PURE_TF_OPS`), and the class-method layers;
* Keras' built-in activation, loss and metric functions;
* the Keras objects of GPflow, GPflux and this package (except those that unpickle code:
  tfp's ``DistributionLambda`` family);
* what the caller passes as ``custom_objects``: code the caller has imported, hence trusts.

A module named by the file is looked up among the modules already imported, never imported.
Plain data entries (tensors, arrays, tuples, shapes) pass; ``__lambda__`` (marshalled bytecode)
never does. A refusal is one :class:`UnsafeModelError` line naming what was found and where.
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
import types
from typing import Any, Callable, Iterator, Mapping, Optional

import gpflux
import tensorflow as tf
from gpflow.keras import tf_keras
from tensorflow.python.util import tf_export
from tf_keras.src.layers import serialization as layer_serialization
from tf_keras.src.layers.core import tf_op_layer
from tf_keras.src.saving import serialization_lib

from .errors import UnsafeModelError

__all__ = ["PURE_TF_OPS", "check_config", "find_objects"]


#: Packages whose registered Keras objects a model file may name (besides ``tf_keras``).
TRUSTED_PACKAGES = ("gpflux_avdgp", "gpflow", "gpflux")

#: TensorFlow API names a ``TFOpLambda`` layer may call: maths with no side effects.
PURE_TF_OPS = re.compile(
    r"^(__operators__\.\w+|math\.\w+|linalg\.\w+|nn\.\w+|concat|reshape|stack|unstack|"
    r"expand_dims|squeeze|transpose|identity|cast|gather|gather_nd|split|tile|where|ones_like|"
    r"zeros_like|clip_by_value|broadcast_to|einsum|matmul|reduce_\w+|shape|size|rank)$"
)

#: Keras-object entries that carry data, not code (new format and SavedModel metadata).
_DATA_CLASS_NAMES = frozenset(
    {"__tensor__", "__numpy__", "__bytes__", "__tuple__", "__ellipsis__", "TensorShape"}
)

_KERAS_BASES = (
    tf_keras.layers.Layer,
    tf_keras.optimizers.Optimizer,
    tf_keras.optimizers.legacy.Optimizer,
    tf_keras.losses.Loss,
    tf_keras.metrics.Metric,
    tf_keras.initializers.Initializer,
    tf_keras.regularizers.Regularizer,
    tf_keras.constraints.Constraint,
    tf_keras.optimizers.schedules.LearningRateSchedule,
    tf_keras.layers.InputSpec,
)
_OP_LAYERS = (tf_op_layer.TFOpLambda,)  # SlicingOpLambda subclasses it
_REFUSED_BASES = (
    tf_keras.layers.Lambda,
    tf_op_layer.ClassMethod,
    tf_op_layer.InstanceMethod,
    tf_op_layer.InstanceProperty,
)
#: tfp's layer module: its ``DistributionLambda`` unpickles a function in ``from_config``. Looked
#: up only if loaded (a class deriving from it implies it is), so importing the library does
#: not import tfp's layers.
_TFP_LAYERS = "tensorflow_probability.python.layers.distribution_layer"
_FUNCTION_MODULES = ("activations", "losses", "metrics")
_NAME = re.compile(r"^[A-Za-z_][\w>.]*$")


def find_objects(config: Any, where: str = "") -> Iterator[tuple[str, dict]]:
    """Every Keras-object entry of ``config`` (a dict with ``class_name`` and ``config``,
    ``module`` or ``registered_name``), depth first, with its location (``layers[2].config``)."""
    if isinstance(config, dict):
        if "class_name" in config and (
            {"config", "module", "registered_name"} & config.keys()
            or config["class_name"] in ("__lambda__", "__typespec__", "TypeSpec")
        ):
            yield where or "top level", config
        for key, value in config.items():
            yield from find_objects(value, f"{where}.{key}" if where else str(key))
    elif isinstance(config, (list, tuple)):
        for index, value in enumerate(config):
            yield from find_objects(value, f"{where}[{index}]")


def check_config(
    config: Any,
    *,
    source: str,
    custom_objects: Optional[Mapping[str, Any]] = None,
    legacy: bool = False,
) -> None:
    """Refuse ``config`` if any entry names an object outside the allow list.

    :param config: a decoded JSON config (``config.json``, or one ``keras_metadata.pb`` entry).
    :param source: where it came from, for the message (``"model.keras/config.json"``).
    :param custom_objects: objects the caller trusts, by name (as for ``tf_keras``).
    :param legacy: a SavedModel's metadata (names without ``module``, resolved as Keras' legacy
        loader does: custom objects, registered names, Keras' built-ins).
    :raises UnsafeModelError: one line naming the entry and its location.
    """
    trusted = dict(custom_objects or {})
    for where, entry in find_objects(config):
        problem = _problem(entry, trusted, legacy)
        if problem is not None:
            raise UnsafeModelError(
                f"{source}: refused at {where}: {problem}; only Keras, GPflow, GPflux and "
                "gpflux_avdgp objects load (see docs/saving.md to load a file you trust)"
            )


def _problem(entry: dict, trusted: dict, legacy: bool) -> Optional[str]:
    """Why ``entry`` may not be deserialised, or ``None`` if it may."""
    class_name = entry.get("class_name")
    if not isinstance(class_name, str):
        return f"class_name {class_name!r} is not a name"
    if class_name == "__lambda__":
        return "a Python lambda (marshalled bytecode)"
    if class_name in _DATA_CLASS_NAMES:
        return None
    if class_name == "TypeSpec":  # legacy JSON: looked up in TensorFlow's TypeSpec registry
        return None if isinstance(entry.get("type_spec"), str) else "a TypeSpec without a name"
    if class_name == "__typespec__":
        return _typespec_problem(entry)
    if class_name == "function":
        return _function_problem(entry, trusted)
    candidates = _class_candidates(entry, trusted, legacy)
    if isinstance(candidates, str):
        return candidates
    for found in candidates:  # every object a Keras lookup could land on must be allowed
        if not any(found is value for value in trusted.values()):
            problem = _class_problem(found, entry.get("config"))
            if problem is not None:
                return problem
    return None


def _typespec_problem(entry: dict) -> Optional[str]:
    """A ``__typespec__`` names a ``tf.TypeSpec`` class by module: only TensorFlow's."""
    module, name = entry.get("module"), entry.get("spec_name")
    loaded = sys.modules.get(module) if isinstance(module, str) else None
    spec = getattr(loaded, name, None) if loaded is not None and isinstance(name, str) else None
    if (
        isinstance(spec, type)
        and issubclass(spec, tf.TypeSpec)
        and spec.__module__.startswith("tensorflow.")
    ):
        return None
    return f"type spec {module}.{name}, not one of TensorFlow's"


def _function_problem(entry: dict, trusted: dict) -> Optional[str]:
    """A function entry: what ``tf_keras`` would find for it (by registered name, else by
    module, never importing) is a trusted function, one registered by gpflux_avdgp, GPflow or
    GPflux, or a Keras built-in activation, loss or metric."""
    module = entry.get("module")
    names = [entry.get("config")]
    if entry.get("registered_name") not in (None, "function"):
        names.append(entry["registered_name"])
    for name in names:
        if not isinstance(name, str) or not _NAME.match(name):
            return f"a function named {name!r}"
        if name in trusted:
            continue
        registered = tf_keras.saving.get_registered_object(name)
        if registered is not None:
            if _defined_in(registered, TRUSTED_PACKAGES):
                continue
            return f"function {name!r}, registered outside GPflow, GPflux and gpflux_avdgp"
        if module is not None and not isinstance(module, str):
            return f"module {module!r} is not a name"
        found = _keras_function(name) if module is None else _as_keras_finds(module, name)
        if isinstance(found, str):
            return found
        if found is None or found is not _keras_function(name):
            return f"function {module}.{name}, not a Keras activation, loss or metric"
    return None


def _keras_function(name: str) -> Optional[Callable]:
    """Keras' built-in activation, loss or metric function called ``name`` (not its
    ``get`` / ``serialize`` / ``deserialize`` helpers)."""
    if name in ("get", "serialize", "deserialize"):
        return None
    for namespace in _FUNCTION_MODULES:
        found = getattr(getattr(tf_keras, namespace), name, None)
        if isinstance(found, types.FunctionType) and _defined_in(found, ("tf_keras",)):
            return found
    return None


def _class_candidates(entry: dict, trusted: dict, legacy: bool):
    """Every class a ``tf_keras`` loader could build for ``entry`` (by registered name, by
    module and name, by Keras' built-in name), found without importing anything; or a message
    saying why there is none."""
    class_name, module = entry["class_name"], entry.get("module")
    registered = entry.get("registered_name", class_name)
    if not _NAME.match(class_name) or not (registered is None or isinstance(registered, str)):
        return f"class_name {class_name!r} / registered_name {registered!r} are not names"
    candidates = []
    for key in {class_name, registered} - {None}:
        found = trusted.get(key)
        if found is None:
            found = tf_keras.saving.get_registered_object(key)
        if found is not None:
            candidates.append(found)
    builtin = _keras_classes().get(class_name)
    if builtin is not None:
        candidates.append(builtin)
    by_registration = registered is not None and (
        registered in trusted or tf_keras.saving.get_registered_object(registered) is not None
    )
    if isinstance(module, str) and not legacy and not by_registration:
        found = _class_in_module(module, class_name)
        if isinstance(found, str):
            return found
        candidates.append(found)
    elif module is not None and not isinstance(module, str):
        return f"module {module!r} is not a name"
    if legacy and not candidates:  # a Keras SavedModel names its own class without package
        candidates = [
            found
            for found in (
                tf_keras.saving.get_registered_object(f"{package}>{class_name}")
                for package in TRUSTED_PACKAGES
            )
            if found is not None
        ]
    if legacy and not candidates and class_name in _gpflux_layer_names():
        return []  # rebuilt by its parent's config (SigmaPointGPLayer), never by this entry
    if not candidates:  # in a SavedModel Keras would revive it from the file's traced graph
        return f"class {class_name!r}, unknown to Keras and not registered"
    return candidates


@functools.lru_cache(maxsize=1)
def _gpflux_layer_names() -> frozenset[str]:
    """GPflux's layer classes, which GPflux does not register with Keras: a SavedModel of a
    :class:`~gpflux_avdgp.SigmaPointGPLayer` names its wrapped ``GPLayer`` by class name.
    Keras cannot build one from that name; the wrapper's config rebuilds it (or, if that
    failed, Keras would revive it from the graph, whose ops :mod:`.graph_ops` checks)."""
    return frozenset(
        name
        for name, value in vars(gpflux.layers).items()
        if isinstance(value, type) and issubclass(value, tf_keras.layers.Layer)
    )


def _is_keras_module(module: str) -> bool:
    """Whether ``module`` is Keras' own: the package ``keras`` or ``tf_keras`` or a module in
    it (a whole-package match: ``kerasevil`` and ``tf_keras_x`` are not)."""
    return module in ("keras", "tf_keras") or module.startswith(("keras.", "tf_keras."))


def _as_keras_finds(module: str, name: str) -> Any:
    """What ``tf_keras`` finds for ``module`` and ``name`` once the registry has no entry:
    Keras' API table for its own modules, its built-in function modules for ``builtins``,
    else ``vars()`` of the module it would import (``keras...`` read as ``tf_keras...``),
    which must already be loaded; ``None`` if nothing; a message if Keras would import."""
    if _is_keras_module(module):
        found = tf_export.get_symbol_from_name(f"{module}.{name}")
        if found is not None:
            return found
    if module == "builtins":
        for namespace in serialization_lib.BUILTIN_MODULES:
            found = tf_export.get_symbol_from_name(f"keras.{namespace}.{name}")
            if found is not None:
                return found
    imported = "tf_" + module if module.startswith("keras") else module
    if imported not in sys.modules:  # never import what a file names
        return f"module {imported!r}, which is not loaded (a model file never imports code)"
    return vars(sys.modules[imported]).get(name)


def _class_in_module(module: str, class_name: str) -> Any:
    """``module.class_name`` as ``tf_keras`` finds it, from loaded modules only."""
    found = _as_keras_finds(module, class_name)
    return found if found is not None else f"class {module}.{class_name}, not found"


@functools.lru_cache(maxsize=1)
def _keras_classes() -> dict[str, type]:
    """Keras' built-in classes by name, as its legacy loader finds them."""
    layer_serialization.populate_deserializable_objects()
    classes = dict(layer_serialization.LOCAL.ALL_OBJECTS)
    for namespace in (
        tf_keras.optimizers,
        tf_keras.optimizers.legacy,
        tf_keras.optimizers.schedules,
        tf_keras.losses,
        tf_keras.metrics,
        tf_keras.initializers,
        tf_keras.regularizers,
        tf_keras.constraints,
        tf_keras.models,
    ):
        for name, value in vars(namespace).items():
            if isinstance(value, type):
                classes.setdefault(name, value)
    classes.setdefault("InputSpec", tf_keras.layers.InputSpec)
    return classes


def _defined_in(obj: Any, packages: tuple[str, ...]) -> bool:
    module = getattr(obj, "__module__", None) or ""
    return any(module == package or module.startswith(package + ".") for package in packages)


def _class_problem(cls: Any, inner: Any) -> Optional[str]:
    """Whether a resolved class is one a model may hold, with the config it would get."""
    label = f"{getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', cls)}"
    if not inspect.isclass(cls):
        return f"{label}, a {type(cls).__name__} where a class belongs"
    if not _defined_in(cls, ("tf_keras", *TRUSTED_PACKAGES)):
        return f"class {label}, from outside Keras, GPflow, GPflux and gpflux_avdgp"
    tfp_layers = sys.modules.get(_TFP_LAYERS)
    refused = _REFUSED_BASES + ((tfp_layers.DistributionLambda,) if tfp_layers else ())
    if issubclass(cls, refused) and not _defined_in(cls, ("gpflux_avdgp",)):
        return f"layer {label}, which runs a function named by the file"
    if not issubclass(cls, _KERAS_BASES):
        return f"class {label}, not a Keras layer, model, optimizer, loss or metric"
    if issubclass(cls, _OP_LAYERS):
        function = inner.get("function") if isinstance(inner, dict) else None
        if not (isinstance(function, str) and PURE_TF_OPS.match(function)):
            return f"TensorFlow op layer calling {function!r}, not a pure maths op"
    if isinstance(inner, dict) and isinstance(inner.get("vocabulary"), str):
        return f"layer {label} reading its vocabulary from the file {inner['vocabulary']!r}"
    return None
