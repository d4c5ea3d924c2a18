"""A GPflux ``GPLayer`` described by structure and rebuilt from that description: the config
that :class:`~gpflux_avdgp.layers.gpflux_adapter.SigmaPointGPLayer` saves (kernel, inducing
variable and mean function classes and shapes; the values travel with the weights)."""

from __future__ import annotations

from typing import Optional

import gpflow
import gpflux
import numpy as np
import tensorflow as tf
from gpflow.inducing_variables import (
    InducingPoints,
    SeparateIndependentInducingVariables,
    SharedIndependentInducingVariables,
)
from gpflow.kernels import SeparateIndependent, SharedIndependent
from gpflow.utilities import parameter_dict

from ..gpflow_config import gpflow_float
from ..kernels import KERNELS, kernel_spec, make_kernel

__all__ = ["gp_layer_from_config", "gp_layer_modules", "gp_layer_to_config", "use_mean_field"]


# ------------------------------------------------------------------------- GPLayer structure
_SHARED_KERNEL = "SharedIndependent"
_SEPARATE_KERNEL = "SeparateIndependent"
_SHARED_INDUCING = "SharedIndependentInducingVariables"
_SEPARATE_INDUCING = "SeparateIndependentInducingVariables"
_MEAN_FUNCTIONS = ("Zero", "Identity", "Linear")


def use_mean_field(gp_layer: gpflux.layers.GPLayer) -> gpflux.layers.GPLayer:
    """Give ``gp_layer`` a mean-field ``q(u)``: ``q_sqrt`` becomes the standard deviations
    ``[M, L]`` (positive, started at 1) instead of GPflux's full Cholesky factors
    ``[L, M, M]``; GPflow's conditional and KL read both shapes. Returns the layer."""
    num_inducing, num_latent = (int(d) for d in gp_layer.q_mu.shape)
    replaced = gp_layer.q_sqrt
    gp_layer.q_sqrt = gpflow.Parameter(
        np.ones((num_inducing, num_latent)),
        transform=gpflow.utilities.positive(),
        dtype=gp_layer.q_mu.dtype,
        name=f"{gp_layer.name}_q_sqrt" if gp_layer.name else "q_sqrt",
    )  # [M, L]
    # Keras keeps tracking the replaced Parameter and its variable; drop both, so the optimizer
    # and the saved state hold only the new one.
    for tracked in (gp_layer._trainable_weights, gp_layer._self_tracked_trackables):
        for index in reversed(range(len(tracked))):
            if tracked[index] is replaced or tracked[index] is replaced.unconstrained_variable:
                del tracked[index]
    return gp_layer


def gp_layer_modules(gp_layer: gpflux.layers.GPLayer) -> list[tf.Module]:
    modules = [gp_layer.q_mu, gp_layer.q_sqrt, gp_layer.kernel, gp_layer.inducing_variable]
    return modules + [gp_layer.mean_function]


def _gp_layer_parameters(gp_layer: gpflux.layers.GPLayer) -> list[tuple[str, gpflow.Parameter]]:
    """``(path, parameter)`` for every GPflow parameter of ``gp_layer``, e.g.
    ``("kernel.kernel.variance", ...)``, in a deterministic order."""
    parameters = [("q_mu", gp_layer.q_mu), ("q_sqrt", gp_layer.q_sqrt)]
    for attribute in ("kernel", "inducing_variable", "mean_function"):
        for path, parameter in parameter_dict(getattr(gp_layer, attribute)).items():
            parameters.append((attribute + path, parameter))
    return parameters


def _describe_kernel(kernel: gpflow.kernels.Kernel, where: str) -> dict:
    """``{"name": ..., "ard": ...}`` of a named stationary kernel on all input dimensions."""
    name = kernel_spec(kernel)
    if name is None:
        raise NotImplementedError(
            f"{where}: kernel {type(kernel).__name__} cannot be saved by name; "
            f"use one of {sorted(KERNELS)}"
        )
    active_dims = kernel.active_dims
    if not isinstance(active_dims, slice) or active_dims != slice(None, None, None):
        shown = active_dims if isinstance(active_dims, slice) else np.asarray(active_dims).tolist()
        raise NotImplementedError(
            f"{where}: a kernel with active_dims={shown} cannot be saved; "
            "only kernels on all input dimensions can"
        )
    return {"name": name, "ard": bool(kernel.ard)}


def _describe_multioutput_kernel(kernel: gpflow.kernels.Kernel, where: str) -> dict:
    if type(kernel) is SharedIndependent:
        return {
            "class_name": _SHARED_KERNEL,
            "kernels": [_describe_kernel(kernel.kernel, where)],
            "output_dim": int(kernel.output_dim),
        }
    if type(kernel) is SeparateIndependent:
        return {
            "class_name": _SEPARATE_KERNEL,
            "kernels": [_describe_kernel(k, where) for k in kernel.kernels],
        }
    raise NotImplementedError(
        f"{where}: multi-output kernel {type(kernel).__name__} cannot be saved; "
        f"use {_SHARED_KERNEL} or {_SEPARATE_KERNEL} of {sorted(KERNELS)}"
    )


def _inducing_points(
    inducing_variable: gpflow.inducing_variables.InducingVariables, where: str
) -> list[InducingPoints]:
    """The ``InducingPoints`` of a shared or separate independent inducing variable."""
    if type(inducing_variable) is SharedIndependentInducingVariables:
        points = [inducing_variable.inducing_variable]
    elif type(inducing_variable) is SeparateIndependentInducingVariables:
        points = list(inducing_variable.inducing_variable_list)
    else:
        raise NotImplementedError(
            f"{where}: inducing variable {type(inducing_variable).__name__} cannot be saved; "
            f"use {_SHARED_INDUCING} or {_SEPARATE_INDUCING} of InducingPoints"
        )
    for point in points:
        if type(point) is not InducingPoints:
            raise NotImplementedError(
                f"{where}: inducing variable {type(point).__name__} cannot be saved; "
                "only InducingPoints can"
            )
    return points


def _describe_mean_function(mean_function: gpflow.mean_functions.MeanFunction, where: str) -> dict:
    name = type(mean_function).__name__
    if type(mean_function) is gpflow.mean_functions.Zero:
        return {"class_name": "Zero", "output_dim": int(mean_function.output_dim)}
    if type(mean_function) is gpflow.mean_functions.Identity:
        return {"class_name": "Identity", "input_dim": mean_function.input_dim}
    if type(mean_function) is gpflow.mean_functions.Linear:
        return {
            "class_name": "Linear",
            "A_shape": [int(d) for d in mean_function.A.shape],
            "b_shape": [int(d) for d in mean_function.b.shape],
        }
    raise NotImplementedError(
        f"{where}: mean function {name} cannot be saved; use one of {list(_MEAN_FUNCTIONS)}"
    )


def gp_layer_to_config(gp_layer: gpflux.layers.GPLayer, *, owner: Optional[str] = None) -> dict:
    """A JSON-able description of a GPflux ``GPLayer``'s structure (not its values).

    Supported: a ``SharedIndependent`` or ``SeparateIndependent`` kernel of the named
    stationary kernels in :data:`gpflux_avdgp.kernels.KERNELS` (isotropic or ARD), a
    ``SharedIndependentInducingVariables`` or ``SeparateIndependentInducingVariables`` of
    ``InducingPoints``, and a ``Zero``, ``Identity`` or ``Linear`` mean function; a full-rank
    or mean-field (:func:`use_mean_field`) ``q(u)``; parameters
    without priors and with GPflow's default transforms. Which parameters are not trainable
    is recorded. :func:`gp_layer_from_config` rebuilds the layer with placeholder values.

    :param gp_layer: the layer to describe.
    :param owner: name used in error messages (default: the layer's name).
    :raises NotImplementedError: for anything else, rather than saving a different layer.
    """
    where = f"{owner or gp_layer.name}: gp_layer"
    points = _inducing_points(gp_layer.inducing_variable, where)
    num_inducing, input_dim = (int(d) for d in points[0].Z.shape)
    if any(tuple(p.Z.shape) != (num_inducing, input_dim) for p in points):
        raise NotImplementedError(
            f"{where}: separate inducing points of different shapes "
            f"{[tuple(p.Z.shape) for p in points]} cannot be saved"
        )
    config = {
        "name": gp_layer.name,
        "dtype": gp_layer.q_mu.dtype.name,
        "trainable": bool(gp_layer.trainable),
        "num_data": None if gp_layer.num_data is None else int(gp_layer.num_data),
        "num_latent_gps": int(gp_layer.num_latent_gps),
        "input_dim": input_dim,
        "num_inducing": num_inducing,
        "kernel": _describe_multioutput_kernel(gp_layer.kernel, where),
        "inducing_variable": {
            "class_name": type(gp_layer.inducing_variable).__name__,
            "count": len(points),
        },
        "mean_function": _describe_mean_function(gp_layer.mean_function, where),
        "whiten": bool(gp_layer.whiten),
        "mean_field": gp_layer.q_sqrt.shape.rank == 2,
        "full_cov": bool(gp_layer.full_cov),
        "full_output_cov": bool(gp_layer.full_output_cov),
        "num_samples": None if gp_layer.num_samples is None else int(gp_layer.num_samples),
        "non_trainable": [
            index
            for index, (_, parameter) in enumerate(_gp_layer_parameters(gp_layer))
            if not parameter.trainable
        ],
    }
    _check_rebuilds(gp_layer, config, where)
    return config


def _check_rebuilds(gp_layer: gpflux.layers.GPLayer, config: dict, where: str) -> None:
    """Rebuild ``config`` and check that loading ``gp_layer``'s variables into it restores
    every parameter: same parameters, shapes, dtypes and transforms, and no priors.

    :raises NotImplementedError: naming the first parameter that would not be restored.
    """
    with tf.init_scope():
        rebuilt = gp_layer_from_config(config)
    original, placeholders = _gp_layer_parameters(gp_layer), _gp_layer_parameters(rebuilt)
    if len(original) != len(placeholders):
        raise NotImplementedError(
            f"{where}: the layer has {len(original)} parameters, its config rebuilds "
            f"{len(placeholders)}; it cannot be saved"
        )
    for (label, parameter), (_, placeholder) in zip(original, placeholders):
        if parameter.dtype != placeholder.dtype:
            raise NotImplementedError(
                f"{where}: parameter {label!r} has dtype {parameter.dtype.name}, the layer's "
                f"{placeholder.dtype.name}; mixed float types cannot be saved"
            )
        if parameter.prior is not None:
            raise NotImplementedError(
                f"{where}: parameter {label!r} has a prior, which cannot be saved"
            )
        if parameter.unconstrained_variable.shape != placeholder.unconstrained_variable.shape:
            raise NotImplementedError(
                f"{where}: parameter {label!r} has shape {parameter.shape}, its config "
                f"rebuilds {placeholder.shape}; it cannot be saved"
            )
        if type(parameter.transform) is not type(placeholder.transform) or (
            parameter.transform is not None
            and not np.allclose(
                placeholder.transform.forward(parameter.unconstrained_variable).numpy(),
                parameter.numpy(),
                rtol=1e-6,
                atol=0.0,
            )
        ):
            raise NotImplementedError(
                f"{where}: parameter {label!r} has a transform other than GPflow's default, "
                "which cannot be saved"
            )


def _placeholder_kernel(spec: dict, input_dim: int) -> gpflow.kernels.Kernel:
    return make_kernel(spec["name"], input_dim, ard=spec["ard"])


def gp_layer_from_config(config: dict) -> gpflux.layers.GPLayer:
    """Rebuild a GPflux ``GPLayer`` from :func:`gp_layer_to_config` with placeholder values
    (unit kernel hyperparameters, standard-normal inducing points ``[M, D]``, identity-like
    ``A``, GPflux's initial ``q_mu`` ``[M, L]`` and ``q_sqrt`` ``[L, M, M]``) in the saved
    float type; loading the weights then sets the trained values.

    :param config: the dict returned by :func:`gp_layer_to_config`.
    :raises ValueError: for a config that does not describe a supported layer.
    """
    with gpflow_float(config.get("dtype", gpflow.default_float().__name__)):
        return _build_gp_layer(config)


def _build_gp_layer(config: dict) -> gpflux.layers.GPLayer:
    input_dim, num_inducing = config["input_dim"], config["num_inducing"]
    kernel_config = config["kernel"]
    kernels = [_placeholder_kernel(spec, input_dim) for spec in kernel_config["kernels"]]
    if kernel_config["class_name"] == _SHARED_KERNEL:
        kernel = SharedIndependent(kernels[0], output_dim=kernel_config["output_dim"])
    elif kernel_config["class_name"] == _SEPARATE_KERNEL:
        kernel = SeparateIndependent(kernels)
    else:
        raise ValueError(f"gp_layer: unknown kernel class_name {kernel_config['class_name']!r}")

    rng = np.random.default_rng(0)  # well-spread inducing points until the weights load

    def points() -> InducingPoints:
        return InducingPoints(rng.standard_normal((num_inducing, input_dim)))

    inducing_config = config["inducing_variable"]
    if inducing_config["class_name"] == _SHARED_INDUCING:
        inducing_variable = SharedIndependentInducingVariables(points())
    elif inducing_config["class_name"] == _SEPARATE_INDUCING:
        inducing_variable = SeparateIndependentInducingVariables(
            [points() for _ in range(inducing_config["count"])]
        )
    else:
        raise ValueError(
            f"gp_layer: unknown inducing_variable class_name {inducing_config['class_name']!r}"
        )

    mean_config = config["mean_function"]
    if mean_config["class_name"] == "Zero":
        mean_function = gpflow.mean_functions.Zero(output_dim=mean_config["output_dim"])
    elif mean_config["class_name"] == "Identity":
        mean_function = gpflow.mean_functions.Identity(input_dim=mean_config["input_dim"])
    elif mean_config["class_name"] == "Linear":
        a_shape = mean_config["A_shape"]
        mean_function = gpflow.mean_functions.Linear(
            A=np.eye(*a_shape) if len(a_shape) == 2 else np.ones(a_shape),
            b=np.zeros(mean_config["b_shape"]),
        )
    else:
        raise ValueError(
            f"gp_layer: unknown mean_function class_name {mean_config['class_name']!r}"
        )

    gp_layer = gpflux.layers.GPLayer(
        kernel,
        inducing_variable,
        num_data=config["num_data"],
        mean_function=mean_function,
        num_samples=config["num_samples"],
        full_cov=config["full_cov"],
        full_output_cov=config["full_output_cov"],
        num_latent_gps=config["num_latent_gps"],
        whiten=config["whiten"],
        name=config["name"],
        verbose=False,
    )
    if config.get("mean_field", False):
        use_mean_field(gp_layer)
    gp_layer.trainable = config["trainable"]
    parameters = _gp_layer_parameters(gp_layer)
    for index in config["non_trainable"]:
        gpflow.set_trainable(parameters[index][1], False)
    return gp_layer
