"""PNG figures of the experiments, drawn with matplotlib's object API (no pyplot state)."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

__all__ = [
    "plot_benchmark_metric",
    "plot_inducing_points",
    "plot_learning_curves",
    "plot_predictive_probability",
    "plot_time_to_accuracy",
    "plot_toy_data",
]

#: The paper's colours for the toy problem: y = 1 purple, y = 0 olive.
POSITIVE, NEGATIVE = "#6a3d9a", "#9a9a2a"


def _figure(width: float, height: float):
    from matplotlib.figure import Figure  # lazily: the package imports without matplotlib set up

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def plot_toy_data(inputs: np.ndarray, labels: np.ndarray, path: Path) -> Path:
    """Scatter of the toy training data ``[N, 2]`` coloured by label ``[N]``."""
    fig = _figure(5, 5)
    ax = fig.add_subplot()
    positive = labels.reshape(-1) > 0.5
    ax.scatter(*inputs[~positive].T, s=2, c=NEGATIVE, label="y = 0", rasterized=True)
    ax.scatter(*inputs[positive].T, s=2, c=POSITIVE, label="y = 1", rasterized=True)
    ax.set(xlim=(0, 1), ylim=(0, 1), aspect="equal", xlabel="$x_1$", ylabel="$x_2$")
    ax.set_title(f"Training data (N = {len(inputs)})")
    ax.legend(loc="upper right", markerscale=4, fontsize=8)
    fig.savefig(path)
    return path


def plot_predictive_probability(
    grid_axis: np.ndarray, probabilities: Mapping[str, np.ndarray], path: Path
) -> Path:
    """One panel per model: ``p(y = 1 | x)`` on a square grid and the 0.5 decision boundary.

    :param grid_axis: ``[G]`` coordinates of the grid along each axis.
    :param probabilities: model title -> ``[G, G]`` probabilities (rows follow ``x_2``).
    """
    count = len(probabilities)
    fig = _figure(4.2 * count, 4.2)
    axes = fig.subplots(1, count, squeeze=False)[0]
    image = None
    for ax, (title, grid) in zip(axes, probabilities.items()):
        image = ax.imshow(grid, origin="lower", extent=(0, 1, 0, 1), vmin=0, vmax=1, cmap="PuOr_r")
        ax.contour(grid_axis, grid_axis, grid, levels=[0.5], colors="k", linewidths=1.0)
        ax.set(aspect="equal", xlabel="$x_1$", ylabel="$x_2$", title=title)
    fig.colorbar(image, ax=list(axes), shrink=0.8, label="p(y = 1 | x)")
    fig.savefig(path)
    return path


def plot_learning_curves(
    curves: Mapping[str, Sequence[tuple[float, float]]],
    path: Path,
    *,
    xlabel: str = "optimisation steps",
    ylabel: str = "test error rate (%)",
    references: Mapping[str, float] | None = None,
) -> Path:
    """One line per model of ``(x, y)`` points, e.g. test error against steps.

    :param curves: model title -> ``[(x, y), ...]``.
    :param references: label -> horizontal reference value (e.g. the paper's results), drawn
        dashed.
    """
    fig = _figure(6, 4)
    ax = fig.add_subplot()
    for index, (title, points) in enumerate(curves.items()):
        xs, ys = zip(*points) if points else ((), ())
        ax.plot(xs, ys, marker="o", markersize=3, color=f"C{index}", label=title)
    for index, (label, value) in enumerate((references or {}).items()):
        ax.axhline(value, linestyle="--", linewidth=1, color=f"C{index}", label=label)
    ax.set(xlabel=xlabel, ylabel=ylabel)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.savefig(path)
    return path


def plot_inducing_points(
    queries: np.ndarray, inducing: Mapping[str, np.ndarray], path: Path
) -> Path:
    """Per model, the first layer's inducing points ``Z_b`` ``[B, M, 2]`` of query inputs.

    Inducing point ``m`` of every query gets colour ``m`` (the paper's Fig. of inducing point
    locations); the query inputs ``[B, 2]`` are drawn as black dots.
    """
    count = len(inducing)
    fig = _figure(4.2 * count, 4.2)
    axes = fig.subplots(1, count, squeeze=False)[0]
    for ax, (title, points) in zip(axes, inducing.items()):
        colours = [f"C{m % 10}" for m in range(points.shape[1])]
        for m, colour in enumerate(colours):
            ax.scatter(*points[:, m].T, s=6, color=colour, alpha=0.7, rasterized=True)
        ax.scatter(*queries.T, s=3, color="k")
        ax.set(xlim=(-0.25, 1.25), ylim=(-0.25, 1.25), aspect="equal", title=title)
        ax.set(xlabel="$x_1$", ylabel="$x_2$")
    fig.savefig(path)
    return path


def plot_benchmark_metric(
    metric: str,
    datasets: Sequence[str],
    models: Sequence[str],
    means: Mapping[tuple[str, str], float],
    stds: Mapping[tuple[str, str], float],
    path: Path,
) -> Path:
    """The paper's benchmark figure: a panel per data set, a horizontal error bar per model.

    :param means: ``(dataset, model)`` -> mean over seeds (missing pairs are left out).
    :param stds: ``(dataset, model)`` -> standard deviation over seeds.
    """
    count = len(datasets)
    fig = _figure(max(3.0, 2.6 * count), 0.35 * len(models) + 1.2)
    axes = fig.subplots(1, count, squeeze=False)[0]
    for ax, dataset in zip(axes, datasets):
        for row, model in enumerate(models):
            if (dataset, model) not in means:
                continue
            ax.errorbar(
                means[dataset, model],
                row,
                xerr=stds.get((dataset, model), 0.0),
                fmt="o",
                color=f"C{row % 10}",
                capsize=3,
            )
        ax.set_yticks(range(len(models)))
        ax.set_yticklabels(models if ax is axes[0] else [])
        ax.set_ylim(-0.5, len(models) - 0.5)
        ax.invert_yaxis()
        ax.set_title(dataset, fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
    fig.suptitle(f"Test {metric.upper()} (lower is better; mean +- std over seeds)", fontsize=9)
    fig.savefig(path)
    return path


def plot_time_to_accuracy(
    runs: Mapping[str, Sequence[tuple[Sequence[float], Sequence[float], int | None]]],
    path: Path,
    *,
    title: str = "",
    ylabel: str = "test NLL",
) -> Path:
    """Test NLL against cumulative training seconds, one colour per model, one line per run.

    :param runs: model -> ``[(epoch_seconds [E], nll_after_each_epoch [E], best_epoch), ...]``;
        the epoch whose weights the run kept (``best_epoch``, from 1) is marked with a dot.
    """
    fig = _figure(6.5, 4.2)
    ax = fig.add_subplot()
    values = []
    for index, (model, model_runs) in enumerate(runs.items()):
        colour = f"C{index % 10}"
        for number, (seconds, nll, best) in enumerate(model_runs):
            elapsed = np.cumsum(np.asarray(seconds, dtype=float))
            nll = np.asarray(nll, dtype=float)
            values.extend(nll[np.isfinite(nll)])
            ax.plot(elapsed, nll, color=colour, linewidth=1, label=model if number == 0 else None)
            if best is not None and 1 <= best <= len(nll):
                ax.plot(elapsed[best - 1], nll[best - 1], "o", color=colour, markersize=4)
    if values:  # the first epochs of some models start far above the rest: keep the detail
        low, high = float(np.min(values)), float(np.percentile(values, 95))
        ax.set_ylim(low - 0.05 * (high - low), high)
    ax.set_xscale("log")
    ax.set(xlabel="training seconds (cumulative, without scoring)", ylabel=ylabel, title=title)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.savefig(path)
    return path


def plot_runs(values: Mapping[str, Sequence[float]], path: Path, *, title: str) -> Path:
    """One column per model: a dot per run and an error bar of mean +- std (the paper's
    inference-function ablation figure)."""
    fig = _figure(1.2 * len(values) + 1.5, 3.2)
    ax = fig.subplots()
    for column, runs in enumerate(values.values()):
        runs = np.asarray(runs, dtype=float)
        ax.scatter(np.full(len(runs), column - 0.1), runs, s=14, color=f"C{column % 10}")
        ax.errorbar(column + 0.1, runs.mean(), yerr=runs.std(), fmt="s", color="k", capsize=3)
    ax.set_xticks(range(len(values)))
    ax.set_xticklabels(list(values), fontsize=8)
    ax.set_title(title, fontsize=9)
    fig.savefig(path)
    return path
