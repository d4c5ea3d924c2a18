"""The models of the paper's experiments, all built as ``tf_keras.Sequential`` mixture models.

Every model, ours and the baselines, outputs a packed Gaussian mixture and is trained by the
same harness (``model.fit`` with :class:`~gpflux_avdgp.AVDGPLoss`) and evaluated by the same
metrics, so comparisons differ only in the model:

======== ======================================================================================
name     model
======== ======================================================================================
avdgp    the paper's amortized deep GP (rules AR1 / AR2 / AR2P / AR2PP), affine inference,
         mean-field ``q(u)``, zero mean, isotropic Matern-5/2; dims 16/4/1, M = 8/4/4, S = 32.
sgp-avi  one amortized layer with the paper's affine inference function, full-rank ``q(u)``.
idsgp    one amortized layer with IDSGP's single-MLP inference function, M = 16, full-rank.
svgp     GPflow's SVGP conditional (a GPflux ``GPLayer``), M = 256 global inducing points.
solve-gp SOLVE-GP (:mod:`.solve_gp`): SVGP plus an orthogonal second set, M1 = M2 = 512
         (the paper's), full-rank ``q(u)`` and ``q(v)``.
dsdgp    doubly stochastic deep GP: GPflux ``GPLayer`` layers with 256/128/128 inducing points,
         learned linear mean functions on the intermediate layers, one sample per datapoint in
         training and S = 32 at test time (AR1 sampling between layers).
dspp     deep sigma point process: the same GPflux layers with learned sigma points (AR2P)
         and the predictive objective.
======== ======================================================================================

Under ``preset="paper"`` the deep baselines (DS-DGP, DSPP) use mean-field ``q(u)`` (a
diagonal ``q_sqrt`` per output, as the paper's appendix states for deep models); shallow models
are full-rank under both presets.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Optional, Sequence

import gpflow
import gpflux
import numpy as np
from gpflow.keras import tf_keras

from gpflux_avdgp.layers import SigmaPointGPLayer, TrainableLikelihood
from gpflux_avdgp.layers.gpflux_config import use_mean_field
from gpflux_avdgp.models import AVDGPModel, build_avdgp
from gpflux_avdgp.objectives import AVDGPLoss
from gpflux_avdgp.presets import layer_options
from gpflux_avdgp.rules import ModelRule
from gpflux_avdgp.validation import check_choice, check_nonnegative_int, check_positive_int

from .solve_gp import PAPER_INDUCING, SolveGPLayer

__all__ = [
    "BuiltModel",
    "ModelKind",
    "ModelSpec",
    "Task",
    "build_model",
    "model_label",
    "parse_model_name",
]


class ModelKind(str, enum.Enum):
    """The model families of the experiments (see the module docstring)."""

    AVDGP = "avdgp"
    SGP_AVI = "sgp-avi"
    IDSGP = "idsgp"
    SVGP = "svgp"
    SOLVE_GP = "solve-gp"
    DSDGP = "dsdgp"
    DSPP = "dspp"


class Task(str, enum.Enum):
    """Regression (Gaussian likelihood) or classification: 2 classes by a Bernoulli likelihood
    (probit link) on one output, ``K > 2`` by GPflow's ``MultiClass`` (RobustMax) on ``K``."""

    REGRESSION = "regression"
    CLASSIFICATION = "classification"


RULES = tuple(rule.value for rule in ModelRule)
SHALLOW = (ModelKind.SGP_AVI, ModelKind.IDSGP, ModelKind.SVGP, ModelKind.SOLVE_GP)
GLOBAL_INDUCING = (ModelKind.SVGP, ModelKind.DSDGP, ModelKind.DSPP)

#: Paper defaults: inducing points of the first layer and of later layers, per family.
DEFAULT_INDUCING = {
    ModelKind.AVDGP: (8, 4),
    ModelKind.SGP_AVI: (16, 16),
    ModelKind.IDSGP: (16, 16),
    ModelKind.SVGP: (256, 256),
    ModelKind.SOLVE_GP: PAPER_INDUCING,  # (M1, M2) of its one layer
    ModelKind.DSDGP: (256, 128),
    ModelKind.DSPP: (256, 128),
}
#: Paper's intermediate widths for 3-layer regression models.
DEFAULT_HIDDEN_DIMS = (16, 4)


#: Designs of the amortized layers measured against the default, named after a colon
#: (``avdgp-ar2p:previous``): layer options on top of the preset's (``docs/uncertainty.md``).
DESIGNS = {
    # the paper's layers (the default before prior reversion): unwhitened, zero hidden means
    "previous": {"whiten": False, "num_anchors": 0, "hidden_mean_function": None},
    "reverting-128": {"num_anchors": 128},  # 128 anchors instead of 32
    "anchors-only": {"hidden_mean_function": None},  # zero hidden means
    # linear hidden means without prior reversion
    "linear-hidden": {"whiten": False, "num_anchors": 0},
    # the default's hidden layers, then a GPflux GPLayer with 32 global inducing points last
    "global-last": {"global_last": 32},
    # the same without prior reversion in the amortized hidden layers
    "linear-hidden-global-last": {"whiten": False, "num_anchors": 0, "global_last": 32},
}


def split_design(name: str) -> tuple[str, Optional[str]]:
    """``"avdgp-ar2p:previous"`` -> ``("avdgp-ar2p", "previous")``; no colon: design ``None``.

    :raises ValueError: for an unknown design, or a design of a model without amortized layers.
    """
    base, _, design = name.strip().lower().partition(":")
    if not design:
        return base, None
    if design not in DESIGNS:
        raise ValueError(f"model {name!r}: expected a design in {sorted(DESIGNS)}, got {design!r}")
    if not base.startswith(("avdgp", "sgp-avi", "idsgp")):
        raise ValueError(f"model {name!r}: designs apply to amortized models only")
    return base, design


def parse_model_name(name: str) -> tuple[ModelKind, Optional[str]]:
    """``"avdgp-ar2pp"`` -> ``(AVDGP, "ar2pp")``; ``"dspp"`` -> ``(DSPP, None)``; a design
    after a colon is checked and dropped (:func:`split_design`)."""
    text, _ = split_design(name)
    for rule in RULES:
        if text == f"avdgp-{rule}":
            return ModelKind.AVDGP, rule
    kind = check_choice("model", text, ModelKind)
    return kind, ("ar2p" if kind is ModelKind.AVDGP else None)


def model_label(name: str) -> str:
    """The canonical table name of a model name: ``"avdgp"`` -> ``"avdgp-ar2p"``."""
    kind, rule = parse_model_name(name)
    return ModelSpec(model=kind.value, rule=rule, design=split_design(name)[1]).label


@dataclass(frozen=True)
class ModelSpec:
    """What to build; every field has the paper's default.

    :param model: a :class:`ModelKind` name.
    :param rule: amortization rule of ``avdgp`` (``ar1``, ``ar2``, ``ar2p``, ``ar2pp``).
    :param task: ``"regression"`` or ``"classification"``.
    :param num_classes: classes ``K`` of a classification task (2: Bernoulli on one output;
        more: ``MultiClass`` with ``RobustMax`` on ``K`` outputs); ignored for regression.
    :param num_layers: GP layers of the deep models (shallow models have one).
    :param hidden_dims: widths of the intermediate layers (``num_layers - 1`` of them);
        default ``16, 4`` for three layers, else 16 then 4s.
    :param num_inducing: inducing points per layer (one value for all, or one per layer);
        default from :data:`DEFAULT_INDUCING`. For ``solve-gp``: ``M1, M2`` (one value: both).
    :param num_points: ``S``, sigma points or test-time samples (paper: 32).
    :param seed: seeds initialisers, sigma points and Monte Carlo draws.
    :param preset: ``"default"`` or ``"paper"``: the layer options of
        :func:`gpflux_avdgp.presets.layer_options` (amortized models; ``extra`` overrides them).
    :param design: a name in :data:`DESIGNS` (amortized models), or ``None``.
    """

    model: str = "avdgp"
    rule: Optional[str] = "ar2p"
    task: str = "regression"
    num_classes: int = 2
    num_layers: int = 3
    hidden_dims: Optional[Sequence[int]] = None
    num_inducing: Optional[Sequence[int]] = None
    num_points: int = 32
    seed: int = 0
    extra: dict = field(default_factory=dict)
    preset: str = "default"
    design: Optional[str] = None

    @property
    def kind(self) -> ModelKind:
        return check_choice("model", self.model, ModelKind)

    @property
    def label(self) -> str:
        """``avdgp-ar2p``, ``dsdgp``, ... as used in tables."""
        label = f"avdgp-{self.rule}" if self.kind is ModelKind.AVDGP else self.kind.value
        return label if self.design is None else f"{label}:{self.design}"

    def output_dim(self) -> int:
        """Width of the last layer: ``K`` for ``K > 2`` classes, else 1."""
        if check_choice("task", self.task, Task) is Task.REGRESSION:
            return 1
        num_classes = check_positive_int("num_classes", self.num_classes)
        if num_classes < 2:
            raise ValueError(f"num_classes: expected 2 or more classes, got {num_classes}")
        return 1 if num_classes == 2 else num_classes

    def resolved_layers(self) -> int:
        return 1 if self.kind in SHALLOW else check_positive_int("num_layers", self.num_layers)

    def resolved_dims(self) -> list[int]:
        """Output widths of all layers, e.g. ``[16, 4, 1]`` (the last is :meth:`output_dim`)."""
        output_dim = self.output_dim()
        layers = self.resolved_layers()
        if layers == 1:
            if self.kind not in SHALLOW and self.hidden_dims:
                raise ValueError(
                    f"hidden_dims: a 1-layer model has no intermediate layers, got "
                    f"{list(self.hidden_dims)}"
                )
            return [output_dim]
        hidden = self.hidden_dims
        if hidden is None:
            hidden = DEFAULT_HIDDEN_DIMS if layers == 3 else (16,) + (4,) * (layers - 2)
        hidden = [check_positive_int("hidden_dims", h) for h in hidden]
        if len(hidden) != layers - 1:
            raise ValueError(
                f"hidden_dims: expected {layers - 1} widths for {layers} layers, got {hidden}"
            )
        return hidden + [output_dim]

    def resolved_inducing(self) -> list[int]:
        """Inducing points per layer (for ``solve-gp``: ``[M1, M2]`` of its one layer)."""
        layers = self.resolved_layers()
        if self.kind is ModelKind.SOLVE_GP:
            if self.num_inducing is None:
                return list(PAPER_INDUCING)
            values = list(self.num_inducing)
            if len(values) not in (1, 2):
                raise ValueError(f"num_inducing: expected M1 or M1,M2 for solve-gp, got {values}")
            first = check_positive_int("num_inducing", values[0])
            second = check_nonnegative_int("num_inducing", values[-1])  # M2 = 0: SVGP
            return [first, second]
        if self.num_inducing is None:
            first, rest = DEFAULT_INDUCING[self.kind]
            return [first] + [rest] * (layers - 1)
        values = [check_positive_int("num_inducing", m) for m in self.num_inducing]
        if len(values) == 1:
            return values * layers
        if len(values) != layers:
            raise ValueError(
                f"num_inducing: expected 1 or {layers} values (one per layer), got {values}"
            )
        return values


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
        layers.append(
            SigmaPointGPLayer(
                gp_layer,
                rule=rule,
                **({"num_points": spec.num_points} if index == 1 else {}),
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
