"""``avdgp bench``: the paper's regression protocol over data sets, models and seeds.

For each data set and seed: a random 8:1:1 train/validation/test split, inputs and targets
standardised with training statistics, every model trained with Adam (0.005, batch 100, or 500
for data sets over 200k rows) and scored on the test set. Every finished run is appended to
``results.csv`` at once, and its per-epoch seconds, validation and test NLL to
``curves.jsonl``; a rerun skips the runs already there (resumable). The summary is
``tables.md`` (mean +- std per data set, average ranks as in the paper's Tables 3 and 5,
seconds per epoch and test seconds as in its Table 4), one PNG per metric and, per data set,
``time_<dataset>.png``: test NLL against training seconds of every run.
"""

from __future__ import annotations

import csv
import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence, TextIO

import numpy as np
import tensorflow as tf

from .. import metrics
from ..data import DataError, Dataset, Standardizer, load_dataset, split_dataset, uci_dataset_path
from ..training import TrainConfig, TrainingDiverged
from . import plots
from .runner import run, standardise_split
from .zoo import ModelSpec, model_label, parse_model_name

__all__ = [
    "BenchSettings",
    "DEFAULT_MODELS",
    "read_curves",
    "read_results",
    "run_bench",
    "summarise",
]

DEFAULT_MODELS = ("svgp", "dsdgp", "dspp", "idsgp", "avdgp-ar2p", "avdgp-ar2pp")
METRICS = ("nll", "rmse", "crps")
LARGE_DATA = 200_000
COLUMNS = (
    "dataset",
    "model",
    "seed",
    "epochs",
    "status",
    "n_train",
    "n_val",
    "n_test",
    "dim",
    "nll",
    "rmse",
    "crps",
    "coverage_95",
    "nll_original",
    "rmse_original",
    "crps_original",
    "train_seconds_per_epoch",
    "first_epoch_seconds",
    "predict_seconds",
    "preset",
    "best_epoch",
    "stopped_epoch",
)
#: Per-epoch curves of every finished run, beside ``results.csv``.
CURVES_FILE = "curves.jsonl"
CURVE_KEYS = ("best_epoch", "stopped_epoch", "epoch_seconds", "val_nll_curve", "test_nll_curve")
#: ``preset`` of rows written before the column existed: they ran the paper's settings.
LEGACY_PRESET = "paper"


@dataclass(frozen=True)
class BenchSettings:
    """What to run.

    :param datasets: names under the UCI data root, or paths accepted by ``load_dataset``.
    :param models: model names (``avdgp-ar1`` ... ``avdgp-ar2pp``, ``svgp``, ``dsdgp``, ``dspp``,
        ``idsgp``, ``sgp-avi``).
    :param seeds: one split and initialisation per seed (paper: 5).
    :param epochs: training epochs (paper: 100; 50 for the largest sets).
    :param dtype: ``"float64"`` or ``"float32"``.
    :param data_root: folder of UCI data sets (default ``$AVDGP_DATA_ROOT`` or
        ``../shared/data/uci``).
    :param preset: ``"default"`` or ``"paper"`` (:mod:`gpflux_avdgp.presets`); rows record it
        and tables show models of another preset as ``model/preset``.
    :param training: :class:`~gpflux_avdgp.training.TrainConfig` settings on top of
        the preset's (e.g. ``{"learning_rate": 0.01}``).
    """

    datasets: Sequence[str] = ("elevators",)
    models: Sequence[str] = DEFAULT_MODELS
    seeds: Sequence[int] = (0, 1, 2, 3, 4)
    epochs: int = 100
    dtype: str = "float64"
    data_root: Optional[str] = None
    max_rows: Optional[int] = None
    extra: dict = field(default_factory=dict)
    preset: str = "default"
    training: dict = field(default_factory=dict)


def _load(name: str, root: Optional[str], max_rows: Optional[int]) -> Dataset:
    path = Path(name)
    dataset = load_dataset(path if path.exists() else uci_dataset_path(name, root))
    if max_rows is not None and dataset.num_rows > max_rows:
        keep = np.random.default_rng(0).permutation(dataset.num_rows)[:max_rows]
        keep.sort()
        dataset = Dataset(
            name=dataset.name,
            inputs=dataset.inputs[keep],
            targets=dataset.targets[keep],
            test_masks=None,
            feature_names=dataset.feature_names,
            target_name=dataset.target_name,
        )
    return dataset


def read_results(path: Path) -> list[dict]:
    """Rows of ``results.csv`` (numbers as floats; empty cells as ``None``)."""
    if not path.exists():
        return []
    rows = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            parsed = {}
            for key, value in row.items():
                if key in ("dataset", "model", "status", "preset"):
                    parsed[key] = value
                elif value == "":
                    parsed[key] = None
                else:
                    parsed[key] = float(value)
            parsed["preset"] = parsed.get("preset") or LEGACY_PRESET
            rows.append(parsed)
    return rows


def display_model(model: str, preset: str) -> str:
    """The table name of ``model`` run with ``preset``: ``avdgp-ar2p`` or ``avdgp-ar2p/paper``."""
    return model if preset == "default" else f"{model}/{preset}"


def _upgrade_header(path: Path) -> None:
    """Rewrite ``results.csv`` written with an older set of columns under :data:`COLUMNS`
    (rows from before the ``preset`` column get :data:`LEGACY_PRESET`), so appended rows line
    up with the header."""
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        if tuple(reader.fieldnames or ()) == COLUMNS:
            return
        rows = list(reader)
    for row in rows:
        row["preset"] = row.get("preset") or LEGACY_PRESET
    temporary = path.with_suffix(".csv.tmp")
    with temporary.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({key: row.get(key) or "" for key in COLUMNS})
    temporary.replace(path)


def _append(path: Path, row: dict) -> None:
    if path.exists():
        _upgrade_header(path)
    new = not path.exists()
    with path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        if new:
            writer.writeheader()
        writer.writerow({key: row.get(key, "") for key in COLUMNS})


def _row(record: dict, dataset: str, model: str, seed: int, epochs: int, preset: str) -> dict:
    test, original = record["test"], record["test_original_units"] or {}
    return {
        "preset": preset,
        "best_epoch": record.get("best_epoch"),
        "stopped_epoch": record.get("stopped_epoch"),
        "dataset": dataset,
        "model": model,
        "seed": seed,
        "epochs": epochs,
        "status": "ok",
        "n_train": record["n_train"],
        "n_val": record["n_val"],
        "n_test": record["n_test"],
        "dim": record["dim"],
        **{key: test.get(key) for key in ("nll", "rmse", "crps", "coverage_95")},
        **{f"{key}_original": original.get(key) for key in METRICS},
        "train_seconds_per_epoch": record["train_seconds_per_epoch"],
        "first_epoch_seconds": record["first_epoch_seconds"],
        "predict_seconds": record["predict_seconds"],
    }


def run_bench(
    settings: BenchSettings, out_dir: Path | str, *, stream: Optional[TextIO] = sys.stderr
) -> Path:
    """Run every (data set, model, seed) not yet in ``out_dir/results.csv``; then summarise.

    :returns: the path of ``tables.md``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.csv"
    labels = list(dict.fromkeys(map(model_label, settings.models)))  # de-duplicated, in order
    seeds = list(dict.fromkeys(settings.seeds))
    names = list(dict.fromkeys(settings.datasets))
    done = {
        (row["dataset"], row["model"], int(row["seed"]), int(row["epochs"]), row["preset"])
        for row in read_results(results_path)
    }

    def say(text: str) -> None:
        if stream is not None:
            print(text, file=stream, flush=True)

    total = len(names) * len(labels) * len(seeds)
    count = 0
    for name in names:
        dataset = _load(name, settings.data_root, settings.max_rows)
        batch_size = 500 if dataset.num_rows > LARGE_DATA else 100
        for seed in seeds:
            split = split_dataset(dataset, seed=seed)
            scaler = Standardizer.fit(split.x_train, split.y_train)
            split = standardise_split(split, scaler)
            for label in labels:
                count += 1
                key = (dataset.name, label, seed, settings.epochs, settings.preset)
                if key in done:
                    say(f"[{count}/{total}] {dataset.name} {label} seed {seed}: done, skipped")
                    continue
                say(f"[{count}/{total}] {dataset.name} {label} seed {seed}")
                kind, rule = parse_model_name(label)
                spec = ModelSpec(
                    model=kind.value, rule=rule, seed=seed, preset=settings.preset, **settings.extra
                )
                config = TrainConfig.from_preset(
                    settings.preset,
                    epochs=settings.epochs,
                    batch_size=batch_size,
                    seed=seed,
                    dtype=settings.dtype,
                    **settings.training,
                )
                try:
                    record = run(
                        spec,
                        split,
                        config,
                        dataset=dataset.name,
                        standardizer=scaler,
                        stream=stream,
                        test_curve=True,
                    )
                    row = _row(record, dataset.name, label, seed, settings.epochs, settings.preset)
                    _append_curve(out / CURVES_FILE, row, record)
                except (TrainingDiverged, tf.errors.InvalidArgumentError) as error:
                    message = str(error).strip().splitlines()[0][:200]
                    say(f"  failed: {message}")
                    row = {
                        "dataset": dataset.name,
                        "model": label,
                        "seed": seed,
                        "epochs": settings.epochs,
                        "preset": settings.preset,
                        "status": f"failed: {message}",
                    }
                _append(results_path, row)
                done.add(key)
                if row["status"] == "ok":
                    say(
                        f"  NLL {row['nll']:.3f} RMSE {row['rmse']:.3f} CRPS {row['crps']:.3f} "
                        f"{row['train_seconds_per_epoch']:.2f} s/epoch"
                    )
    shown = [display_model(label, settings.preset) for label in labels]
    return summarise(results_path, out, models=shown, datasets=None)


def _append_curve(path: Path, row: dict, record: dict) -> None:
    """One JSON line per finished run: its key, the seconds of every epoch and the validation
    and test NLL after every epoch (for time-to-accuracy plots)."""
    line = {key: row[key] for key in ("dataset", "model", "preset", "seed", "epochs")}
    line.update({key: record.get(key) for key in CURVE_KEYS})
    with path.open("a") as handle:
        handle.write(json.dumps(line) + "\n")


def read_curves(path: Path) -> list[dict]:
    """The lines of ``curves.jsonl`` (see :func:`run_bench`); ``[]`` if there is none."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


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
        for key in METRICS + ("train_seconds_per_epoch", "predict_seconds"):
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
