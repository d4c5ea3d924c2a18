"""A GPflux ``GPLayer`` described by structure and rebuilt from that description: the config
that :class:`~gpflux_avdgp.layers.gpflux_adapter.SigmaPointGPLayer` saves (kernel, inducing
variable and mean function classes and shapes; the values travel with the weights).

The kernel and the mean function are described by the package's one serialiser of GPflow
objects, :func:`gpflux_avdgp.gpflow_config.module_to_config`; this module adds the inducing
variables and the layer's own options. Files written before that (kernels by name, three mean
functions by shape) still load (:func:`_legacy_kernel`, :func:`_legacy_mean_function`)."""

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

from ..gpflow_config import gpflow_float, module_from_config, module_to_config
from ..kernels import make_kernel

__all__ = ["gp_layer_from_config", "gp_layer_modules", "gp_layer_to_config", "use_mean_field"]


_SHARED_INDUCING = "SharedIndependentInducingVariables"
_SEPARATE_INDUCING = "SeparateIndependentInducingVariables"


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


def gp_layer_to_config(gp_layer: gpflux.layers.GPLayer, *, owner: Optional[str] = None) -> dict:
    """A JSON-able description of a GPflux ``GPLayer``'s structure (not its values).

    Supported: a kernel and a mean function of GPflow's classes that
    :func:`~gpflux_avdgp.gpflow_config.module_to_config` saves (e.g. a ``SharedIndependent``
    or ``SeparateIndependent`` of any GPflow kernels), a
    ``SharedIndependentInducingVariables`` or ``SeparateIndependentInducingVariables`` of
    ``InducingPoints``; a full-rank
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
        "kernel": module_to_config(gp_layer.kernel, "kernel", where=where),
        "inducing_variable": {
            "class_name": type(gp_layer.inducing_variable).__name__,
            "count": len(points),
        },
        "mean_function": module_to_config(gp_layer.mean_function, "mean_function", where=where),
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


def _legacy_kernel(config: dict, input_dim: int) -> gpflow.kernels.Kernel:
    """The multi-output kernel of a file written before the one serialiser: named stationary
    kernels (``{"name", "ard"}``) in a ``SharedIndependent`` or ``SeparateIndependent``."""
    kernels = [make_kernel(k["name"], input_dim, ard=k["ard"]) for k in config["kernels"]]
    if config["class_name"] == "SharedIndependent":
        return SharedIndependent(kernels[0], output_dim=config["output_dim"])
    if config["class_name"] == "SeparateIndependent":
        return SeparateIndependent(kernels)
    raise ValueError(f"gp_layer: unknown kernel class_name {config['class_name']!r}")


def _legacy_mean_function(config: dict) -> gpflow.mean_functions.MeanFunction:
    """The mean function of a file written before the one serialiser: ``Zero``, ``Identity``
    or ``Linear`` by shape."""
    if config["class_name"] == "Zero":
        return gpflow.mean_functions.Zero(output_dim=config["output_dim"])
    if config["class_name"] == "Identity":
        return gpflow.mean_functions.Identity(input_dim=config["input_dim"])
    if config["class_name"] == "Linear":
        a_shape = config["A_shape"]
        return gpflow.mean_functions.Linear(
            A=np.eye(*a_shape) if len(a_shape) == 2 else np.ones(a_shape),
            b=np.zeros(config["b_shape"]),
        )
    raise ValueError(f"gp_layer: unknown mean_function class_name {config['class_name']!r}")


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
    kernel_config, mean_config = config["kernel"], config["mean_function"]
    if "arguments" in kernel_config:
        kernel = module_from_config(kernel_config, "kernel")
    else:
        kernel = _legacy_kernel(kernel_config, input_dim)
    if "arguments" in mean_config:
        mean_function = module_from_config(mean_config, "mean_function")
    else:
        mean_function = _legacy_mean_function(mean_config)

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
