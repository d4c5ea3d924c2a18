"""The tables of ``avdgp paper``: our runs beside the paper's numbers.

The paper's numbers are data (``paper_numbers/table*.csv``, read from its LaTeX source by
``benchmarks/paper_numbers_from_tex.py``). Every table is written as Markdown (with the budget,
the preset, the command and the runs still missing) and as a long CSV
(``table, metric, dataset, model, ours_mean, ours_std, ours_runs, paper_mean, paper_std``).
"""

from __future__ import annotations

import csv
from collections import defaultdict
from importlib import resources
from pathlib import Path
from typing import Optional

import numpy as np

from .. import metrics
from . import plots
from .bench_results import METRICS, read_results
from .paper import PAPER_DATASETS, TABLE_MODELS, PaperRequest, toy_runs
from .toy_grid import QUERIES, read_toy_rows

__all__ = ["paper_numbers", "render"]

CSV_COLUMNS = (
    "table",
    "metric",
    "dataset",
    "model",
    "ours_mean",
    "ours_std",
    "ours_runs",
    "paper_mean",
    "paper_std",
)
TITLES = {
    "table1": "Table 1: average ranks of the amortization rules (AR1, AR2, AR2P)",
    "table2": "Table 2: toy test error rates (%) by |M| and depth",
    "table3": "Table 3: average ranks of the six methods",
    "table4": "Table 4: training and test seconds per epoch of the deep models",
    "table5": "Table 5: test NLL, RMSE and CRPS per data set",
    "inference-ablation": "Inference-function ablation: IDSGP's MLP of growing depth "
    "against the affine map (toy test error rates, %)",
}
TOY_EXPERIMENT = {"table2": "table2", "inference-ablation": "ablation"}


def paper_numbers(table: str) -> list[dict]:
    """The paper's numbers of ``table`` (``"table1"`` ... ``"table5"``) as CSV rows."""
    text = resources.files(__package__).joinpath("paper_numbers", f"{table}.csv").read_text()
    return list(csv.DictReader(text.splitlines()))


def _mean_std(values) -> tuple[float, float, int]:
    values = [float(v) for v in values]
    return float(np.mean(values)), float(np.std(values)), len(values)


def _cell(stats: Optional[tuple], digits: int = 3) -> str:
    if stats is None:
        return "–"
    mean, std, count = stats
    if count == 1:
        return f"{mean:.{digits}f} (1 run)"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def _csv_row(table, metric, dataset, model, stats, paper) -> dict:
    mean, std, count = stats if stats else (None, None, 0)
    return dict(
        table=table,
        metric=metric,
        dataset=dataset,
        model=model,
        ours_mean=mean,
        ours_std=std,
        ours_runs=count,
        paper_mean=paper[0] if paper else None,
        paper_std=paper[1] if paper else None,
    )


def _header(request: PaperRequest, seeds) -> list[str]:
    budget = request.protocol
    command = f"avdgp paper {request.table} --budget {budget.name} --out {request.out}"
    if request.preset != "default":
        command += f" --preset {request.preset}"
    return [
        f"# {TITLES[request.table]}",
        "",
        f"Budget **{budget.name}**: {budget.description}. Preset `{request.preset}`; seeds "
        f"{', '.join(map(str, seeds))}. Regenerate: `{command} --render-only`.",
        "",
    ]


# ------------------------------------------------------------------------------- UCI tables
def _uci_values(request: PaperRequest, folder: str, epochs: int) -> dict:
    """``(dataset, model) -> {key: {seed: value}}`` of the finished runs of the request."""
    values: dict = defaultdict(lambda: defaultdict(dict))
    seeds = set(request.run_seeds)
    for row in read_results(request.out / folder / "results.csv"):
        if (
            row["status"] != "ok"
            or row["preset"] != request.preset
            or int(row["epochs"]) != epochs
            or int(row["seed"]) not in seeds
        ):
            continue
        for key in METRICS + ("train_seconds_per_epoch", "predict_seconds", "n_train", "dim"):
            values[row["dataset"], row["model"]][key][int(row["seed"])] = row[key]
    return values


def _missing(request: PaperRequest, values: dict) -> list[str]:
    missing = []
    for dataset in request.uci_datasets():
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
                m: _mean_std(values[dataset, m][metric].values())
                for m in models
                if values.get((dataset, m), {}).get(metric)
            }
            name = PAPER_DATASETS.get(dataset)
            theirs = {m: paper.get((metric, name, m)) for m in models}
            for model in models:
                csv_rows.append(
                    _csv_row(request.table, metric, dataset, model, ours.get(model), theirs[model])
                )
            best = min(ours, key=lambda m: ours[m][0]) if ours else None
            cells = [f"**{_cell(ours[m])}**" if m == best else _cell(ours.get(m)) for m in models]
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
    for metric in METRICS:
        scores = {}
        for dataset in datasets:
            present = [values.get((dataset, m), {}).get(metric, {}) for m in models]
            common = set.intersection(*(set(p) for p in present)) if all(present) else set()
            if common:
                seeds = sorted(common)
                scores[dataset] = {m: [p[s] for s in seeds] for m, p in zip(models, present)}
        ranks = metrics.average_ranks(scores) if scores else {}
        used |= set(scores)
        ours = [f"{ranks[m][0]:.2f} ({ranks[m][1]:.2f})" if m in ranks else "–" for m in models]
        lines.append(f"| {metric.upper()} | ours | " + " | ".join(ours) + " |")
        theirs = [f"{paper[metric, m][0]:.2f} ({paper[metric, m][1]:.2f})" for m in models]
        lines.append("| | paper | " + " | ".join(theirs) + " |")
        for model in models:
            stats = (*ranks[model], len(scores)) if model in ranks else None
            csv_rows.append(
                _csv_row(request.table, f"rank_{metric}", "", model, stats, paper[metric, model])
            )
    note = (
        f"Ranks over the {len(used)} data sets where every method finished a common seed "
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
            m: _mean_std(values[dataset, m]["train_seconds_per_epoch"].values())
            for m in models
            if values.get((dataset, m), {}).get("train_seconds_per_epoch")
        }
        test = {
            m: _mean_std(values[dataset, m]["predict_seconds"].values())
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
            + " | ".join(_cell(train.get(m), 2) for m in models)
            + " | "
            + " | ".join(_cell(test.get(m), 2) for m in models)
            + f" | {ratio} |"
        )
        name = PAPER_DATASETS.get(dataset)
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
                    _csv_row(request.table, f"{kind}_seconds", dataset, model, stats, paper_stats)
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
    folder = "timing" if timing else "uci"
    epochs = request.protocol.timing_epochs if timing else request.protocol.epochs
    values = _uci_values(request, folder, epochs)
    datasets = list(request.uci_datasets())
    models = list(TABLE_MODELS[request.table])
    lines = _header(request, request.run_seeds)
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
        for metric in METRICS:
            means = {
                k: float(np.mean(list(v[metric].values())))
                for k, v in values.items()
                if v.get(metric)
            }
            stds = {
                k: float(np.std(list(v[metric].values())))
                for k, v in values.items()
                if v.get(metric)
            }
            shown = [d for d in datasets if any((d, m) in means for m in models)]
            if shown:
                path = request.out / f"table5_{metric}.png"
                plots.plot_benchmark_metric(metric, shown, models, means, stds, path)
                lines.append(f"![test {metric}]({path.name})")
    return lines


# ------------------------------------------------------------------------------- toy tables
def _toy_rows(request: PaperRequest) -> list[dict]:
    settings = request.toy_settings
    seeds = set(request.run_seeds)
    return [
        row
        for row in read_toy_rows(request.out / "toy" / "toy.csv")
        if row["experiment"] == TOY_EXPERIMENT[request.table]
        and int(row["num_rows"]) == settings.num_rows
        and int(row["epochs"]) == settings.epochs
        and row["preset"] == settings.preset
        and int(row["seed"]) in seeds
    ]


def _toy_missing(request: PaperRequest, rows: list[dict]) -> list[str]:
    """``Still missing: ...`` (grouped by model and ``|M|``) or ``All runs finished.``"""
    done = {(row["name"], int(row["total_inducing"]), int(row["seed"])) for row in rows}
    lacking: dict = defaultdict(list)
    runs = toy_runs(request)
    for run in runs:
        total = sum(run.spec.resolved_inducing())
        if (run.name, total, run.spec.seed) not in done:
            lacking[run.name, total].append(str(run.spec.seed))
    count = sum(len(seeds) for seeds in lacking.values())
    if not lacking:
        return ["Runs: `toy/toy.csv`. All runs finished.", ""]
    groups = "; ".join(
        f"{name} |M| {total} (seeds {', '.join(seeds)})" for (name, total), seeds in lacking.items()
    )
    return [f"Runs: `toy/toy.csv`. Still missing {count} of {len(runs)} runs: {groups}.", ""]


def _render_table2(request: PaperRequest, csv_rows: list) -> list[str]:
    rows = _toy_rows(request)
    paper = {
        (int(row["total_inducing"]), int(row["layers"])): (
            float(row["error_mean"]),
            float(row["error_std"]),
        )
        for row in paper_numbers("table2")
    }
    errors: dict = defaultdict(list)
    for row in rows:
        errors[int(row["total_inducing"]), int(row["layers"])].append(100 * row["error_rate"])
    names = {1: "SGP-AVI", 2: "AVDGP-2L", 3: "AVDGP-3L", 4: "AVDGP-4L"}
    lines = _header(request, request.run_seeds) + _toy_missing(request, rows)
    lines += [
        "Each cell: ours, mean ± std over the runs (their number in brackets), then the "
        "paper's (5 runs, 40000 steps).",
        "",
        "| \\|M\\| | " + " | ".join(names.values()) + " |",
        "|---:|" + "---:|" * 4,
    ]
    for total in (16, 32, 64, 128):
        cells = []
        for layers in (1, 2, 3, 4):
            ours = errors.get((total, layers))
            stats = _mean_std(ours) if ours else None
            theirs = paper[total, layers]
            if stats is None:
                text = "–"
            elif stats[2] == 1:
                text = f"{stats[0]:.2f} (1)"
            else:
                text = f"{stats[0]:.2f} ± {stats[1]:.2f} ({stats[2]})"
            cells.append(f"{text} / {theirs[0]:.2f} ± {theirs[1]:.2f}")
            csv_rows.append(
                _csv_row("table2", "error_rate_percent", f"M={total}", names[layers], stats, theirs)
            )
        lines.append(f"| {total} | " + " | ".join(cells) + " |")
    return lines + [""]


def _render_ablation(request: PaperRequest, csv_rows: list) -> list[str]:
    from .toy_grid import ABLATION_DEPTHS, ablation_run, inducing_file

    rows = _toy_rows(request)
    names = ["affine"] + [f"MLP-{depth}" for depth in ABLATION_DEPTHS]
    errors = {name: [100 * r["error_rate"] for r in rows if r["name"] == name] for name in names}
    lines = _header(request, request.run_seeds) + _toy_missing(request, rows)
    lines += [
        "Shallow models with M = 8 amortized inducing points: IDSGP's single MLP with 1-4 hidden "
        "layers, and the paper's affine map (SGP-AVI). The paper shows this as a figure only "
        "(no numbers to set beside ours).",
        "",
        "| inference | runs | test error (%) per run | mean ± std |",
        "|---|---:|---|---:|",
    ]
    for name in names:
        stats = _mean_std(errors[name]) if errors[name] else None
        runs = ", ".join(f"{e:.2f}" for e in errors[name]) or "–"
        lines.append(f"| {name} | {len(errors[name])} | {runs} | {_cell(stats, 2)} |")
        csv_rows.append(_csv_row(request.table, "error_rate_percent", "toy", name, stats, None))
    present = [name for name in names if errors[name]]
    if present:
        path = plots.plot_runs(
            {name: errors[name] for name in present},
            request.out / "inference_ablation.png",
            title="Toy test error rate (%) per run; bar: mean ± std",
        )
        lines += ["", f"![test error per run]({path.name})"]
        best = {}
        settings = request.toy_settings
        for name in present:
            seed = int(
                min((r for r in rows if r["name"] == name), key=lambda r: r["error_rate"])["seed"]
            )
            depth = 2 if name == "affine" else int(name.split("-")[1])
            run = ablation_run("affine" if name == "affine" else "mlp", depth, seed, settings)
            file = inducing_file(request.out / "toy", run, settings)
            if file.exists():
                best[f"{name} (seed {seed})"] = np.load(file)
        if best:
            path = plots.plot_inducing_points(
                QUERIES, best, request.out / "inference_ablation_inducing.png"
            )
            lines += [
                "",
                "Inducing points of 64 query inputs (black) after training, the run of lowest "
                "test error per model; point m of every query has colour m.",
                "",
                f"![inducing points]({path.name})",
            ]
    return lines + [""]


def render(request: PaperRequest) -> Path:
    """Write ``<table>.md`` and ``<table>.csv`` in ``request.out``; returns the Markdown path."""
    csv_rows: list[dict] = []
    if request.table == "table2":
        lines = _render_table2(request, csv_rows)
    elif request.table == "inference-ablation":
        lines = _render_ablation(request, csv_rows)
    else:
        lines = _render_uci(request, csv_rows)
    stem = request.table.replace("-", "_")
    with (request.out / f"{stem}.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(csv_rows)
    path = request.out / f"{stem}.md"
    path.write_text("\n".join(lines).rstrip() + "\n")
    return path
