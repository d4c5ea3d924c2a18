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


def test_dsdgp_s32_trains_on_the_papers_32_samples(rng):
    """``dsdgp:s32``: the paper's S = 32 Monte Carlo training samples in DS-DGP's AR1 layers
    (the default trains on 1, as the paper allows); its own label, so its own cells."""
    from avdgp.zoo import model_label, parse_model_name, split_design

    assert model_label("dsdgp:s32") == "dsdgp:s32"
    assert split_design("dsdgp:s32") == ("dsdgp", "s32")
    assert parse_model_name("dsdgp:s32")[0].value == "dsdgp"
    x = rng.normal(size=(60, 3))
    samples = {}
    for design in (None, "s32"):
        spec = ModelSpec(model="dsdgp", rule=None, design=design, preset="paper")
        layers = [layer for layer in build_model(spec, 3, 60, inputs=x).model.layers]
        samples[design] = [
            layer.num_train_samples for layer in layers if hasattr(layer, "num_train_samples")
        ]
    assert samples[None] == [None, None, None]  # the layers' default: 1 for AR1
    assert samples["s32"] == [32, 32, 32]
    with pytest.raises(ValueError, match=r"expected a design in \['s32'\]"):
        split_design("dsdgp:previous")
