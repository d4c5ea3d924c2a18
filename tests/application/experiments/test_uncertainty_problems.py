"""The problems of the harder uncertainty benchmark: where their data are (gaps, holes), the
shifted inputs they choose, and their scores checked on oracle predictions."""

import numpy as np
import pytest

from avdgp.experiments.uncertainty.problems import (
    DOMAIN,
    FUNCTIONS,
    GAP,
    HOLE_RADIUS,
    function_scores,
    function_split,
    hole_function,
    hole_scores,
    hole_split,
    principal_component,
    spread_columns,
)
from avdgp.experiments.uncertainty.run import expand_problems


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_the_1d_data_leave_the_gap_empty_and_follow_the_function(name):
    split = function_split(name, seed=0)
    function, noise = FUNCTIONS[name]
    for x, y in ((split.x_train, split.y_train), (split.x_test, split.y_test)):
        assert x.shape[1] == 1 and len(x) == 1000
        assert np.all((x <= GAP[0]) | (x >= GAP[1])) and np.all((x >= DOMAIN[0]) & (x <= DOMAIN[1]))
        residual = (y - function(x)) / noise(x)
        assert abs(residual.std() - 1.0) < 0.1 and abs(residual.mean()) < 0.1
    assert (split.x_train < GAP[0]).mean() == pytest.approx(0.5, abs=0.05)  # both sides


def test_the_hole_is_empty():
    split = hole_split(seed=1)
    for x in (split.x_train, split.x_val, split.x_test):
        assert np.all(np.hypot(x[:, 0], x[:, 1]) > HOLE_RADIUS)
        assert np.all(np.abs(x) <= 2.0)


def _oracle(function, noise, offset=0.0, f_std=1e-4):
    """A predict function of one Gaussian: f's truth (plus ``offset``), the true noise."""

    def predict(x):
        n = len(x)
        mean = function(x)[:, 0] + offset
        f_var = np.full(n, f_std**2)
        y_var = f_var + noise(x)[:, 0] ** 2
        return np.ones((n, 1)), mean[:, None], f_var[:, None], mean[:, None], y_var[:, None]

    return predict


def test_function_scores_of_the_truth_and_of_a_biased_mean():
    function, noise = FUNCTIONS["hetero"]
    scores = function_scores("hetero", _oracle(function, noise), seed=0)
    assert scores["gap_f_coverage"] == 1.0 and scores["gap_rmse"] < 1e-12
    gap_noise = noise(np.linspace(*GAP, 1001)[:, None])
    expected_nll = np.mean(0.5 * np.log(2 * np.pi * gap_noise**2)) + 0.5  # E[-log N(y; f, s2)]
    assert scores["gap_nll"] == pytest.approx(expected_nll, abs=0.1)
    # the noise grows left to right: the std at x = 2 + 4w and -2 - 4w over the data's mean std
    inside = np.concatenate([np.linspace(-2, -0.6, 500), np.linspace(0.6, 2, 500)])
    for width in (0.5, 1.0, 3.0):
        far = np.array([[-2 - 4 * width], [2 + 4 * width]])
        ratio = noise(far).mean() / noise(inside[:, None]).mean()
        assert scores[f"far_ratio_{width:g}"] == pytest.approx(ratio, rel=0.05)
    assert scores["beyond_coverage_95"] == pytest.approx(0.95, abs=0.03)
    biased = function_scores("hetero", _oracle(function, noise, offset=1.0), seed=0)
    assert biased["gap_f_coverage"] == 0.0 and biased["gap_rmse"] == pytest.approx(1.0)
    assert biased["beyond_coverage_95"] < 0.5


def test_hole_scores_of_a_wide_and_a_sure_wrong_prediction():
    def noise(x):
        return np.full((len(x), 1), 0.1)

    def wide(x):
        return hole_function(x) + np.where(np.hypot(x[:, :1], x[:, 1:]) < HOLE_RADIUS, 0.5, 0.0)

    scores = hole_scores(_oracle(wide, noise, f_std=1.0), seed=0)
    assert scores["hole_f_coverage"] == 1.0 and scores["hole_std_ratio"] == pytest.approx(1.0)
    sure = hole_scores(_oracle(wide, noise, f_std=0.01), seed=0)
    assert sure["hole_f_coverage"] == 0.0 and sure["hole_rmse"] == pytest.approx(0.5)


def test_the_shifted_inputs_skip_a_subject_number_and_pc1_follows_the_spread():
    rng = np.random.default_rng(0)
    subject = np.repeat(np.arange(30.0), 20) - 7.5  # centred subject numbers, 30 x 20 rows
    smooth = rng.normal(size=600)
    coarse = rng.integers(0, 5, 600).astype(float)
    inputs = np.column_stack([subject, coarse, smooth, 2.0 * smooth + 0.01 * rng.normal(size=600)])
    assert spread_columns(inputs, 2) == [2, 3]
    assert spread_columns(inputs, 3) == [2, 3, 1]  # never the subject column
    component = principal_component(inputs)
    assert abs(np.corrcoef(component, smooth)[0, 1]) > 0.99


def test_problem_shorthands_expand():
    assert expand_problems(["far", "functions", "kink"]) == ["far", *FUNCTIONS]


def test_the_criteria_table_counts_runs_against_svgp_by_problem_and_seed():
    from avdgp.experiments.uncertainty.report import criteria_table

    def row(model, seed, **scores):
        return {"problem": "kink", "model": model, "seed": str(seed), **scores}

    rows = [
        row("svgp", 0, gap_f_coverage="0.8", gap_nll="0.5", far_ratio_1="9"),
        row("svgp", 1, gap_f_coverage="1.0", gap_nll="0.1", far_ratio_1="9"),
        # seed 0: band 0.8 >= min(0.9, 0.8), NLL 0.8 <= 0.5 + 0.3; seed 1: band 0.95 > 0.9 but
        # NLL 0.5 > 0.1 + 0.3, far/in 2.9 < 3
        row("ours", 0, gap_f_coverage="0.8", gap_nll="0.8", far_ratio_1="3.0"),
        row("ours", 1, gap_f_coverage="0.95", gap_nll="0.5", far_ratio_1="2.9"),
        row("ours", 2, gap_f_coverage="0.0", gap_nll="9", far_ratio_1="0"),  # no SVGP run: skipped
    ]
    table = criteria_table(rows, ["ours", "svgp"])
    ours = next(line for line in table if line.startswith("| ours"))
    cells = [cell.strip() for cell in ours.strip("|").split("|")][1:]
    assert cells[:3] == ["1 / 2", "2 / 2", "1 / 2"] and cells[3] == "-"
