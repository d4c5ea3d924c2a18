"""``build_avdgp``, the one AVDGP builder: what ``num_points`` and ``num_train_samples`` mean
per rule (that the application's zoo builds with it: ``tests/application/zoo/test_build.py``)."""

from __future__ import annotations

import gpflow
import pytest

from gpflux_avdgp import build_avdgp


def _second_layer(model):
    return model.get_layer("gp_layer_2")


@pytest.mark.parametrize(
    "rule, train_samples, expected",
    [
        ("ar1", None, (1, 8)),  # the paper: one sample in training, S at prediction
        ("ar1", 4, (4, 8)),
        ("ar2", None, (8, 8)),
        ("ar2", 2, (2, 8)),
        ("ar2p", None, (8, 8)),  # sigma points: the same S in training and prediction
        ("ar2pp", None, (8, 8)),
    ],
)
def test_num_points_is_s_and_ar1_trains_on_one_sample(rule, train_samples, expected):
    model = build_avdgp(
        2, [3, 1], 4, 50, gpflow.likelihoods.Gaussian(), rule=rule, num_points=8,
        num_train_samples=train_samples,
    )  # fmt: skip
    layer = _second_layer(model)
    # the layer's words mean what the builder's mean
    assert (layer.num_points, layer.num_train_samples) == (8, train_samples)
    components = (layer._resolved_num_points(training=True), layer._resolved_num_points(False))
    assert components == expected
    assert model.get_layer("gp_layer_1").num_points is None  # the first layer: one component


def test_sigma_points_have_no_training_samples():
    with pytest.raises(ValueError, match="^num_train_samples: rule 'ar2p' has no samples"):
        build_avdgp(2, [3, 1], 4, 50, gpflow.likelihoods.Gaussian(), num_train_samples=2)
