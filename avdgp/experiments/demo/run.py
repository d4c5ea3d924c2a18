"""``avdgp demo``: the paper's toy "DGP" classification problem with SGP-AVI and AVDGPs.

Trains SGP-AVI (one amortized layer) and AVDGP-AR2P with 2 and 3 layers on points uniform in
the unit square labelled by whether they fall inside the letters "DGP", prints test error
rates and writes figures of the data, the predictive probabilities and the first layer's
amortized inducing points.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional, TextIO

import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from avdgp.data import Standardizer
from avdgp.experiments import plots
from avdgp.experiments.demo.toy import toy_splits
from avdgp.training import EpochProgress, TrainConfig, fit_model, float_type
from avdgp.training.runner import score_prediction
from avdgp.zoo import ModelSpec, Task, build_model
from gpflux_avdgp.checks import check_positive_int
from gpflux_avdgp.prediction import predict_mixture

__all__ = ["DemoSettings", "REDUCED", "FULL", "PAPER_TABLE_2", "run_demo"]

#: The paper's Table 2, ``|M| = 32``: mean test error rates (%) over 5 runs after 100 epochs.
PAPER_TABLE_2 = {"SGP-AVI": 7.63, "AVDGP-2L": 4.40, "AVDGP-3L": 4.14}


@dataclass(frozen=True)
class DemoSettings:
    """Size of the demo.

    :param num_rows: rows generated, split train:test:validation = 3:2:1 (paper).
    :param epochs: training epochs per model.
    :param total_inducing: ``|M|``, inducing points summed over layers, split 1:1 (2 layers)
        and 2:1:1 (3 layers) as in the paper.
    :param num_sigma_points: ``S`` of the deep models.
    :param batch_size: rows per step (paper: 100).
    :param learning_rate: Adam's (initial) step size (paper: 0.005).
    :param seed: data and model seed.
    :param preset: ``"default"`` (the package's defaults: global inducing-point start, cosine
        learning-rate decay) or ``"paper"`` (the paper's settings), see
        :mod:`gpflux_avdgp.presets`. The demo keeps the last epoch's weights either way (its
        curve is scored on the test set, not used to select).
    :param curve_points: test-error evaluations per model for the learning-curve figure.
    """

    num_rows: int = 12000
    epochs: int = 40
    total_inducing: int = 32
    num_sigma_points: int = 16
    batch_size: int = 100
    learning_rate: float = 0.005
    seed: int = 0
    preset: str = "default"
    curve_points: int = 8


#: About three minutes on 2 CPU cores: 6000 training points, 40 epochs (2400 steps) and S = 16.
REDUCED = DemoSettings()
#: The paper's data size, length and S: 40000 training points, 100 epochs, S = 32.
FULL = DemoSettings(num_rows=80000, epochs=100, num_sigma_points=32)


class _TestErrorCurve(tf_keras.callbacks.Callback):
    """Test error rate every ``every`` steps (and at the end), for the learning-curve figure."""

    def __init__(self, x_test: np.ndarray, y_test: np.ndarray, likelihood, every: int):
        super().__init__()
        # It reads no logs: without this, Keras copies the step's logs to the host after every
        # batch, a sync per step that made the demo's epochs 17 % slower (measured 2026-11-26).
        self._supports_tf_logs = True
        self.x_test, self.y_test, self.likelihood = x_test, y_test, likelihood
        self.every, self.step = max(1, every), 0
        self.points: list[tuple[int, float]] = []

    def _score(self) -> None:
        prediction = predict_mixture(self.model, self.x_test, likelihood=self.likelihood)
        scores, _ = score_prediction(prediction, self.y_test, Task.CLASSIFICATION)
        self.points.append((self.step, 100.0 * scores["error_rate"]))

    def on_train_batch_end(self, batch: int, logs: Optional[dict] = None) -> None:
        self.step += 1
        if self.step % self.every == 0:
            self._score()

    def on_train_end(self, logs: Optional[dict] = None) -> None:
        if not self.points or self.points[-1][0] != self.step:
            self._score()


def _specs(settings: DemoSettings) -> dict[str, ModelSpec]:
    total = check_positive_int("total_inducing", settings.total_inducing)
    if total < 4:
        raise ValueError(f"total_inducing: expected at least 4 (split 2:1:1), got {total}")
    common = dict(
        task="classification",
        num_points=settings.num_sigma_points,
        seed=settings.seed,
        preset=settings.preset,
    )
    return {
        "SGP-AVI": ModelSpec(model="sgp-avi", num_inducing=[total], rule=None, **common),
        "AVDGP-2L": ModelSpec(
            num_layers=2, hidden_dims=[2], num_inducing=[total // 2, total // 2], **common
        ),
        "AVDGP-3L": ModelSpec(
            num_layers=3,
            hidden_dims=[2, 2],
            num_inducing=[total // 2, total // 4, total // 4],
            **common,
        ),
    }


def run_demo(
    settings: DemoSettings = REDUCED,
    out_dir: Path | str = "avdgp-demo",
    *,
    stream: Optional[TextIO] = sys.stderr,
    report: Optional[TextIO] = sys.stdout,
    grid_size: int = 150,
) -> dict:
    """Run the demo; returns ``{"settings", "results": {model: {...}}, "figures": [...]}``.

    Progress (what is trained, one line per epoch) goes to ``stream``, the results (each
    model's test scores, the table beside the paper's, where the figures are) to ``report``;
    ``None`` silences either. Figures and ``results.json`` go to ``out_dir``.
    """
    specs = _specs(settings)  # validate before writing anything
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    def say(text: str, to: Optional[TextIO] = stream) -> None:
        if to is not None:
            print(text, file=to, flush=True)

    def result(text: str) -> None:
        say(text, report)

    split = toy_splits(check_positive_int("num_rows", settings.num_rows), settings.seed)
    say(
        f"Toy 'DGP' letters: {len(split.x_train)} train, {len(split.x_val)} validation, "
        f"{len(split.x_test)} test points; {settings.epochs} "
        f"{'epoch' if settings.epochs == 1 else 'epochs'} per model"
    )
    scaler = Standardizer.fit(split.x_train, split.y_train, standardize_targets=False)
    x_train, x_test = scaler.transform_x(split.x_train), scaler.transform_x(split.x_test)
    axis = (np.arange(grid_size) + 0.5) / grid_size
    grid = np.stack(np.meshgrid(axis, axis), -1).reshape(-1, 2)  # [G G, 2], x_1 fastest
    query_axis = np.linspace(0.1, 0.9, 8)
    queries = np.stack(np.meshgrid(query_axis, query_axis), -1).reshape(-1, 2)  # [64, 2]

    results, probability_maps, inducing_maps, curves = {}, {}, {}, {}
    config = TrainConfig.from_preset(
        settings.preset,
        epochs=settings.epochs,
        batch_size=settings.batch_size,
        learning_rate=settings.learning_rate,
        seed=settings.seed,
        restore_best=False,
    )
    total_steps = settings.epochs * -(-len(x_train) // settings.batch_size)
    curve_every = max(1, total_steps // check_positive_int("curve_points", settings.curve_points))
    for title, spec in specs.items():
        say(f"Training {title} (M = {spec.resolved_inducing()}, dims {spec.resolved_dims()})")
        start = time.perf_counter()
        with float_type(config.dtype):
            built = build_model(spec, 2, len(x_train))
            curve = _TestErrorCurve(x_test, split.y_test, built.likelihood, curve_every)
            progress = EpochProgress(title, stream)
            fit_model(built, x_train, split.y_train, config, progress=progress, callbacks=(curve,))
            scores, probabilities, inducing = _score_and_map(
                built, x_test, split.y_test, scaler, grid, queries
            )
        seconds = time.perf_counter() - start
        curves[title] = curve.points
        probability_maps[f"{title}: error {100 * scores['error_rate']:.2f}%"] = (
            probabilities.reshape(grid_size, grid_size)
        )
        inducing_maps[title] = inducing
        results[title] = {
            **scores,
            "seconds": seconds,
            "num_inducing": spec.resolved_inducing(),
            "test_error_curve": curves[title],
        }
        result(
            f"{title}: test error rate {100 * scores['error_rate']:.2f}%, "
            f"NLL {scores['nll']:.3f}, Brier {scores['brier']:.3f} ({seconds:.0f} s)"
        )
    figures = [
        plots.plot_toy_data(split.x_train, split.y_train, out / "training_data.png"),
        plots.plot_predictive_probability(
            axis, probability_maps, out / "predictive_probability.png"
        ),
        plots.plot_inducing_points(queries, inducing_maps, out / "inducing_points.png"),
        plots.plot_learning_curves(
            curves,
            out / "learning_curves.png",
            references={
                f"paper {name} (|M| = 32, 100 epochs of 40000 points)": value
                for name, value in PAPER_TABLE_2.items()
            },
        ),
    ]
    summary = {
        "settings": settings.__dict__,
        "n_train": len(split.x_train),
        "n_test": len(split.x_test),
        "results": results,
        "figures": [str(path) for path in figures],
    }
    (out / "results.json").write_text(json.dumps(summary, indent=2))
    result("")
    result("Test error rates (paper, Table 2, |M| = 32: SGP-AVI 7.63%, 2L 4.40%, 3L 4.14%):")
    for title, scores in results.items():
        result(f"  {title:<9} {100 * scores['error_rate']:6.2f}%")
    result(f"Figures and results.json in {out}/")
    return summary


def _score_and_map(
    built, x_test: np.ndarray, y_test: np.ndarray, scaler: Standardizer, grid, queries
) -> tuple[dict, np.ndarray, np.ndarray]:
    """Test scores, ``p(y = 1)`` on the ``grid`` ``[G]`` and the first layer's inducing
    points for the ``queries`` ``[64, M, 2]`` (in the original input units) of a trained
    demo model; ``x_test`` is standardised, ``grid`` and ``queries`` are not."""
    prediction = predict_mixture(built.model, x_test, likelihood=built.likelihood)
    scores, _ = score_prediction(prediction, y_test, Task.CLASSIFICATION)
    on_grid = predict_mixture(built.model, scaler.transform_x(grid), likelihood=built.likelihood)
    first = built.model.get_layer("gp_layer_1")
    inducing = first.inference(tf.constant(scaler.transform_x(queries))).inducing
    return scores, on_grid.class_probabilities(), inducing.numpy() * scaler.x_std + scaler.x_mean


def demo_settings(full: bool, **overrides) -> DemoSettings:
    """The reduced (default) or full settings with ``None``-valued overrides ignored."""
    base = FULL if full else REDUCED
    return replace(base, **{k: v for k, v in overrides.items() if v is not None})
