"""The models ``avdgp fit`` and the paper's experiments build: what a model is
(:mod:`avdgp.zoo.spec`), how it is built (:mod:`avdgp.zoo.build`), and the SOLVE-GP baseline
layer (:mod:`avdgp.zoo.solve_gp`)."""

from avdgp.zoo.build import BuiltModel, build_model
from avdgp.zoo.spec import (
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
