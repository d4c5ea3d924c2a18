"""``avdgp uncertainty``: how far each model's predictive uncertainty can be trusted.

Three kinds of problem, each trained and scored by the same harness as ``avdgp bench``
(:func:`~avdgp.training.skeleton.run`: Adam, the preset's schedule and best-epoch
selection on a validation split; on the 1-D problems Adam starts at 0.01):

* ``far``: 1000 points of ``sin(3 x) + 0.1 noise`` with ``x`` uniform in ``[-2, 2]``; the
  predictive standard deviation of ``y`` inside the data and at ``x = 3, 4, 6, 10, 30``;
  ``far_ratio`` is the mean std at ``x = 6, 10, 30`` over the mean std on ``[-2, 2]``.
* ``gap``: the same function on ``[-2, -0.5] U [0.5, 2]``; in the gap (``|x| <= 0.45``) the
  RMSE of the predictive mean against the noise-free function, the fraction of the gap where
  the central 95 % interval of ``y`` covers it (``gap_coverage``) and the mean std.
* any UCI data set name (covariate shift): the rows below the ``quantile`` of input column
  ``column`` are split 8:1:1 into train, validation and in-distribution test rows, the rows
  above it are the shifted test rows; NLL, RMSE, coverage of the central 50/90/95 % intervals,
  mean predicted std, miscalibration and the PIT histogram on both.

Every finished run is appended to ``uncertainty.csv`` at once and a rerun skips it
(resumable); the 1-D problems also write their predictive bands to ``bands/``. The report,
tables and figures are made by :mod:`avdgp.experiments.uncertainty.report`.
"""

from __future__ import annotations

import csv
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence, TextIO

import numpy as np

from avdgp import metrics
from avdgp.data import Split, Standardizer
from avdgp.experiments.bench.run import _load
from avdgp.experiments.uncertainty.problems import (
    FUNCTIONS,
    SHIFT_MARK,
    function_scores,
    function_split,
    hole_scores,
    hole_split,
    principal_component,
    spread_columns,
)
from avdgp.training import TrainConfig, TrainingDiverged
from avdgp.training.runner import SplitData
from avdgp.training.skeleton import Scored, run
from avdgp.zoo import ModelSpec, model_label, parse_model_name, split_design
from gpflux_avdgp.prediction import PredictiveMixture, predict_mixture

__all__ = [
    "LEVELS",
    "expand_problems",
    "ONE_D_PROBLEMS",
    "UncertaintySettings",
    "band_file",
    "interval_scores",
    "run_uncertainty",
    "shift_split",
]

ONE_D_PROBLEMS = ("far", "gap")
#: ``--problems`` shorthands: the four 1-D functions; every shift of :data:`SHIFT_SETS`.
FUNCTIONS_ALIAS, SHIFTS_ALIAS = "functions", "shifts"
#: UCI sets of the shift sweep: each shifted along its three most spread inputs and its first
#: principal component (``NAME@COLUMN``, ``NAME@pc1``).
SHIFT_SETS = ("concrete", "energy", "wine", "parkinsons", "kin40k", "elevators")
#: Nominal levels of the central intervals whose coverage is reported.
LEVELS = (0.5, 0.9, 0.95)
#: Levels the miscalibration figure averages over, ``mean_l |coverage(l) - l|``, and the
#: reliability diagrams show.
CALIBRATION_LEVELS = tuple(np.round(np.arange(0.1, 1.0, 0.1), 2)) + (0.95,)
PIT_BINS = 10
#: Where ``far`` reads the std: inside the data, and beyond it.
FAR_PROBES = (3.0, 4.0, 6.0, 10.0, 30.0)
FAR_RATIO_PROBES = (6.0, 10.0, 30.0)
GAP_HALF_WIDTH = 0.45
BAND_GRID = np.linspace(-6.0, 6.0, 241)
RESULTS_FILE = "uncertainty.csv"
#: Adam's (initial) rate on the 1-D problems: 1000 rows are 10 steps an epoch.
ONE_D_LEARNING_RATE = 0.01


@dataclass(frozen=True)
class UncertaintySettings:
    """What to run: ``problems`` (``far``, ``gap`` or UCI names/paths), ``models`` (as in
    ``avdgp bench``), ``seeds``, ``epochs``, ``preset``; the shift cuts input ``column`` at its
    ``quantile``."""

    problems: Sequence[str] = ("far", "gap", "concrete")
    models: Sequence[str] = ("avdgp-ar2p", "avdgp-ar2pp", "svgp", "dsdgp", "dspp")
    seeds: Sequence[int] = (0, 1, 2)
    epochs: int = 100
    preset: str = "default"
    column: int = 0
    quantile: float = 0.8
    data_root: Optional[str] = None
    #: at most this many rows of a UCI set (a random subset, the same for every seed and model)
    rows: Optional[int] = None


def interval_scores(
    y: np.ndarray, weights: np.ndarray, means: np.ndarray, variances: np.ndarray, suffix: str
) -> dict:
    """NLL, RMSE, coverage at :data:`LEVELS` and :data:`CALIBRATION_LEVELS`, mean std,
    miscalibration and PIT histogram of a mixture prediction ``[N, S]`` of targets ``y``
    ``[N]``; keys end in ``_<suffix>``."""
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    mean, variance = metrics.mixture_mean_and_variance(weights, means, variances)
    levels = sorted(set(LEVELS) | set(CALIBRATION_LEVELS))
    coverage = metrics.central_interval_coverage(y, weights, means, variances, levels=levels)
    pit = metrics.mixture_cdf(y, weights, means, variances)
    histogram, _ = np.histogram(pit, bins=PIT_BINS, range=(0.0, 1.0))
    scores = {
        "nll": metrics.gaussian_mixture_nll(y, weights, means, variances),
        "rmse": metrics.rmse(y, mean),
        **{f"coverage_{round(100 * level)}": coverage[level] for level in levels},
        "mean_std": float(np.mean(np.sqrt(variance))),
        "miscalibration": float(
            np.mean([abs(coverage[level] - level) for level in CALIBRATION_LEVELS])
        ),
        "pit": json.dumps(histogram.tolist()),
    }
    return {f"{key}_{suffix}": value for key, value in scores.items()}


def _sine(inputs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.sin(3.0 * inputs) + 0.1 * rng.standard_normal(inputs.shape)


def one_d_split(problem: str, seed: int) -> Split:
    """1000 training, 200 validation and 1000 in-distribution test points of ``problem``."""
    rng = np.random.default_rng(seed)

    def draw(count: int) -> np.ndarray:
        if problem == "far":
            return rng.uniform(-2.0, 2.0, (count, 1))
        return rng.uniform(0.5, 2.0, (count, 1)) * rng.choice([-1.0, 1.0], (count, 1))

    parts = [draw(count) for count in (1000, 200, 1000)]
    x_train, x_val, x_test = parts
    y_train, y_val, y_test = (_sine(x, rng) for x in parts)
    return Split(x_train, y_train, x_val, y_val, x_test, y_test)


def shift_split(
    inputs: np.ndarray, targets: np.ndarray, *, column: int | str, quantile: float, seed: int
) -> tuple[Split, np.ndarray, np.ndarray]:
    """Rows with ``inputs[:, column]`` (``column="pc1"``: the first principal component,
    :func:`~avdgp.experiments.uncertainty.problems.principal_component`) at most its
    ``quantile`` split 8:1:1 (by ``seed``) into train, validation and in-distribution test; the
    others are the shifted test rows.

    :returns: ``(split, x_shift, y_shift)``.
    :raises ValueError: if either side of the cut is empty.
    """
    values = principal_component(inputs) if column == "pc1" else inputs[:, int(column)]
    cut = np.quantile(values, quantile)
    inside = values <= cut
    if inside.all() or not inside.any():
        raise ValueError(
            f"column {column}: its {quantile:g} quantile ({cut:g}) leaves no rows on one side"
        )
    order = np.random.default_rng(seed).permutation(np.flatnonzero(inside))
    n_test = n_val = round(0.1 * len(order))
    test, val, train = np.split(order, [n_test, n_test + n_val])
    split = Split(*(part for rows in (train, val, test) for part in (inputs[rows], targets[rows])))
    return split, inputs[~inside], targets[~inside]


class UncertaintyData(SplitData):
    """A run's standardised split plus the rows and points it is scored on beyond the test
    set: shifted rows (UCI problems) or the 1-D probes; :meth:`score` keeps the 1-D bands."""

    def __init__(self, split: Split, problem: str, shifted: Optional[tuple] = None, seed: int = 0):
        super().__init__(split)
        self.problem, self.shifted, self.bands, self.seed = problem, shifted, None, seed

    def score(self, built, task, standardizer, config, predict_batch_size) -> Scored:
        def predict(inputs) -> PredictiveMixture:
            return predict_mixture(built.model, inputs, likelihood=built.likelihood)

        scores = interval_scores(self.split.y_test, *_arrays(predict(self.split.x_test)), "in")
        if self.shifted is not None:
            x_shift, y_shift = self.shifted
            scores.update(interval_scores(y_shift, *_arrays(predict(x_shift)), "shift"))
        if self.problem in ONE_D_PROBLEMS:
            scores.update(self._one_d_scores(predict))
        elif self.problem in FUNCTIONS or self.problem == "hole":

            def arrays(inputs) -> tuple:
                mixture = predict(inputs)
                f = (mixture.f_means[..., 0], mixture.f_variances[..., 0])
                return (mixture.weights, *f, *_arrays(mixture)[1:])

            if self.problem == "hole":
                scores.update(hole_scores(arrays, self.seed))
            else:
                scores.update(function_scores(self.problem, arrays, self.seed))
                self.bands = _bands(predict(BAND_GRID[:, None]))
        return Scored(scores, None, None, 0.0)

    def _one_d_scores(self, predict) -> dict:
        grid = predict(BAND_GRID[:, None])
        self.bands = _bands(grid)
        mean, lower, upper = self.bands["mean"], self.bands["lower"], self.bands["upper"]
        std, truth = np.sqrt(grid.y_moments()[1][:, 0]), np.sin(3.0 * BAND_GRID)
        inside = np.abs(BAND_GRID) <= 2.0
        if self.problem == "far":
            probe_std = np.sqrt(predict(np.array(FAR_PROBES)[:, None]).y_moments()[1][:, 0])
            scores = {f"std_at_{x:g}": float(s) for x, s in zip(FAR_PROBES, probe_std)}
            far = np.isin(FAR_PROBES, FAR_RATIO_PROBES)
            scores["std_in_data"] = float(np.mean(std[inside]))
            scores["far_ratio"] = float(np.mean(probe_std[far]) / scores["std_in_data"])
            return scores
        gap = np.abs(BAND_GRID) <= GAP_HALF_WIDTH
        covered = (lower[gap] <= truth[gap]) & (truth[gap] <= upper[gap])
        return {
            "gap_rmse": float(np.sqrt(np.mean((mean[gap] - truth[gap]) ** 2))),
            "gap_coverage": float(np.mean(covered)),
            "gap_std": float(np.mean(std[gap])),
        }


def _bands(grid: PredictiveMixture) -> dict:
    """Mean and central 95 % interval of ``y`` on :data:`BAND_GRID`, for the figures."""
    lower, upper = (bound[:, 0] for bound in grid.central_interval(0.95))
    return {"x": BAND_GRID, "mean": grid.y_moments()[0][:, 0], "lower": lower, "upper": upper}


def _arrays(prediction: PredictiveMixture) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``weights, means, variances`` ``[N, S]`` of a one-output prediction of ``y``."""
    return prediction.weights, prediction.y_means[..., 0], prediction.y_variances[..., 0]


def _problem_data(
    problem: str, seed: int, settings: UncertaintySettings
) -> tuple[UncertaintyData, Standardizer, int]:
    """The run data of ``problem`` (standardised with its training part) and its input width."""
    if problem in ONE_D_PROBLEMS:
        split = one_d_split(problem, seed)
        return UncertaintyData(split, problem), None, 1
    if problem in FUNCTIONS:
        return UncertaintyData(function_split(problem, seed), problem, seed=seed), None, 1
    if problem == "hole":
        return UncertaintyData(hole_split(seed), problem, seed=seed), None, 2
    name, _, column = problem.partition(SHIFT_MARK)
    dataset = _load(name, settings.data_root, None)
    inputs, targets = dataset.inputs, dataset.targets
    if settings.rows is not None and len(inputs) > settings.rows:
        rows = np.sort(np.random.default_rng(0).permutation(len(inputs))[: settings.rows])
        inputs, targets = inputs[rows], targets[rows]
    split, x_shift, y_shift = shift_split(
        inputs,
        targets,
        column=(column if column == "pc1" else int(column)) if column else settings.column,
        quantile=settings.quantile,
        seed=seed,
    )
    scaler = Standardizer.fit(split.x_train, split.y_train)
    shifted = (scaler.transform_x(x_shift), scaler.transform_y(y_shift))
    data = UncertaintyData(scaler.transform_split(split), problem, shifted)
    return data, scaler, dataset.inputs.shape[1]


def band_file(problem: str, model: str, seed: int) -> str:
    """The name of a run's band file in ``bands/`` (``:`` of a design becomes ``+``)."""
    return f"{problem}_{model.replace(':', '+')}_seed{seed}.npz"


def read_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def append_result(path: Path, row: dict) -> None:
    """Append ``row``; a row with new keys rewrites the file with the union of the columns."""
    rows = read_rows(path) + [row]
    columns = list(dict.fromkeys(key for each in rows for key in each))
    if path.exists() and columns == list(rows[0]):
        with path.open("a", newline="") as handle:
            csv.DictWriter(handle, columns).writerow(row)
        return
    temporary = path.with_suffix(".tmp")
    with temporary.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, columns)
        writer.writeheader()
        writer.writerows(rows)
    temporary.replace(path)


def _key(row: dict) -> tuple:
    return (row["problem"], row["model"], int(row["seed"]), int(row["epochs"]), row["preset"])


def run_uncertainty(
    settings: UncertaintySettings, out_dir: Path | str, *, stream: Optional[TextIO] = sys.stderr
) -> Path:
    """Run every (problem, model, seed) not yet in ``out_dir/uncertainty.csv``.

    :returns: the path of ``uncertainty.csv``.
    """
    out = Path(out_dir)
    (out / "bands").mkdir(parents=True, exist_ok=True)
    path = out / RESULTS_FILE
    done = {_key(row) for row in read_rows(path)}
    labels = list(dict.fromkeys(map(model_label, settings.models)))
    problems = expand_problems(settings.problems, settings.data_root)
    runs = [(p, s, m) for p in problems for s in settings.seeds for m in labels]
    for count, (problem, seed, label) in enumerate(runs, 1):
        name = _problem_name(problem)
        key = (name, label, seed, settings.epochs, settings.preset)
        if key in done:
            continue
        if stream is not None:
            print(f"[{count}/{len(runs)}] {name} {label} seed {seed}", file=stream, flush=True)
        data, scaler, _ = _problem_data(problem, seed, settings)
        kind, rule = parse_model_name(label)
        design = split_design(label)[1]
        spec = ModelSpec(
            model=kind.value, rule=rule, seed=seed, preset=settings.preset, design=design
        )
        synthetic = name in ONE_D_PROBLEMS or name in FUNCTIONS or name == "hole"
        rate = ONE_D_LEARNING_RATE if synthetic else None
        config = TrainConfig.from_preset(
            settings.preset, epochs=settings.epochs, seed=seed, learning_rate=rate
        )
        row = dict(zip(("problem", "model", "seed", "epochs", "preset"), key))
        try:
            record = run(data, spec, config, dataset=name, standardizer=scaler, stream=stream)
        except (TrainingDiverged, ValueError) as error:
            row["status"] = "failed: " + str(error).strip().splitlines()[0][:200]
        else:
            row.update(status="ok", seconds_per_epoch=record.train_seconds_per_epoch)
            row.update(best_epoch=record.best_epoch, **record.test)
            if data.bands is not None:
                np.savez(out / "bands" / band_file(name, label, seed), **data.bands)
        append_result(path, row)
        done.add(key)
    return path


def _problem_name(problem: str) -> str:
    """``concrete@3`` for ``path/to/concrete.csv@3``; other names as given."""
    path, mark, column = problem.partition(SHIFT_MARK)
    return Path(path).name.split(".")[0] + mark + column


def expand_problems(problems: Sequence[str], data_root: Optional[str] = None) -> list[str]:
    """``problems`` with :data:`FUNCTIONS_ALIAS` replaced by the 1-D functions and
    :data:`SHIFTS_ALIAS` by ``NAME@COLUMN`` for the three most spread inputs and ``NAME@pc1``
    of every set of :data:`SHIFT_SETS`."""
    expanded = []
    for problem in problems:
        if problem == FUNCTIONS_ALIAS:
            expanded += list(FUNCTIONS)
        elif problem == SHIFTS_ALIAS:
            for name in SHIFT_SETS:
                columns = spread_columns(_load(name, data_root, None).inputs)
                expanded += [f"{name}{SHIFT_MARK}{c}" for c in [*columns, "pc1"]]
        else:
            expanded.append(problem)
    return list(dict.fromkeys(expanded))
