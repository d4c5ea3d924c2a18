"""The zoo builds its amortized models with the library's one builder, ``build_avdgp``."""

from __future__ import annotations

import gpflow
import pytest

from avdgp.zoo import ModelSpec, build_model
from gpflux_avdgp import build_avdgp


@pytest.mark.parametrize("rule", ["ar1", "ar2", "ar2p", "ar2pp"])
def test_zoo_builds_avdgp_with_the_builder(rule):
    spec = ModelSpec(rule=rule, num_layers=2, hidden_dims=[3], num_inducing=[4], num_points=8)
    zoo_model = build_model(spec, 2, 50).model
    direct = build_avdgp(
        2, [3, 1], 4, 50, gpflow.likelihoods.Gaussian(variance=0.1), rule=rule, num_points=8,
        name=zoo_model.name, seed=0, full_rank=False, inference="affine",
    )  # fmt: skip
    configs = [[layer.get_config() for layer in model.layers] for model in (zoo_model, direct)]
    assert configs[0] == configs[1]
