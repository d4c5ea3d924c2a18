"""The format the paper's tables share: the paper's numbers (data in ``numbers/table*.csv``,
read from its LaTeX source by ``benchmarks/paper_numbers_from_tex.py``), mean and spread of our
runs, CSV rows and the Markdown header of a table."""

from __future__ import annotations

import csv
from importlib import resources
from typing import Optional

import numpy as np

from avdgp.experiments.paper.request import PaperRequest

__all__ = [
    "CSV_COLUMNS",
    "TITLES",
    "csv_row",
    "format_stats",
    "header",
    "mean_std",
    "output_stem",
    "paper_numbers",
]

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


def paper_numbers(table: str) -> list[dict]:
    """The paper's numbers of ``table`` (``"table1"`` ... ``"table5"``) as CSV rows."""
    text = resources.files(__package__).joinpath("numbers", f"{table}.csv").read_text()
    return list(csv.DictReader(text.splitlines()))


def mean_std(values) -> tuple[float, float, int]:
    """``(mean, population std, count)`` of per-run values."""
    values = [float(v) for v in values]
    return float(np.mean(values)), float(np.std(values)), len(values)


def format_stats(stats: Optional[tuple], digits: int = 3) -> str:
    """``mean ± std``, ``mean (1 run)`` or ``–`` for :func:`mean_std`'s triple or ``None``."""
    if stats is None:
        return "–"
    mean, std, count = stats
    if count == 1:
        return f"{mean:.{digits}f} (1 run)"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def csv_row(table, metric, dataset, model, stats, paper) -> dict:
    """One row of a table's CSV (:data:`CSV_COLUMNS`): ours and the paper's ``(mean, std)``."""
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


def header(request: PaperRequest, seeds) -> list[str]:
    """The title, the budget and preset in words, the seeds and the command to rewrite it."""
    budget = request.protocol
    command = f"avdgp paper {request.table} --budget {budget.name} --out {request.out}"
    for option, value in (
        ("--preset", None if request.preset == "default" else request.preset),
        ("--seeds", request.seeds),
        ("--sizes", request.sizes),
        ("--epochs", request.epochs if request.capped else None),
    ):
        if value:
            shown = value if isinstance(value, (str, int)) else ",".join(map(str, value))
            command += f" {option} {shown}"
    return [
        f"# {TITLES[request.table]}",
        "",
        f"Budget **{budget.name}**: {budget.description}. Preset `{request.preset}`; seeds "
        f"{', '.join(map(str, seeds))}. Regenerate: `{command} --render-only`.",
        "",
    ]


# ------------------------------------------------------------------------------- UCI tables
def output_stem(request: PaperRequest) -> str:
    """``table2``, or ``table2_full`` / ``table5_paper``: each budget and preset its own files.

    A full-budget render must not overwrite the reduced table beside it (and vice versa).
    """
    stem = request.table.replace("-", "_")
    if request.budget != "reduced":
        stem += f"_{request.budget}"
    if request.preset != "default":
        stem += f"_{request.preset}"
    if request.capped and request.table in ("table1", "table3", "table5"):
        stem += f"_e{request.epochs}"
    return stem
