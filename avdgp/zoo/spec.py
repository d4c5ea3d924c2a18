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
solve-gp SOLVE-GP (``zoo/solve_gp.py``): SVGP plus an orthogonal second set, M1 = M2 = 512
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

from avdgp.zoo.solve_gp import PAPER_INDUCING
from gpflux_avdgp.checks import check_choice, check_nonnegative_int, check_positive_int
from gpflux_avdgp.rules import ModelRule

__all__ = [
    "ModelKind",
    "ModelSpec",
    "Task",
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


#: The designs measured before the reach gate was the default keep the layers they had.
BEFORE_REACH = {"reach_gate": None}

#: The paper's layers (the default before prior reversion): unwhitened, zero hidden means.
PAPER_LAYERS = {"whiten": False, "num_anchors": 0, "hidden_mean_function": None}

#: Designs of the amortized layers measured against the default, named after a colon
#: (``avdgp-ar2p:previous``): layer options on top of the preset's (``docs/uncertainty.md``).
DESIGNS = {
    "previous": PAPER_LAYERS,
    "reverting-128": {"num_anchors": 128, **BEFORE_REACH},  # 128 anchors instead of 32
    "anchors-only": {"hidden_mean_function": None, **BEFORE_REACH},  # zero hidden means
    # linear hidden means without prior reversion
    "linear-hidden": {"whiten": False, "num_anchors": 0},
    # the default's hidden layers, then a GPflux GPLayer with 32 global inducing points last
    "global-last": {"global_last": 32, **BEFORE_REACH},
    # fixed identity hidden means (DS-DGP's: distances kept)
    "identity-hidden": {"hidden_mean_function": "identity", **BEFORE_REACH},
    # the same without prior reversion in the amortized hidden layers
    "linear-hidden-global-last": {"whiten": False, "num_anchors": 0, "global_last": 32},
    # the default before the reach gate (reversion where a row is farther from the anchors
    # than the training rows are), and the gate with identity hidden means
    "no-reach": BEFORE_REACH,
    "identity-reach": {"hidden_mean_function": "identity", "reach_gate": 1.0},
    # the identity in the first hidden layer only (x's distances kept), the second's trained
    "identity-first": {"hidden_mean_function": ("identity", "linear")},
    # the default with a defensive mixture off the data (an SVGP on x, gated by anchors on x,
    # by the training rows' range along each input and by the SVGP's variance); the same with a
    # 64- or 256-point SVGP; trained one step in four (or in 1000: its cost when skipped); with its
    # kernel fixed at GPflow's defaults; with a mean-field q(u); without the range gate; gated
    # by the anchors alone; the paper's layers with the guard
    "guard": {"guard": True},
    "guard-64": {"guard": {"num_inducing": 64}},
    "guard-256": {"guard": {"num_inducing": 256}},
    "guard-every-4": {"guard": {"train_every": 4}},
    "guard-every-1000": {"guard": {"train_every": 1000}},
    "guard-fixed-kernel": {"guard": {"train_kernel": False}},
    "guard-mean-field": {"guard": {"mean_field": True}},
    "guard-no-range": {"guard": {"range_gate": False}},
    "guard-reach": {"guard": {"variance_gate": False, "range_gate": False}},
    "previous-guard": {**PAPER_LAYERS, "guard": True},
}
#: Designs of DS-DGP (``dsdgp:s32``): its AR1 layers' Monte Carlo training samples, the
#: paper's S = 32 in place of the default 1 (issue 72: its cost and what it changes).
SAMPLED_DESIGNS = {"s32": {"num_train_samples": 32}}


def split_design(name: str) -> tuple[str, Optional[str]]:
    """``"avdgp-ar2p:previous"`` -> ``("avdgp-ar2p", "previous")``; no colon: design ``None``.

    :raises ValueError: for an unknown design, or a design of a model without amortized layers.
    """
    base, _, design = name.strip().lower().partition(":")
    if not design:
        return base, None
    if base == "dsdgp":
        if design not in SAMPLED_DESIGNS:
            raise ValueError(
                f"model {name!r}: expected a design in {sorted(SAMPLED_DESIGNS)}, got {design!r}"
            )
        return base, design
    if design not in DESIGNS:
        raise ValueError(f"model {name!r}: expected a design in {sorted(DESIGNS)}, got {design!r}")
    if not base.startswith(("avdgp", "sgp-avi", "idsgp")):
        raise ValueError(f"model {name!r}: designs apply to amortized models and dsdgp only")
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

    def __post_init__(self) -> None:
        """Check the sizes and resolve them once (:meth:`resolved_layers`,
        :meth:`resolved_dims`, :meth:`resolved_inducing`): a spec that exists is buildable in
        its sizes, and every reader sees the same values."""
        layers = 1 if self.kind in SHALLOW else check_positive_int("num_layers", self.num_layers)
        object.__setattr__(self, "_layers", layers)
        object.__setattr__(self, "_dims", tuple(self._dims_of(layers)))
        object.__setattr__(self, "_inducing", tuple(self._inducing_of(layers)))

    def resolved_layers(self) -> int:
        """GP layers (shallow models: 1)."""
        return self._layers

    def resolved_dims(self) -> list[int]:
        """Output widths of all layers, e.g. ``[16, 4, 1]`` (the last is :meth:`output_dim`)."""
        return list(self._dims)

    def resolved_inducing(self) -> list[int]:
        """Inducing points per layer (for ``solve-gp``: ``[M1, M2]`` of its one layer)."""
        return list(self._inducing)

    def _dims_of(self, layers: int) -> list[int]:
        output_dim = self.output_dim()
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

    def _inducing_of(self, layers: int) -> list[int]:
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
