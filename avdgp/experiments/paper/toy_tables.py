"""The toy tables of ``avdgp paper``: Table 2 (test error by ``|M|`` and depth) and the
inference-function ablation (a figure in the paper: error per run and the inducing points)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from avdgp.experiments import plots
from avdgp.experiments.paper.request import PaperRequest, toy_runs
from avdgp.experiments.paper.table_format import (
    csv_row,
    format_stats,
    header,
    mean_std,
    output_stem,
    paper_numbers,
)
from avdgp.experiments.paper.toy_grid import (
    ABLATION_DEPTHS,
    QUERIES,
    ablation_run,
    inducing_file,
    read_toy_rows,
)

__all__ = ["render_ablation", "render_table2"]

TOY_EXPERIMENT = {"table2": "table2", "inference-ablation": "ablation"}


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


def render_table2(request: PaperRequest, csv_rows: list) -> list[str]:
    """Table 2's Markdown lines (ours / the paper's per cell); appends its CSV rows."""
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
    lines = header(request, request.run_seeds) + _toy_missing(request, rows)
    lines += [
        "Each cell: ours, mean ± std over the runs (their number in brackets), then the "
        "paper's (5 runs, 40000 steps).",
        "",
        "| \\|M\\| | " + " | ".join(names.values()) + " |",
        "|---:|" + "---:|" * 4,
    ]
    for total in request.toy_sizes:
        cells = []
        for layers in (1, 2, 3, 4):
            ours = errors.get((total, layers))
            stats = mean_std(ours) if ours else None
            theirs = paper[total, layers]
            if stats is None:
                text = "–"
            elif stats[2] == 1:
                text = f"{stats[0]:.2f} (1)"
            else:
                text = f"{stats[0]:.2f} ± {stats[1]:.2f} ({stats[2]})"
            cells.append(f"{text} / {theirs[0]:.2f} ± {theirs[1]:.2f}")
            csv_rows.append(
                csv_row("table2", "error_rate_percent", f"M={total}", names[layers], stats, theirs)
            )
        lines.append(f"| {total} | " + " | ".join(cells) + " |")
    return lines + [""]


def render_ablation(request: PaperRequest, csv_rows: list) -> list[str]:
    """The ablation's Markdown lines and figures; appends its CSV rows."""
    rows = _toy_rows(request)
    names = ["affine"] + [f"MLP-{depth}" for depth in ABLATION_DEPTHS]
    errors = {name: [100 * r["error_rate"] for r in rows if r["name"] == name] for name in names}
    lines = header(request, request.run_seeds) + _toy_missing(request, rows)
    lines += [
        "Shallow models with M = 8 amortized inducing points: IDSGP's single MLP with 1-4 hidden "
        "layers, and the paper's affine map (SGP-AVI). The paper shows this as a figure only "
        "(no numbers to set beside ours).",
        "",
        "| inference | runs | test error (%) per run | mean ± std |",
        "|---|---:|---|---:|",
    ]
    for name in names:
        stats = mean_std(errors[name]) if errors[name] else None
        runs = ", ".join(f"{e:.2f}" for e in errors[name]) or "–"
        lines.append(f"| {name} | {len(errors[name])} | {runs} | {format_stats(stats, 2)} |")
        csv_rows.append(csv_row(request.table, "error_rate_percent", "toy", name, stats, None))
    present = [name for name in names if errors[name]]
    if present:
        path = plots.plot_runs(
            {name: errors[name] for name in present},
            request.out / f"{output_stem(request)}.png",
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
                QUERIES, best, request.out / f"{output_stem(request)}_inducing.png"
            )
            lines += [
                "",
                "Inducing points of 64 query inputs (black) after training, the run of lowest "
                "test error per model; point m of every query has colour m.",
                "",
                f"![inducing points]({path.name})",
            ]
    return lines + [""]
