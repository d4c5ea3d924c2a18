"""The one AVDGP builder: the paper's model (and its shallow relatives SGP-AVI and IDSGP, via
``layer_kwargs``) as an ``AVDGPModel`` (a ``tf_keras.Sequential``); the experiments' model
zoo builds with it too."""

from __future__ import annotations

from typing import Optional, Sequence, Union

import gpflow
import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from ..checks import check_choice, check_nonnegative_int, check_positive_int
from ..kernels import MeanFunctionArg
from ..layers import AmortizedGPLayer, InputGuard, TrainableLikelihood
from ..layers.input_guard import guard_gp_layer
from ..presets import hidden_mean_function as preset_hidden_mean_function
from ..presets import layer_options
from ..rules import ModelRule
from .avdgp_model import AVDGPModel

__all__ = ["build_avdgp"]

#: Anchors and inducing points of ``build_avdgp(guard=True)``'s guard (``docs/design.md``: 128
#: inducing points guard the gaps as well as 256, 64 do not).
GUARD_SIZE = 128


def build_avdgp(
    input_dim: int,
    units: Sequence[int],
    num_inducing: Union[int, Sequence[int]],
    num_data: int,
    likelihood: gpflow.likelihoods.Likelihood,
    *,
    rule: str | ModelRule = ModelRule.AR2P,
    num_points: Optional[int] = None,
    num_train_samples: Optional[int] = None,
    preset: str = "default",
    hidden_mean_function: MeanFunctionArg | str = "preset",
    guard: bool | dict = False,
    name: str = "avdgp",
    **layer_kwargs,
) -> AVDGPModel:
    """An :class:`~gpflux_avdgp.AVDGPModel`: an ``Input`` then one :class:`AmortizedGPLayer` per
    entry of ``units``, then a :class:`TrainableLikelihood`.

    :param input_dim: ``D``, input features.
    :param units: output dimension of each layer, e.g. ``[16, 4, 1]`` (the paper's regression).
    :param num_inducing: ``M`` per layer, or one for all (paper: ``[8, 4, 4]``).
    :param num_data: ``N``, training set size.
    :param likelihood: GPflow likelihood, held by the model's last layer.
    :param rule: a :class:`~gpflux_avdgp.rules.ModelRule` or its name: ``"ar1"``, ``"ar2"``,
        ``"ar2p"`` (default) or ``"ar2pp"`` (AR2P layers and the predictive objective, which
        the model's :class:`TrainableLikelihood` holds: ``compile`` trains it).
    :param num_points: ``S``, components of every mixture after the first layer: AR2P's sigma
        points (training and prediction), the Monte Carlo samples of AR1/AR2 at prediction
        (default 32, the paper's); the second layer's ``num_points``.
    :param num_train_samples: Monte Carlo samples per datapoint in training, AR1/AR2 only;
        default 1 for AR1 (the paper: "S can be as small as 1 when we train with stochastic
        gradient optimizers"), ``S`` for AR2. AR2P has no samples.
    :param guard: give the model an :class:`~gpflux_avdgp.layers.input_guard.InputGuard`: 128
        fixed anchors on ``x`` and a 128-point SVGP on ``x`` with its own copy of
        ``likelihood``, taking up to 80 % of the prediction where ``x`` is beyond the
        anchors' reach, beyond the training rows' range along any input, or where the SVGP's
        variance is beyond its training rows' (gaps, holes and shifts the hidden layers fold
        back onto the data); a dict: ``InputGuard``'s options (``num_anchors``, ``keep``,
        ``scale``, ``variance_gate``, ``range_gate``), ``num_inducing``, ``train_kernel``
        and ``mean_field`` (:func:`~gpflux_avdgp.layers.input_guard.guard_gp_layer`).
    :param name: the model's name.
    :param preset: ``"default"`` or ``"paper"``: layer options from
        :func:`gpflux_avdgp.presets.layer_options` (the paper: inducing points start as noisy
        copies of the input, ``inducing_init="input"``); ``layer_kwargs`` override them.
    :param hidden_mean_function: mean function of every layer but the last, or a sequence
        with one per hidden layer (e.g. ``("identity", "linear")``): ``"preset"`` (default)
        takes :func:`gpflux_avdgp.presets.hidden_mean_function` (``"linear"``, none under
        ``preset="paper"``) unless ``layer_kwargs`` has a ``mean_function``; ``None`` uses the
        ``mean_function`` of ``layer_kwargs`` for every layer. A linear mean keeps an input far
        from the data far for the next layer instead of letting it fall onto the zero prior
        mean, which prior reversion (``num_anchors``) needs to reach the output; a fixed
        ``"identity"`` also keeps its distances (``docs/uncertainty.md``).
    :param layer_kwargs: passed to every :class:`AmortizedGPLayer` (e.g. ``whiten``,
        ``full_rank``, ``kernel``, ``mean_function``, ``kl_convention``, ``seed``); a GPflow
        kernel or mean-function object is copied for every layer after the first, so each
        layer trains its own (as with a name).
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
    rule = check_choice("rule", rule, ModelRule)
    layer_rule = rule.layer_rule
    expansion = {"num_points": num_points, "num_train_samples": num_train_samples}
    if isinstance(hidden_mean_function, str) and hidden_mean_function == "preset":
        given = "mean_function" in layer_kwargs
        hidden_mean_function = None if given else preset_hidden_mean_function(preset)
    user_kwargs = layer_kwargs
    layer_kwargs = {**layer_options(preset), **layer_kwargs}
    if not layer_kwargs.get("num_anchors") and "reach_gate" not in user_kwargs:
        layer_kwargs.pop("reach_gate", None)  # the preset's gate needs the anchors given away
    seed = layer_kwargs.pop("seed", None)
    if seed is not None:
        seed = check_nonnegative_int("seed", seed)
    layers: list[tf_keras.layers.Layer] = [
        tf_keras.Input((input_dim,), dtype=gpflow.default_float())
    ]
    if isinstance(hidden_mean_function, (tuple, list)):
        if len(hidden_mean_function) != len(units) - 1:
            raise ValueError(
                f"hidden_mean_function: expected one per hidden layer ({len(units) - 1}), "
                f"got {len(hidden_mean_function)}"
            )
    else:
        hidden_mean_function = [hidden_mean_function] * (len(units) - 1)
    for index, (width, inducing) in enumerate(zip(units, num_inducing)):
        layers.append(
            AmortizedGPLayer(
                width,
                inducing,
                num_data,
                rule=layer_rule,
                **(expansion if index == 1 else {}),
                seed=None if seed is None else seed + index,
                name=f"gp_layer_{index + 1}",
                **_own_modules(
                    _layer_kwargs(layer_kwargs, hidden_mean_function, index), copy=index > 0
                ),
            )
        )
    layers.append(TrainableLikelihood(likelihood, objective=rule.objective, name="likelihood"))
    input_guard = None
    if guard:
        options = {"num_anchors": GUARD_SIZE, **(guard if isinstance(guard, dict) else {})}
        input_guard = InputGuard(
            guard_gp_layer(
                input_dim,
                units[-1],
                options.pop("num_inducing", GUARD_SIZE),
                num_data,
                train_kernel=options.pop("train_kernel", True),
                mean_field=options.pop("mean_field", False),
            ),
            gpflow.utilities.deepcopy(likelihood),
            input_dim=input_dim,
            name="guard",
            **options,
        )
    return AVDGPModel(layers, name=name, guard=input_guard)


def _layer_kwargs(layer_kwargs: dict, hidden_mean_functions: Sequence, index: int) -> dict:
    """``layer_kwargs`` of layer ``index``: a hidden layer's mean function is its entry of
    ``hidden_mean_functions`` (one per hidden layer) when that is given."""
    hidden = index < len(hidden_mean_functions)
    if hidden and hidden_mean_functions[index] is not None:
        return {**layer_kwargs, "mean_function": hidden_mean_functions[index]}
    return layer_kwargs


def _own_modules(layer_kwargs: dict, *, copy: bool) -> dict:
    """``layer_kwargs`` with copies of GPflow kernel and mean-function objects (``copy``), so
    every layer starts from the given values and trains its own, as with a name."""
    if not copy:
        return layer_kwargs
    return {
        key: gpflow.utilities.deepcopy(value) if isinstance(value, tf.Module) else value
        for key, value in layer_kwargs.items()
    }
