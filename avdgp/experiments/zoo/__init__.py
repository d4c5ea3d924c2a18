"""The models of the paper's experiments: what a model is (:mod:`avdgp.experiments.zoo.spec`), how
it is built (:mod:`avdgp.experiments.zoo.build`), and the SOLVE-GP baseline layer
(:mod:`avdgp.experiments.zoo.solve_gp`)."""

from avdgp.experiments.zoo.build import BuiltModel, build_model
from avdgp.experiments.zoo.spec import (
    DEFAULT_HIDDEN_DIMS,
    DEFAULT_INDUCING,
    DESIGNS,
    GLOBAL_INDUCING,
    RULES,
    SHALLOW,
    ModelKind,
    ModelSpec,
    Task,
    model_label,
    parse_model_name,
    split_design,
)

__all__ = [
    "BuiltModel",
    "DEFAULT_HIDDEN_DIMS",
    "DEFAULT_INDUCING",
    "DESIGNS",
    "GLOBAL_INDUCING",
    "RULES",
    "SHALLOW",
    "ModelKind",
    "ModelSpec",
    "Task",
    "build_model",
    "model_label",
    "parse_model_name",
    "split_design",
]
