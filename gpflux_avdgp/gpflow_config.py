"""GPflow objects described by structure and rebuilt from that description, so that a layer or
loss holding them saves and reloads: any of GPflow's own kernels and mean functions
(:func:`module_to_config`), the likelihoods the package supports (:func:`likelihood_to_config`),
each rebuilt in the float type it was saved with (:func:`gpflow_float`).

A config names the class (looked up in ``gpflow.kernels`` or ``gpflow.mean_functions`` only,
never imported from elsewhere) and the constructor arguments: a parameter by its shape, a
kernel (``Periodic``'s base) or list of kernels (``Sum``, ``Product``) by their configs, a
number (``Polynomial``'s degree) by its value, ``active_dims`` as a list. The values travel with
the layer's weights. :func:`module_to_config` rebuilds the module from its config and compares
every parameter (shape, float type, transform, prior), so what cannot be rebuilt exactly is
refused when the layer is built, not after training.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
from typing import Any, Iterator

import gpflow
import numpy as np
import tensorflow as tf
from gpflow.utilities import parameter_dict

__all__ = [
    "gpflow_float",
    "likelihood_from_config",
    "likelihood_to_config",
    "module_from_config",
    "module_to_config",
]


@contextlib.contextmanager
def gpflow_float(dtype: str) -> Iterator[None]:
    """Within the block, ``gpflow.default_float()`` is ``dtype`` (e.g. ``"float32"``), so GPflow
    modules rebuilt from a config get the dtype they were saved with.

    :param dtype: a NumPy floating dtype name.
    :raises ValueError: if ``dtype`` is not a floating dtype name.
    """
    try:
        float_type = np.dtype(dtype)
    except TypeError as error:
        raise ValueError(f"dtype: expected a float dtype name, got {dtype!r}") from error
    if float_type.kind != "f":
        raise ValueError(f"dtype: expected a float dtype name, got {dtype!r}")
    config = dataclasses.replace(gpflow.config.config(), float=float_type.type)
    with gpflow.config.as_context(config):
        yield


_NAMESPACES = {"kernel": gpflow.kernels, "mean_function": gpflow.mean_functions}
_SKIPPED = {"self", "name", "args", "kwargs"}


def _describe(module: tf.Module, kind: str, where: str) -> dict:
    cls = type(module)
    if getattr(_NAMESPACES[kind], cls.__name__, None) is not cls:
        raise NotImplementedError(
            f"{where}: {kind} {cls.__name__} cannot be saved; use a class of "
            f"gpflow.{_NAMESPACES[kind].__name__.split('.')[-1]}"
        )
    arguments: dict[str, Any] = {}
    for name, spec in inspect.signature(cls.__init__).parameters.items():
        if name in _SKIPPED or spec.kind in (spec.VAR_POSITIONAL, spec.VAR_KEYWORD):
            continue
        value = getattr(module, name, None)
        if name == "active_dims":
            arguments[name] = _active_dims(module, where)
        elif isinstance(value, gpflow.Parameter):
            arguments[name] = {"parameter": [int(d) for d in value.shape]}
        elif isinstance(value, gpflow.kernels.Kernel):
            arguments[name] = {"kernel": _describe(value, "kernel", where)}
        elif (
            isinstance(value, (list, tuple))
            and value
            and all(isinstance(k, gpflow.kernels.Kernel) for k in value)
        ):
            arguments[name] = {"kernels": [_describe(k, "kernel", where) for k in value]}
        elif isinstance(value, (bool, int, float, str, np.integer, np.floating)):
            arguments[name] = {"value": value.item() if hasattr(value, "item") else value}
        elif value is None and spec.default is not spec.empty:
            continue
        else:
            raise NotImplementedError(
                f"{where}: {kind} {cls.__name__} cannot be saved: its argument {name!r} is "
                f"{type(value).__name__}"
            )
    if isinstance(module, gpflow.kernels.Kernel) and "active_dims" not in arguments:
        # Stationary kernels take active_dims through **kwargs, which the loop skips
        active_dims = _active_dims(module, where)
        if active_dims["value"] is not None:
            takes_keywords = any(
                spec.kind is spec.VAR_KEYWORD
                for spec in inspect.signature(cls.__init__).parameters.values()
            )
            if not takes_keywords:
                raise NotImplementedError(
                    f"{where}: kernel {cls.__name__} with active_dims cannot be saved"
                )
            arguments["active_dims"] = active_dims
    return {"class_name": cls.__name__, "arguments": arguments}


def _active_dims(kernel: gpflow.kernels.Kernel, where: str):
    active = kernel.active_dims
    if isinstance(active, slice):
        if active == slice(None, None, None):
            return {"value": None}
        raise NotImplementedError(f"{where}: active_dims={active} cannot be saved; give a list")
    return {"value": [int(i) for i in np.asarray(active).reshape(-1)]}


def _all_active_dims(module: tf.Module, where: str) -> list:
    """The ``active_dims`` of every kernel in ``module`` (itself first), in a fixed order."""
    kernels = [m for m in (module, *module.submodules) if isinstance(m, gpflow.kernels.Kernel)]
    return [_active_dims(kernel, where) for kernel in kernels]


def _build(config: dict, kind: str) -> tf.Module:
    cls = getattr(_NAMESPACES[kind], config["class_name"], None)
    if not (isinstance(cls, type) and issubclass(cls, tf.Module)):
        raise ValueError(f"{kind}: unknown class_name {config['class_name']!r}")
    arguments = {}
    for name, argument in config["arguments"].items():
        if "parameter" in argument:  # a placeholder; the weights set the value
            shape = argument["parameter"]
            arguments[name] = np.eye(*shape) if len(shape) == 2 else np.ones(shape)
        elif "kernel" in argument:
            arguments[name] = _build(argument["kernel"], "kernel")
        elif "kernels" in argument:
            arguments[name] = [_build(k, "kernel") for k in argument["kernels"]]
        else:
            arguments[name] = argument["value"]
    return cls(**arguments)


def _parameters(module: tf.Module) -> list[tuple[str, gpflow.Parameter]]:
    return sorted(parameter_dict(module).items())


def module_to_config(module: tf.Module, kind: str, *, where: str) -> dict:
    """A JSON-able description of a GPflow kernel (``kind="kernel"``) or mean function
    (``kind="mean_function"``), checked by rebuilding it.

    :param where: the owner's name, for error messages.
    :raises NotImplementedError: one line naming what cannot be saved (a class from outside
        GPflow, a prior, a transform other than the class's default, a parameter the
        constructor does not rebuild, mixed float types).
    """
    parameters = _parameters(module)
    dtypes = {p.dtype for _, p in parameters}
    if len(dtypes) > 1:
        raise NotImplementedError(f"{where}: {kind} with mixed float types cannot be saved")
    dtype = dtypes.pop().name if dtypes else gpflow.default_float().__name__
    config = {**_describe(module, kind, where), "dtype": dtype}
    with tf.init_scope():
        rebuilt = module_from_config(config, kind)
    placeholders = _parameters(rebuilt)
    if [path for path, _ in parameters] != [path for path, _ in placeholders]:
        raise NotImplementedError(
            f"{where}: {kind} {type(module).__name__} cannot be saved: its constructor does "
            "not rebuild all of its parameters"
        )
    if _all_active_dims(module, where) != _all_active_dims(rebuilt, where):
        raise NotImplementedError(
            f"{where}: {kind} {type(module).__name__} cannot be saved: its constructor does "
            "not rebuild the input dimensions its kernels act on"
        )
    for (path, parameter), (_, placeholder) in zip(parameters, placeholders):
        label = f"{kind}{path}"
        if parameter.prior is not None:
            raise NotImplementedError(f"{where}: {label} has a prior, which cannot be saved")
        same_shape = parameter.unconstrained_variable.shape == (
            placeholder.unconstrained_variable.shape
        )
        if not same_shape or type(parameter.transform) is not type(placeholder.transform):
            raise NotImplementedError(
                f"{where}: {label} has a shape or transform its class does not rebuild, which "
                "cannot be saved"
            )
        if parameter.transform is not None and not np.allclose(
            placeholder.transform.forward(parameter.unconstrained_variable).numpy(),
            parameter.numpy(),
            rtol=1e-6,
        ):
            raise NotImplementedError(
                f"{where}: {label} has a transform other than its class's default, which "
                "cannot be saved"
            )
    config["fixed"] = [path for path, parameter in parameters if not parameter.trainable]
    return config


def module_from_config(config: dict, kind: str) -> tf.Module:
    """Rebuild :func:`module_to_config`'s module with placeholder values (ones, identity
    matrices) in the saved float type and trainability; loading the weights sets the values.

    :raises ValueError: for a class that is not in GPflow's namespace for ``kind``.
    """
    with gpflow_float(config.get("dtype", gpflow.default_float().__name__)):
        module = _build(config, kind)
    fixed = set(config.get("fixed", []))
    for path, parameter in _parameters(module):
        if path in fixed:
            gpflow.set_trainable(parameter, False)
    return module


def likelihood_to_config(likelihood: gpflow.likelihoods.Likelihood) -> dict:
    """A JSON-able description of the Gaussian, Bernoulli (probit), MultiClass (RobustMax) and
    Softmax likelihoods.

    :raises NotImplementedError: for other likelihoods (or subclasses), rather than saving a
        different one.
    """
    if type(likelihood) is gpflow.likelihoods.Gaussian:
        config = {
            "class_name": "Gaussian",
            "variance": float(likelihood.variance.numpy()),
            "dtype": likelihood.variance.dtype.name,
        }
    elif type(likelihood) is gpflow.likelihoods.Bernoulli:
        config = {"class_name": "Bernoulli"}
    elif type(likelihood) is gpflow.likelihoods.MultiClass and type(likelihood.invlink) is (
        gpflow.likelihoods.RobustMax
    ):
        epsilon = likelihood.invlink.epsilon
        config = {
            "class_name": "MultiClass",
            "num_classes": int(likelihood.num_classes),
            "epsilon": float(epsilon.numpy()),
            "dtype": epsilon.dtype.name,
        }
    elif type(likelihood) is gpflow.likelihoods.Softmax:
        config = {"class_name": "Softmax", "num_classes": int(likelihood.num_classes)}
    else:
        raise NotImplementedError(
            f"likelihood: {type(likelihood).__name__} cannot be saved; Gaussian, Bernoulli, "
            "MultiClass (RobustMax) and Softmax can"
        )
    return config


def likelihood_from_config(config: dict) -> gpflow.likelihoods.Likelihood:
    """A new likelihood from :func:`likelihood_to_config`, in the saved float type (trained
    values come from the weights). Files of earlier versions also hold an ``id``, ignored.

    :raises ValueError: for an unknown ``class_name``.
    """
    if config["class_name"] == "Gaussian":
        with gpflow_float(config.get("dtype", gpflow.default_float().__name__)):
            return gpflow.likelihoods.Gaussian(variance=config["variance"])
    if config["class_name"] == "Bernoulli":
        return gpflow.likelihoods.Bernoulli()
    if config["class_name"] == "MultiClass":
        with gpflow_float(config.get("dtype", gpflow.default_float().__name__)):
            num_classes = int(config["num_classes"])
            invlink = gpflow.likelihoods.RobustMax(num_classes, epsilon=config["epsilon"])
            return gpflow.likelihoods.MultiClass(num_classes, invlink=invlink)
    if config["class_name"] == "Softmax":
        return gpflow.likelihoods.Softmax(int(config["num_classes"]))
    raise ValueError(f"likelihood: unknown class_name {config['class_name']!r}")
