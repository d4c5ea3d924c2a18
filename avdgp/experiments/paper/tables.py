"""The tables of ``avdgp paper``: our runs beside the paper's numbers.

The paper's numbers are data (``numbers/table*.csv``, read from its LaTeX source by
``benchmarks/paper_numbers_from_tex.py``). Every table is written as Markdown (with the budget,
the preset, the command and the runs still missing) and as a long CSV
(``table, metric, dataset, model, ours_mean, ours_std, ours_runs, paper_mean, paper_std``).
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import numpy as np

from avdgp import metrics
from avdgp.experiments import plots
from avdgp.experiments.bench.results import METRICS, read_results
from avdgp.experiments.bench.run import run_version
from avdgp.experiments.paper.request import (
    PAPER_DATASETS,
    SYNTHETIC_TABLE4,
    TABLE_MODELS,
    PaperRequest,
)
from avdgp.experiments.paper.table_format import (
    CSV_COLUMNS,
    csv_row,
    format_stats,
    header,
    mean_std,
    output_stem,
    paper_numbers,
)
from avdgp.experiments.paper.toy_tables import render_ablation, render_table2

__all__ = ["render", "uci_values"]


def uci_values(request: PaperRequest) -> dict:
    """``(dataset, model) -> {key: {seed: value}}`` of the finished runs of the request: its
    preset, epochs and seeds, and the version its settings give now (``run_version``), so rows
    of drifted settings never fill a cell."""
    values: dict = defaultdict(lambda: defaultdict(dict))
    seeds = set(request.run_seeds)
    settings = {dataset: request.bench_settings(dataset) for dataset in request.table_datasets()}
    versions: dict = {}
    for row in read_results(request.out / request.uci_folder / "results.csv"):
        bench = settings.get(row["dataset"])
        if (
            bench is None
            or row["status"] != "ok"
            or row["preset"] != request.preset
            or int(row["epochs"]) != bench.epochs
            or int(row["seed"]) not in seeds
        ):
            continue
        key = (row["dataset"], row["model"])
        if key not in versions:
            versions[key] = run_version(bench, row["model"])
        if row["version"] != versions[key]:
            continue
        for key in METRICS + ("train_seconds_per_epoch", "predict_seconds", "n_train", "dim"):
            values[row["dataset"], row["model"]][key][int(row["seed"])] = row[key]
    return values


def _missing(request: PaperRequest, values: dict) -> list[str]:
    missing = []
    for dataset in request.table_datasets():
        for model in request.uci_models(dataset):
            done = set(values.get((dataset, model), {}).get("nll", {}))
            lacking = [s for s in request.run_seeds if s not in done]
            if lacking:
                missing.append(f"{dataset} {model} (seeds {', '.join(map(str, lacking))})")
    return missing


def _paper_scores() -> dict:
    """``(metric, paper dataset name, model) -> (mean, std)`` of Table 5."""
    return {
        (row["metric"], row["dataset"], row["model"]): (float(row["mean"]), float(row["std"]))
        for row in paper_numbers("table5")
    }


def _score_tables(request, values, models, datasets, csv_rows) -> list[str]:
    """Per metric: a row of ours and a row of the paper's per data set."""
    paper = _paper_scores()
    lines = []
    for metric in METRICS:
        lines += [f"## Test {metric.upper()} (standardised units)", ""]
        lines += ["| data set | | " + " | ".join(models) + " |"]
        lines += ["|---|---|" + "---:|" * len(models)]
        for dataset in datasets:
            ours = {
                m: mean_std(values[dataset, m][metric].values())
                for m in models
                if values.get((dataset, m), {}).get(metric)
            }
            name = PAPER_DATASETS.get(dataset)
            theirs = {m: paper.get((metric, name, m)) for m in models}
            for model in models:
                csv_rows.append(
                    csv_row(request.table, metric, dataset, model, ours.get(model), theirs[model])
                )
            best = min(ours, key=lambda m: ours[m][0]) if ours else None
            cells = [
                f"**{format_stats(ours[m])}**" if m == best else format_stats(ours.get(m))
                for m in models
            ]
            lines.append(f"| {dataset} | ours | " + " | ".join(cells) + " |")
            if name is not None:
                paper_cells = [
                    "–" if theirs[m] is None else f"{theirs[m][0]:.3f} ± {theirs[m][1]:.3f}"
                    for m in models
                ]
                lines.append(f"| | paper ({name}) | " + " | ".join(paper_cells) + " |")
        lines.append("")
    return lines


def _rank_table(request, values, models, datasets, csv_rows) -> list[str]:
    paper_table = "table1" if request.table == "table1" else "table3"
    paper = {
        (row["metric"], row["model"]): (float(row["rank_mean"]), float(row["rank_std"]))
        for row in paper_numbers(paper_table)
    }
    lines = ["| metric | | " + " | ".join(models) + " |", "|---|---|" + "---:|" * len(models)]
    used: set = set()
    run_seeds = sorted(request.run_seeds)
    for metric in METRICS:
        scores = {}
        for dataset in datasets:
            present = [values.get((dataset, m), {}).get(metric, {}) for m in models]
            common = set.intersection(*(set(p) for p in present)) if all(present) else set()
            if common:
                # index k of a list is seed k of the request: a seed not run by every method
                # is NaN, so it is left out rather than ranked as another seed
                scores[dataset] = {
                    m: [p[s] if s in common else np.nan for s in run_seeds]
                    for m, p in zip(models, present)
                }
        ranks = metrics.average_ranks(scores) if scores else {}
        used |= set(scores)
        ours = [f"{ranks[m][0]:.2f} ({ranks[m][1]:.2f})" if m in ranks else "–" for m in models]
        lines.append(f"| {metric.upper()} | ours | " + " | ".join(ours) + " |")
        theirs = [f"{paper[metric, m][0]:.2f} ({paper[metric, m][1]:.2f})" for m in models]
        lines.append("| | paper | " + " | ".join(theirs) + " |")
        for model in models:
            stats = (*ranks[model], len(scores)) if model in ranks else None
            csv_rows.append(
                csv_row(request.table, f"rank_{metric}", "", model, stats, paper[metric, model])
            )
    sets = "data set" if len(used) == 1 else "data sets"
    note = (
        f"Ranks over the {len(used)} {sets} where every method finished a common seed "
        f"({', '.join(sorted(used)) or 'none yet'}), mean (std) over seeds; the paper's over "
        f"its {'8 smallest' if request.table == 'table1' else '14'} data sets."
    )
    return ["## Average ranks", "", note, "", *lines, ""]


def _timing_table(request, values, models, datasets, csv_rows) -> list[str]:
    paper = {(row["dataset"], row["model"]): row for row in paper_numbers("table4")}
    lines = [
        "Seconds on this machine's CPU (one training epoch after the first, one prediction of "
        "the test set); the paper's on an RTX 3090 GPU with its data sizes. The ratios to "
        "DS-DGP compare across machines.",
        "",
        "| data set | | "
        + " | ".join(f"{m} train" for m in models)
        + " | "
        + " | ".join(f"{m} test" for m in models)
        + " | AVDGP/DS-DGP train |",
        "|---|---|" + "---:|" * (2 * len(models) + 1),
    ]
    for dataset in datasets:
        train = {
            m: mean_std(values[dataset, m]["train_seconds_per_epoch"].values())
            for m in models
            if values.get((dataset, m), {}).get("train_seconds_per_epoch")
        }
        test = {
            m: mean_std(values[dataset, m]["predict_seconds"].values())
            for m in models
            if values.get((dataset, m), {}).get("predict_seconds")
        }
        ratio = (
            f"{train['avdgp-ar2p'][0] / train['dsdgp'][0]:.2f}"
            if "avdgp-ar2p" in train and "dsdgp" in train
            else "–"
        )
        lines.append(
            f"| {dataset} | ours | "
            + " | ".join(format_stats(train.get(m), 2) for m in models)
            + " | "
            + " | ".join(format_stats(test.get(m), 2) for m in models)
            + f" | {ratio} |"
        )
        name = PAPER_DATASETS.get(dataset) or SYNTHETIC_TABLE4.get(dataset)
        rows = {m: paper.get((name, m)) for m in models}
        for model in models:
            for kind, stats in (("train", train.get(model)), ("test", test.get(model))):
                theirs = rows[model]
                paper_stats = (
                    (float(theirs[f"{kind}_mean"]), float(theirs[f"{kind}_std"]))
                    if theirs
                    else None
                )
                csv_rows.append(
                    csv_row(request.table, f"{kind}_seconds", dataset, model, stats, paper_stats)
                )
        if all(rows.values()):
            cells = [f"{float(rows[m]['train_mean']):.2f}" for m in models]
            cells += [f"{float(rows[m]['test_mean']):.2f}" for m in models]
            paper_ratio = float(rows["avdgp-ar2p"]["train_mean"]) / float(
                rows["dsdgp"]["train_mean"]
            )
            lines.append(
                f"| | paper ({name}, GPU) | " + " | ".join(cells) + f" | {paper_ratio:.2f} |"
            )
    return lines + [""]


def _render_uci(request: PaperRequest, csv_rows: list) -> list[str]:
    timing = request.table == "table4"
    folder = request.uci_folder
    values = uci_values(request)
    datasets = list(request.table_datasets())
    models = list(TABLE_MODELS[request.table])
    lines = header(request, request.run_seeds)
    missing = _missing(request, values)
    lines += [
        f"Runs: `{folder}/results.csv`. "
        + (f"Still missing: {'; '.join(missing)}." if missing else "All runs finished."),
        "",
    ]
    if timing:
        return lines + _timing_table(request, values, models, datasets, csv_rows)
    if request.table in ("table1", "table3"):
        lines += _rank_table(request, values, models, datasets, csv_rows)
    lines += _score_tables(
        request, values, models, datasets, [] if request.table != "table5" else csv_rows
    )
    if request.table == "table5":
        lines += _score_figures(request, values, models, datasets)
    return lines


def _score_figures(request, values, models, datasets) -> list[str]:
    """``<stem>_<metric>.png``: the paper's Figs. of test NLL, RMSE and CRPS per data set."""
    lines = []
    for metric in METRICS:
        stats = {key: mean_std(v[metric].values()) for key, v in values.items() if v.get(metric)}
        shown = [d for d in datasets if any((d, m) in stats for m in models)]
        if shown:
            means = {key: mean for key, (mean, _, _) in stats.items()}
            stds = {key: std for key, (_, std, _) in stats.items()}
            path = request.out / f"{output_stem(request)}_{metric}.png"
            plots.plot_benchmark_metric(metric, shown, models, means, stds, path)
            lines.append(f"![test {metric}]({path.name})")
    return lines


def render(request: PaperRequest) -> Path:
    """Write ``<stem>.md`` and ``<stem>.csv`` (:func:`output_stem`) in ``request.out``.

    :returns: the Markdown path.
    """
    csv_rows: list[dict] = []
    if request.table == "table2":
        lines = render_table2(request, csv_rows)
    elif request.table == "inference-ablation":
        lines = render_ablation(request, csv_rows)
    else:
        lines = _render_uci(request, csv_rows)
    stem = output_stem(request)
    with (request.out / f"{stem}.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(csv_rows)
    path = request.out / f"{stem}.md"
    path.write_text("\n".join(lines).rstrip() + "\n")
    return path
