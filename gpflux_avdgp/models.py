"""Convenience constructor for the paper's AVDGP as a ``tf_keras.Sequential``."""

from __future__ import annotations

from typing import Optional, Sequence, Union

import gpflow
import numpy as np
from gpflow.keras import tf_keras

from .layers import AmortizedGPLayer, TrainableLikelihood
from .presets import layer_options
from .propagation import layer_rule_and_objective
from .validation import check_positive_int

__all__ = ["build_avdgp"]


def build_avdgp(
    input_dim: int,
    units: Sequence[int],
    num_inducing: Union[int, Sequence[int]],
    num_data: int,
    likelihood: gpflow.likelihoods.Likelihood,
    *,
    rule: str = "ar2p",
    num_points: Optional[int] = None,
    preset: str = "default",
    **layer_kwargs,
) -> tf_keras.Sequential:
    """An ``Input`` then one :class:`AmortizedGPLayer` per entry of ``units``, then a
    :class:`TrainableLikelihood`.

    :param input_dim: ``D``, input features.
    :param units: output dimension of each layer, e.g. ``[16, 4, 1]`` (the paper's regression).
    :param num_inducing: ``M`` per layer, or one for all (paper: ``[8, 4, 4]``).
    :param num_data: ``N``, training set size.
    :param likelihood: GPflow likelihood; pass the same object to ``AVDGPLoss``.
    :param rule: ``"ar1"``, ``"ar2"``, ``"ar2p"`` (default) or ``"ar2pp"`` (AR2P layers; train
        with ``AVDGPLoss(likelihood, objective="predictive")``).
    :param num_points: ``S`` (default 32, AR1: 1 for training).
    :param preset: ``"default"`` or ``"paper"``: layer options from
        :func:`gpflux_avdgp.presets.layer_options` (the paper: inducing points start as noisy
        copies of the input, ``inducing_init="input"``); ``layer_kwargs`` override them.
    :param layer_kwargs: passed to every :class:`AmortizedGPLayer` (e.g. ``whiten``,
        ``full_rank``, ``kernel``, ``mean_function``, ``kl_convention``, ``seed``).
    """
    input_dim = check_positive_int("input_dim", input_dim)
    if np.ndim(units) != 1:
        raise ValueError(f"units: expected a list of output dimensions, got {units!r}")
    units = list(units)
    if not units:
        raise ValueError("units: expected at least one layer, got []")
    if np.ndim(num_inducing) == 0:
        num_inducing = [num_inducing] * len(units)  # each layer validates it
    num_inducing = list(num_inducing)
    if len(num_inducing) != len(units):
        raise ValueError(
            f"num_inducing: expected {len(units)} values (one per layer), got {len(num_inducing)}"
        )
    layer_rule, _ = layer_rule_and_objective(rule)
    layer_kwargs = {**layer_options(preset), **layer_kwargs}
    seed = layer_kwargs.pop("seed", None)
    layers: list[tf_keras.layers.Layer] = [
        tf_keras.Input((input_dim,), dtype=gpflow.default_float())
    ]
    for index, (width, inducing) in enumerate(zip(units, num_inducing)):
        layers.append(
            AmortizedGPLayer(
                width,
                inducing,
                num_data,
                rule=layer_rule,
                num_points=num_points if index == 1 else None,
                seed=None if seed is None else seed + index,
                name=f"gp_layer_{index + 1}",
                **layer_kwargs,
            )
        )
    layers.append(TrainableLikelihood(likelihood, name="likelihood"))
    return tf_keras.Sequential(layers, name="avdgp")
