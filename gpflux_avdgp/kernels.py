"""Kernel and mean-function specifications that a layer can rebuild from its config."""

from __future__ import annotations

from typing import Optional, Union

import gpflow
import numpy as np

__all__ = [
    "KERNELS",
    "check_kernel_width",
    "make_kernel",
    "make_mean_function",
]

#: Kernels a layer can build from a name (all isotropic or ARD stationary kernels).
KERNELS: dict[str, type[gpflow.kernels.Stationary]] = {
    "matern12": gpflow.kernels.Matern12,
    "matern32": gpflow.kernels.Matern32,
    "matern52": gpflow.kernels.Matern52,
    "rbf": gpflow.kernels.SquaredExponential,
    "squared_exponential": gpflow.kernels.SquaredExponential,
}

KernelArg = Union[str, gpflow.kernels.Kernel]
MeanFunctionArg = Union[None, str, gpflow.mean_functions.MeanFunction]


def make_kernel(kernel: KernelArg, input_dim: int, *, ard: bool) -> gpflow.kernels.Kernel:
    """Return ``kernel`` if it is a GPflow kernel, else build the named one.

    :param kernel: a name from :data:`KERNELS` or any ``gpflow.kernels.Kernel``.
    :param input_dim: ``D``; ARD kernels get ``D`` lengthscales, all starting at one.
    :param ard: one lengthscale per input dimension (only used for named kernels).
    :raises TypeError: for neither a kernel nor a string; ``ValueError`` for an unknown name.
    """
    if isinstance(kernel, gpflow.kernels.Kernel):
        return kernel
    if isinstance(kernel, str) and kernel.lower() in KERNELS:
        lengthscales = np.ones(input_dim) if ard else 1.0
        return KERNELS[kernel.lower()](lengthscales=lengthscales)
    raise (ValueError if isinstance(kernel, str) else TypeError)(
        f"kernel: expected a GPflow kernel or one of {sorted(KERNELS)}, got {kernel!r}"
    )


def check_kernel_width(kernel: gpflow.kernels.Kernel, input_dim: int) -> None:
    """Refuse a kernel whose per-dimension parameters do not fit inputs of width ``input_dim``.

    Every part of ``kernel`` (sums, products and multi-output kernels are walked) that reads
    all input columns must have one lengthscale (stationary kernels) or one variance
    (``Linear``, ``Polynomial``) per column, or a scalar; a part with ``active_dims`` must name
    columns below ``input_dim`` and have one value per named column.

    :raises ValueError: ``kernel: expected D lengthscales for input width D, got K (Matern32)``.
    """
    for part in _kernel_parts(kernel):
        name = type(part).__name__
        active = part.active_dims
        if isinstance(active, slice):
            width = len(range(input_dim)[active])
        else:
            columns = np.asarray(active).reshape(-1)
            if columns.size and (columns.max() >= input_dim or columns.min() < -input_dim):
                raise ValueError(
                    f"kernel: active_dims {columns.tolist()} of {name} reach past input width "
                    f"{input_dim}"
                )
            width = int(columns.size)
        for attribute, what in (("lengthscales", "lengthscales"), ("variance", "variances")):
            if attribute == "variance" and not isinstance(part, gpflow.kernels.Linear):
                continue  # a stationary kernel's variance is a scale, not per column
            value = getattr(part, attribute, None)
            shape = tuple(value.shape) if value is not None else ()
            if len(shape) == 1 and shape[0] != width:
                columns = "" if isinstance(active, slice) else f" ({width} active_dims)"
                raise ValueError(
                    f"kernel: expected {width} {what} for input width {input_dim}{columns}, "
                    f"got {shape[0]} ({name}); give {width} or a scalar"
                )


def _kernel_parts(kernel: gpflow.kernels.Kernel) -> list[gpflow.kernels.Kernel]:
    """The kernels that act on inputs inside ``kernel``: the kernel itself, or the parts of a
    sum/product or of a multi-output kernel, recursively."""
    children = getattr(kernel, "kernels", None)
    if children is None and hasattr(kernel, "kernel"):  # SharedIndependent
        children = [kernel.kernel]
    if children is None:
        return [kernel]
    return [part for child in children for part in _kernel_parts(child)]


def make_mean_function(
    mean_function: MeanFunctionArg, input_dim: int, output_dim: int
) -> Optional[gpflow.mean_functions.MeanFunction]:
    """``None``/``"zero"``: no mean function; ``"linear"``: learned ``F A + b``;
    ``"identity"``: the fixed ``F A`` (not trained), DS-DGP's distance-keeping mean.

    ``A`` ``[D_in, D_out]`` is the identity on the first ``min(D_in, D_out)`` dimensions (as in
    DS-DGP's identity/projection mean functions, without needing data); ``"linear"`` starts
    there and trains ``A`` and ``b``, ``"identity"`` keeps them, so inputs a distance apart
    keep that distance in the first ``min(D_in, D_out)`` output dimensions.
    """
    if isinstance(mean_function, gpflow.mean_functions.MeanFunction):
        return mean_function
    if mean_function is None or mean_function == "zero":
        return None
    if mean_function in ("linear", "identity"):
        weights = np.eye(input_dim, output_dim)
        linear = gpflow.mean_functions.Linear(A=weights, b=np.zeros(output_dim))
        if mean_function == "identity":
            gpflow.set_trainable(linear, False)
        return linear
    raise ValueError(
        "mean_function: expected None, 'zero', 'linear', 'identity' or a GPflow MeanFunction, "
        f"got {mean_function!r}"
    )
