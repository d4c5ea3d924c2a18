"""The bench's summary: ``tables.md`` (mean +- std per data set, average ranks, seconds), one
PNG per metric and the time-to-accuracy figures, from ``results.csv`` and ``curves.jsonl``."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from avdgp import metrics
from avdgp.data import DataError
from avdgp.experiments import plots
from avdgp.experiments.bench.results import (
    CURVES_FILE,
    METRICS,
    display_model,
    read_curves,
    read_results,
)

__all__ = ["plot_time_curves", "summarise"]


def _per_seed_scores(values: dict, datasets, models, metric: str) -> dict:
    """``dataset -> model -> [value per seed]`` over the seeds every model of the data set
    finished, in the same seed order for all models (so ranks compare like with like)."""
    scores = {}
    for dataset in datasets:
        present = [m for m in models if (dataset, m) in values]
        if not present:
            continue
        common = sorted(set.intersection(*(set(values[dataset, m][metric]) for m in present)))
        scores[dataset] = {m: [values[dataset, m][metric][s] for s in common] for m in present}
    return scores


def _longest_runs(rows: list[dict]) -> list[dict]:
    """Per (data set, model, seed) only the run with the most epochs (reruns with another
    ``--epochs`` do not mix into one mean)."""
    best: dict = {}
    for row in rows:
        key = (row["dataset"], row["model"], int(row["seed"]))
        if key not in best or row["epochs"] > best[key]["epochs"]:
            best[key] = row
    return list(best.values())


def _fmt(mean: float, std: float, count: int, digits: int = 3) -> str:
    """``mean ± std`` over seeds; one seed has no spread, so it says ``(1 seed)`` instead."""
    if count == 1:
        return f"{mean:.{digits}f} (1 seed)"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def summarise(
    results_path: Path,
    out_dir: Path,
    *,
    models: Optional[Sequence[str]] = None,
    datasets: Optional[Sequence[str]] = None,
) -> Path:
    """Write ``tables.md`` and ``<metric>.png`` from ``results.csv``; returns the tables path.

    :param models: the models to show first, in this order; the other models in the results
        follow.
    :param datasets: the data sets to show, in this order (default: all).
    """
    rows = [row for row in read_results(results_path) if row["status"] == "ok"]
    for row in rows:
        row["model"] = display_model(row["model"], row["preset"])
    rows = _longest_runs(rows)
    if not rows:
        raise DataError(f"{results_path}: no finished runs to summarise")
    # the models asked for first, then any other model with results (all rows are shown)
    models = list(dict.fromkeys([*(models or ()), *(row["model"] for row in rows)]))
    datasets = list(datasets or dict.fromkeys(row["dataset"] for row in rows))
    values: dict = defaultdict(dict)  # (dataset, model) -> {metric: {seed: value}}
    sizes, epochs = {}, {}
    for row in rows:
        per_metric = values[row["dataset"], row["model"]]
        for key in METRICS + ("coverage_95", "train_seconds_per_epoch", "predict_seconds"):
            if row.get(key) is not None:  # older results.csv files have no coverage column
                per_metric.setdefault(key, {})[int(row["seed"])] = row[key]
        rows_total = row["n_train"] + (row.get("n_val") or 0) + row["n_test"]
        sizes[row["dataset"]] = (int(rows_total), int(row["dim"]))
        epochs.setdefault(row["dataset"], set()).add(int(row["epochs"]))

    lines = [
        "# Benchmark results",
        "",
        f"Runs: {len(rows)} finished (`results.csv`). Mean ± std over seeds, standardised "
        "units; lower is better; best mean in bold. Epochs per data set: "
        + ", ".join(f"{d} {'/'.join(map(str, sorted(epochs[d])))}" for d in datasets if d in epochs)
        + ".",
    ]
    for metric in METRICS:
        lines += ["", f"## Test {metric.upper()}", ""]
        lines += _table(metric, datasets, models, values, sizes)
    lines += ["", "## Average ranks (mean (std) over seeds, like the paper's Table 3)", ""]
    lines += ["| metric | " + " | ".join(models) + " |", "|---|" + "---:|" * len(models)]
    for metric in METRICS:
        try:
            ranks = metrics.average_ranks(_per_seed_scores(values, datasets, models, metric))
        except ValueError:
            continue
        cells = [f"{ranks[m][0]:.2f} ({ranks[m][1]:.2f})" if m in ranks else "–" for m in models]
        lines.append(f"| {metric.upper()} | " + " | ".join(cells) + " |")
    for key, title in (
        ("coverage_95", "Test coverage of the central 95 % interval (nominal 0.95)"),
        ("train_seconds_per_epoch", "Training seconds per epoch (after the first)"),
        ("predict_seconds", "Test-set prediction seconds"),
    ):
        lines += ["", f"## {title}", ""]
        lines += _table(key, datasets, models, values, sizes, digits=2, bold=False)

    for metric in METRICS:
        means, stds = {}, {}
        for (dataset, model), per_metric in values.items():
            seeds = list(per_metric[metric].values())
            means[dataset, model], stds[dataset, model] = float(np.mean(seeds)), float(
                np.std(seeds)
            )
        plots.plot_benchmark_metric(
            metric, datasets, models, means, stds, out_dir / f"{metric}.png"
        )
    plot_time_curves(read_curves(results_path.parent / CURVES_FILE), datasets, out_dir)
    tables = out_dir / "tables.md"
    tables.write_text("\n".join(lines) + "\n")
    return tables


def plot_time_curves(
    curves: list[dict],
    datasets: Sequence[str],
    out_dir: Path,
    *,
    seeds: Optional[Sequence[int]] = None,
    suffix: str = "",
) -> list[Path]:
    """``time_<dataset><suffix>.png``: test NLL against training seconds of every run of
    ``curves`` (lines of ``curves.jsonl``) with a test curve, or of the runs of ``seeds`` only
    (e.g. one seed of every model, for a figure of one run each)."""
    written = []
    for dataset in datasets:
        runs: dict = defaultdict(list)
        for curve in curves:
            if curve["dataset"] != dataset or not curve.get("test_nll_curve"):
                continue
            if seeds is not None and int(curve["seed"]) not in seeds:
                continue
            nll = [value for _, value in curve["test_nll_curve"]]
            seconds = curve["epoch_seconds"][: len(nll)]
            model = display_model(curve["model"], curve["preset"])
            runs[model].append((seconds, nll, curve.get("best_epoch")))
        if runs:
            which = "" if seeds is None else f", seed {', '.join(map(str, seeds))}"
            written.append(
                plots.plot_time_to_accuracy(
                    dict(sorted(runs.items())),
                    out_dir / f"time_{dataset}{suffix}.png",
                    title=f"{dataset}{which}: test NLL while training (dot: the epoch kept)",
                )
            )
    return written


def _table(key, datasets, models, values, sizes, digits=3, bold=True) -> list[str]:
    lines = [
        "| data set | N | D | " + " | ".join(models) + " |",
        "|---|---:|---:|" + "---:|" * len(models),
    ]
    for dataset in datasets:
        stats = {}
        for model in models:
            seeds = list(values.get((dataset, model), {}).get(key, {}).values())
            if seeds:
                stats[model] = (float(np.mean(seeds)), float(np.std(seeds)), len(seeds))
        if not stats:
            continue
        best = min(stats, key=lambda m: stats[m][0])
        cells = []
        for model in models:
            if model not in stats:
                cells.append("–")
                continue
            text = _fmt(*stats[model], digits)
            cells.append(f"**{text}**" if bold and model == best else text)
        n, d = sizes[dataset]
        lines.append(f"| {dataset} | {n} | {d} | " + " | ".join(cells) + " |")
    return lines
