"""What Keras traces converts under AutoGraph without its warning.

A method whose body is only a docstring cannot be converted (AutoGraph strips the docstring and
is left with an empty block): ``MixtureMetric.check_likelihood`` was one, and every
``model.fit`` with ``MixtureNLL`` printed ``AutoGraph could not transform ... Please report
this to the TensorFlow team`` (README's quick-start, 2026-11-26).
"""

from __future__ import annotations

import ast

import pytest
import tensorflow as tf
from helpers import REPO_ROOT

import gpflux_avdgp as ga
from gpflux_avdgp import keras_metrics


def _is_abstract(node: ast.FunctionDef) -> bool:
    return any(
        isinstance(d, ast.Attribute) and d.attr == "abstractmethod" for d in node.decorator_list
    )


def test_no_library_function_is_only_a_docstring():
    found = []
    for path in sorted((REPO_ROOT / "gpflux_avdgp").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            body = node.body
            docstring_only = (
                len(body) == 1
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            )
            if docstring_only and not _is_abstract(node):
                found.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno} {node.name}")
    assert not found


@pytest.mark.parametrize(
    "metric",
    [
        keras_metrics.MixtureMetric,
        ga.MixtureNLL,
        ga.MixtureRMSE,
        ga.MixtureCRPS,
        ga.MixtureAccuracy,
        ga.MixtureBrier,
    ],
)
def test_every_metric_check_converts(metric):
    tf.autograph.to_graph(metric.check_likelihood)  # raised IndentationError for two of them
