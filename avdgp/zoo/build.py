"""Build the zoo's models from a :class:`~avdgp.zoo.spec.ModelSpec`: ours through
:func:`gpflux_avdgp.build_avdgp`, the baselines from GPflux layers and SOLVE-GP."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import gpflow
import gpflux
import numpy as np
from gpflow.keras import tf_keras

from avdgp.zoo.solve_gp import SolveGPLayer
from avdgp.zoo.spec import (
    DESIGNS,
    GLOBAL_INDUCING,
    RULES,
    SAMPLED_DESIGNS,
    SHALLOW,
    ModelKind,
    ModelSpec,
    Task,
)
from gpflux_avdgp.checks import check_choice, check_positive_int
from gpflux_avdgp.layers import SigmaPointGPLayer, TrainableLikelihood
from gpflux_avdgp.layers.gpflux_config import use_mean_field
from gpflux_avdgp.models import AVDGPModel, build_avdgp
from gpflux_avdgp.objectives import AVDGPLoss
from gpflux_avdgp.presets import layer_options

__all__ = ["BuiltModel", "build_model"]


@dataclass
class BuiltModel:
    """A compiled-ready model with its likelihood and loss."""

    model: tf_keras.Sequential
    likelihood: gpflow.likelihoods.Likelihood
    loss: AVDGPLoss
    spec: ModelSpec

    @property
    def label(self) -> str:
        """``avdgp-ar2p``, ``dsdgp``, ...: the spec's table name."""
        return self.spec.label


def _likelihood(task: Task, output_dim: int) -> gpflow.likelihoods.Likelihood:
    if task is Task.REGRESSION:
        return gpflow.likelihoods.Gaussian(variance=0.1)
    if output_dim == 1:
        return gpflow.likelihoods.Bernoulli()  # probit link
    return gpflow.likelihoods.MultiClass(output_dim)  # RobustMax, epsilon 1e-3


def _pca_projection(inputs: Optional[np.ndarray], in_dim: int, out_dim: int) -> np.ndarray:
    """``[in_dim, out_dim]``: identity-like if ``out_dim >= in_dim``, else top PCA directions."""
    if out_dim >= in_dim:
        return np.eye(in_dim, out_dim)
    if inputs is None:
        return np.eye(in_dim, out_dim)
    centred = inputs - inputs.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return vt[:out_dim].T


def _gpflux_layer(
    inducing_init: np.ndarray,
    output_dim: int,
    num_data: int,
    mean_function: gpflow.mean_functions.MeanFunction,
    name: str,
) -> gpflux.layers.GPLayer:
    kernel = gpflux.helpers.construct_basic_kernel(
        gpflow.kernels.Matern52(), output_dim=output_dim, share_hyperparams=True
    )
    inducing = gpflux.helpers.construct_basic_inducing_variables(
        len(inducing_init),
        inducing_init.shape[1],
        output_dim=output_dim,
        share_variables=True,
        z_init=inducing_init,
    )
    return gpflux.layers.GPLayer(
        kernel,
        inducing,
        num_data=num_data,
        num_latent_gps=output_dim,
        mean_function=mean_function,
        name=name,
        verbose=False,
    )


def _global_inducing_layers(
    spec: ModelSpec,
    input_dim: int,
    num_data: int,
    dims: list[int],
    inducing: list[int],
    inputs: Optional[np.ndarray],
) -> list[tf_keras.layers.Layer]:
    """GPflux layers (SVGP / DS-DGP / DSPP), each wrapped to read and write mixtures."""
    rng = np.random.default_rng(spec.seed)
    rule = {ModelKind.DSDGP: "ar1", ModelKind.DSPP: "ar2p"}.get(spec.kind, "ar2")
    layers = []
    in_dim, layer_inputs = input_dim, inputs
    for index, (width, count) in enumerate(zip(dims, inducing)):
        if layer_inputs is not None and len(layer_inputs) >= count:
            chosen = rng.choice(len(layer_inputs), size=count, replace=False)
            z_init = np.array(layer_inputs[chosen], dtype=np.float64)
        else:
            z_init = rng.standard_normal((count, in_dim))
        last = index == len(dims) - 1
        if last:
            mean_function = gpflow.mean_functions.Zero()
        else:  # learned linear mean on intermediate layers, initialised by PCA (Salimbeni)
            projection = _pca_projection(layer_inputs, in_dim, width)
            mean_function = gpflow.mean_functions.Linear(A=projection, b=np.zeros(width))
            if layer_inputs is not None:
                layer_inputs = layer_inputs @ projection
        gp_layer = _gpflux_layer(z_init, width, num_data, mean_function, f"gpflux_{index + 1}")
        if spec.preset == "paper" and spec.kind is not ModelKind.SVGP:
            use_mean_field(gp_layer)  # the paper's deep models: mean-field q(u)
        samples = SAMPLED_DESIGNS.get(spec.design, {}) if spec.kind is ModelKind.DSDGP else {}
        layers.append(
            SigmaPointGPLayer(
                gp_layer,
                rule=rule,
                **({"num_points": spec.num_points} if index == 1 else {}),
                **samples,
                seed=spec.seed + index,
                name=f"gp_layer_{index + 1}",
            )
        )
        in_dim = width
    return layers


def _solve_gp_layer(
    spec: ModelSpec,
    input_dim: int,
    num_data: int,
    units: int,
    sizes: list[int],
    inputs: Optional[np.ndarray],
) -> SolveGPLayer:
    """SOLVE-GP with both sets started at distinct training inputs (random if too few); the
    first set is the same whatever the size of the second."""
    num_inducing, num_orthogonal = sizes
    total = num_inducing + num_orthogonal
    rng = np.random.default_rng(spec.seed)
    if inputs is not None and len(inputs) >= total:
        init = np.array(inputs[rng.permutation(len(inputs))[:total]], np.float64)
    else:
        init = rng.standard_normal((total, input_dim))
    return SolveGPLayer(
        units,
        num_data=num_data,
        num_inducing=num_inducing,
        num_orthogonal=num_orthogonal,
        inducing_inputs=init,
        seed=spec.seed,
        name="gp_layer_1",
    )


def _with_global_last(
    model: AVDGPModel,
    spec: ModelSpec,
    dims: list[int],
    num_inducing: int,
    num_data: int,
    inputs: Optional[np.ndarray],
) -> AVDGPModel:
    """``model`` with its last amortized layer replaced by a GPflux ``GPLayer`` with
    ``num_inducing`` global inducing points (zero mean), started at training inputs mapped
    through the hidden layers' initial identity-like linear means (random if not given)."""
    *hidden, _, likelihood_layer = model.layers
    if not hidden:
        raise ValueError(f"design {spec.design!r}: needs at least two layers")
    rng = np.random.default_rng(spec.seed)
    if inputs is not None and len(inputs) >= num_inducing:
        chosen = np.asarray(inputs)[rng.choice(len(inputs), num_inducing, replace=False)]
        z_init = chosen @ np.eye(chosen.shape[1], dims[-2])  # the hidden means' identity start
    else:
        z_init = rng.standard_normal((num_inducing, dims[-2]))
    gp_layer = _gpflux_layer(
        np.array(z_init, np.float64),
        dims[-1],
        num_data,
        gpflow.mean_functions.Zero(),
        "gpflux_last",
    )
    last = SigmaPointGPLayer(
        gp_layer,
        rule=hidden[-1].rule,
        **({"num_points": spec.num_points} if len(hidden) == 1 else {}),
        seed=spec.seed + len(hidden),
        name=f"gp_layer_{len(hidden) + 1}",
    )
    return AVDGPModel(
        [tf_keras.Input(model.input_shape[1:], dtype=gpflow.default_float())]
        + hidden
        + [last, likelihood_layer],
        name=model.name,
    )


def build_model(
    spec: ModelSpec,
    input_dim: int,
    num_data: int,
    *,
    inputs: Optional[np.ndarray] = None,
) -> BuiltModel:
    """Build ``spec`` for ``input_dim`` features and ``num_data`` training rows.

    :param inputs: ``[N, D]`` training inputs, used to initialise the global inducing points
        and PCA mean functions of ``svgp``/``dsdgp``/``dspp`` (random if not given).
    """
    kind = spec.kind
    task = check_choice("task", spec.task, Task)
    layer_options(spec.preset)  # validates the name for every model
    if kind is ModelKind.AVDGP and spec.rule not in RULES:
        raise ValueError(f"rule: expected one of {list(RULES)}, got {spec.rule!r}")
    input_dim = check_positive_int("input_dim", input_dim)
    num_data = check_positive_int("num_data", num_data)
    dims = spec.resolved_dims()
    inducing = spec.resolved_inducing()
    likelihood = _likelihood(task, dims[-1])
    name = spec.label.replace("-", "_").replace(":", "_")
    objective = "predictive" if kind is ModelKind.DSPP else "elbo"  # DSPP: Jankowiak et al.
    if kind is ModelKind.SOLVE_GP:
        model = tf_keras.Sequential(
            [
                tf_keras.Input((input_dim,), dtype=gpflow.default_float()),
                _solve_gp_layer(spec, input_dim, num_data, dims[-1], inducing, inputs),
                TrainableLikelihood(likelihood, objective=objective, name="likelihood"),
            ],
            name=name,
        )
    elif kind in GLOBAL_INDUCING:
        gp_layers = _global_inducing_layers(spec, input_dim, num_data, dims, inducing, inputs)
        model = tf_keras.Sequential(
            [tf_keras.Input((input_dim,), dtype=gpflow.default_float())]
            + gp_layers
            + [TrainableLikelihood(likelihood, objective=objective, name="likelihood")],
            name=name,
        )
    else:  # AVDGP, SGP-AVI, IDSGP: the package's one builder
        options = {**DESIGNS.get(spec.design, {}), **spec.extra}
        global_last = options.pop("global_last", None)
        model = build_avdgp(
            input_dim,
            dims,
            inducing,
            num_data,
            likelihood,
            rule=spec.rule or "ar2p",
            num_points=spec.num_points,
            preset=spec.preset,
            name=name,
            inference="mlp" if kind is ModelKind.IDSGP else "affine",
            full_rank=kind in SHALLOW,
            seed=spec.seed,
            **options,
        )
        if global_last is not None:
            model = _with_global_last(model, spec, dims, global_last, num_data, inputs)
    loss = AVDGPLoss()  # the model's likelihood and objective (build_avdgp's: its rule's)
    return BuiltModel(model=model, likelihood=likelihood, loss=loss, spec=spec)
