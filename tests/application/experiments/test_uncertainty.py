"""``avdgp uncertainty``'s pieces that need no training: the shift split, the interval scores,
the resumable result file, the report, and design names."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from avdgp.experiments.uncertainty.report import summarise_uncertainty
from avdgp.experiments.uncertainty.run import (
    CALIBRATION_LEVELS,
    append_result,
    interval_scores,
    one_d_split,
    read_rows,
    shift_split,
)
from avdgp.zoo import DESIGNS, ModelSpec, build_model, model_label, split_design
from gpflux_avdgp import SigmaPointGPLayer


def test_shift_split_trains_below_the_quantile_and_tests_above(rng):
    x = rng.normal(size=(200, 3))
    y = rng.normal(size=(200, 1))
    split, x_shift, y_shift = shift_split(x, y, column=1, quantile=0.8, seed=0)
    cut = np.quantile(x[:, 1], 0.8)
    inside = np.concatenate([split.x_train, split.x_val, split.x_test])
    assert (inside[:, 1] <= cut).all() and (x_shift[:, 1] > cut).all()
    assert len(inside) + len(x_shift) == 200 and len(x_shift) == 40
    assert (len(split.x_test), len(split.x_val), len(split.x_train)) == (16, 16, 128)
    rows = {tuple(r) for r in np.concatenate([inside, x_shift])}
    assert len(rows) == 200, "every row is used once"
    np.testing.assert_array_equal(y_shift[:, 0], y[x[:, 1] > cut, 0])


def test_shift_split_refuses_a_cut_with_an_empty_side():
    x = np.ones((10, 2))
    with pytest.raises(ValueError, match="leaves no rows on one side"):
        shift_split(x, np.zeros((10, 1)), column=0, quantile=0.8, seed=0)


def test_interval_scores_of_one_gaussian_match_scipy(rng):
    y = rng.normal(size=400)
    means, variances = rng.normal(size=(400, 1)), np.full((400, 1), 2.0)
    scores = interval_scores(y, np.ones((400, 1)), means, variances, "in")
    z = (y - means[:, 0]) / np.sqrt(2.0)
    assert scores["nll_in"] == pytest.approx(-np.mean(stats.norm.logpdf(y, means[:, 0], 2**0.5)))
    assert scores["mean_std_in"] == pytest.approx(np.sqrt(2.0))
    for level in (0.5, 0.9, 0.95):
        inside = np.abs(z) <= stats.norm.ppf(0.5 + level / 2)
        assert scores[f"coverage_{round(100 * level)}_in"] == pytest.approx(np.mean(inside))
    expected = np.mean(
        [
            abs(np.mean(np.abs(z) <= stats.norm.ppf(0.5 + level / 2)) - level)
            for level in CALIBRATION_LEVELS
        ]
    )
    assert scores["miscalibration_in"] == pytest.approx(expected)
    histogram = json.loads(scores["pit_in"])
    assert sum(histogram) == 400 and len(histogram) == 10


def test_one_d_problems_leave_the_gap_and_the_far_field_empty():
    far, gap = one_d_split("far", 0), one_d_split("gap", 0)
    assert np.abs(far.x_train).max() <= 2.0 and len(far.x_train) == 1000
    assert (np.abs(gap.x_train) >= 0.5).all() and (np.abs(gap.x_test) >= 0.5).all()


def test_results_are_appended_and_a_new_column_rewrites_the_header(tmp_path):
    path = tmp_path / "uncertainty.csv"
    append_result(path, {"problem": "far", "model": "svgp", "a": 1})
    append_result(path, {"problem": "far", "model": "dspp", "a": 2})
    append_result(path, {"problem": "concrete", "model": "svgp", "b": 3})
    rows = read_rows(path)
    assert [row["model"] for row in rows] == ["svgp", "dspp", "svgp"]
    assert rows[0]["b"] == "" and rows[2]["b"] == "3" and rows[2]["a"] == ""


def test_the_report_shows_mean_and_spread_and_draws_the_reliability(tmp_path):
    base = {"problem": "concrete", "status": "ok", "epochs": 1, "preset": "default"}
    for seed, value in enumerate((0.5, 0.7)):
        row = {**base, "model": "avdgp-ar2p", "seed": seed}
        for suffix in ("in", "shift"):
            for key in ("nll", "rmse", "mean_std", "miscalibration"):
                row[f"{key}_{suffix}"] = value
            for level in CALIBRATION_LEVELS + (0.5, 0.9, 0.95):
                row[f"coverage_{round(100 * level)}_{suffix}"] = level
        append_result(tmp_path / "uncertainty.csv", row)
    text = summarise_uncertainty(tmp_path, ["avdgp-ar2p", "svgp"]).read_text()
    row = "| AVDGP-AR2P, the default (`avdgp-ar2p`) | 2 | 0.600 ± 0.141 / 0.600 ± 0.141 |"
    assert row in text
    assert "svgp" not in text.lower(), "models without rows are not shown"
    assert "![concrete](reliability_concrete.png)\n\n*concrete: the fraction of test" in text
    assert (tmp_path / "reliability_concrete.png").stat().st_size > 0


def test_figures_and_tables_name_models_as_the_documentation_does():
    from avdgp.experiments.uncertainty.report import prose_name

    names = {
        "avdgp-ar2p": "AVDGP-AR2P, the default",
        "avdgp-ar2pp:previous": "AVDGP-AR2PP, the paper's layers",
        "avdgp-ar2p:global-last": "AVDGP-AR2P :global-last",
        "dsdgp": "GPflux DS-DGP",
        "svgp": "SVGP",
        "something-else": "something-else",
    }
    assert {label: prose_name(label) for label in names} == names


def test_design_names():
    assert split_design("avdgp-ar2p:previous") == ("avdgp-ar2p", "previous")
    assert model_label("avdgp:previous") == "avdgp-ar2p:previous"
    assert set(DESIGNS) == {
        "previous",
        "reverting-128",
        "anchors-only",
        "linear-hidden",
        "global-last",
        "linear-hidden-global-last",
        "identity-hidden",
        "no-reach",
        "identity-reach",
        "identity-first",
        "guard",
        "guard-64",
        "guard-256",
        "guard-every-4",
        "guard-every-1000",
        "guard-fixed-kernel",
        "guard-mean-field",
        "guard-no-range",
        "guard-reach",
        "previous-guard",
    }
    with pytest.raises(ValueError, match="expected a design in"):
        split_design("avdgp-ar2p:fast")
    with pytest.raises(ValueError, match="designs apply to amortized models and dsdgp only"):
        split_design("svgp:previous")


@pytest.mark.parametrize(
    "design, gates",
    [
        ("guard", (True, True, 128)),
        pytest.param("guard-64", (True, True, 64), marks=pytest.mark.slow),
        pytest.param("guard-256", (True, True, 256), marks=pytest.mark.slow),
        pytest.param("guard-no-range", (True, False, 128), marks=pytest.mark.slow),
        pytest.param("guard-reach", (False, False, 128), marks=pytest.mark.slow),
    ],
)
def test_guard_designs_set_the_guard_s_gates(design, gates):
    spec = ModelSpec(design=design, num_points=4)
    inputs = np.random.default_rng(0).normal(size=(100, 3))
    guard = build_model(spec, 3, 100, inputs=inputs).model.guard
    inducing = guard.svgp.inducing_variable.inducing_variable.Z.shape[0]
    assert (guard.variance_gate, guard.range_gate, inducing) == gates


def _gp_layers(design):
    spec = ModelSpec(design=design, num_points=4)
    model = build_model(spec, 3, 100, inputs=np.random.default_rng(0).normal(size=(100, 3)))
    return model.model.layers[:-1]


def test_the_default_reverts_and_previous_is_the_papers_layers():
    default, previous = _gp_layers(None), _gp_layers("previous")
    assert [(layer.num_anchors, layer.whiten) for layer in default] == [(32, True)] * 3
    assert [type(layer.mean_function).__name__ for layer in default] == ["Linear"] * 2 + [
        "NoneType"
    ]
    assert [(layer.num_anchors, layer.whiten) for layer in previous] == [(0, False)] * 3
    assert {layer.mean_function for layer in previous} == {None}


def test_previous_guard_is_the_papers_layers_with_the_guard_and_every_4_trains_it_so():
    spec = ModelSpec(design="previous-guard", num_points=4)
    built = build_model(spec, 3, 100, inputs=np.random.default_rng(0).normal(size=(100, 3)))
    layers = built.model.layers[:-1]
    assert [(layer.num_anchors, layer.whiten) for layer in layers] == [(0, False)] * 3
    assert built.model.guard is not None and built.model.guard.train_every == 1
    spec = ModelSpec(design="guard-every-4", num_points=4)
    built = build_model(spec, 3, 100, inputs=np.random.default_rng(0).normal(size=(100, 3)))
    assert built.model.guard.train_every == 4


@pytest.mark.slow
@pytest.mark.parametrize("design, anchors", [("global-last", 32), ("linear-hidden-global-last", 0)])
def test_global_last_designs_end_with_a_gpflux_layer_of_global_points(design, anchors):
    *hidden, last = _gp_layers(design)
    assert isinstance(last, SigmaPointGPLayer)
    assert last.gp_layer.inducing_variable.inducing_variable.Z.shape == (32, 4)
    assert [layer.num_anchors for layer in hidden] == [anchors] * 2


def test_identity_hidden_fixes_the_hidden_means():
    layers = _gp_layers("identity-hidden")
    assert [layer.get_config()["mean_function"] for layer in layers] == ["identity"] * 2 + [None]


@pytest.mark.parametrize(
    "design, gate, means",
    [(None, 1.0, "linear"), ("no-reach", None, "linear"), ("identity-reach", 1.0, "identity")],
)
def test_the_default_gates_every_layer_by_reach_and_no_reach_does_not(design, gate, means):
    layers = _gp_layers(design)
    assert [layer.reach_gate for layer in layers] == [gate] * 3
    assert [layer.get_config()["mean_function"] for layer in layers] == [means] * 2 + [None]


def test_identity_first_fixes_the_first_hidden_mean_only():
    layers = _gp_layers("identity-first")
    assert [layer.reach_gate for layer in layers] == [1.0] * 3
    assert [layer.get_config()["mean_function"] for layer in layers] == [
        "identity", "linear", None
    ]  # fmt: skip


@pytest.mark.parametrize("design", ["identity-hidden", "global-last"])
def test_designs_measured_before_the_reach_gate_keep_their_layers(design):
    layers = [layer for layer in _gp_layers(design) if hasattr(layer, "reach_gate")]
    assert layers and {layer.reach_gate for layer in layers} == {None}
