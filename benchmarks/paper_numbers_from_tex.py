"""Extract the AVDGP paper's Tables 1-5 from its LaTeX source into the CSV files that
``avdgp paper`` prints beside our results (``avdgp/experiments/paper/numbers/``).

The numbers are read, not retyped::

    python benchmarks/paper_numbers_from_tex.py ../shared/paper/amortized-vi-for-deep-gps.tex \
        avdgp/experiments/paper/numbers

Each file has one row per number with its standard deviation over the paper's 5 runs.
"""

from __future__ import annotations

import argparse
import csv
import re
from pathlib import Path

from avdgp.experiments.paper.request import TABLE_MODELS

NUMBER = r"(-?\d+(?:\.\d+)?)"
CELL = re.compile(r"(?:\\tbf\{)?" + NUMBER + r"\}?\s*(?:\\tpm\s*|\\,\()" + NUMBER + r"\)?")
# the models of each table, in the paper's column order
TABLE1_MODELS = TABLE_MODELS["table1"]
TABLE3_MODELS = TABLE_MODELS["table3"]
TABLE4_MODELS = TABLE_MODELS["table4"]
TABLE5_MODELS = TABLE_MODELS["table5"]


def _table(tex: str, label: str) -> str:
    end = tex.index(r"\label{" + label + "}")
    start = tex.rindex(r"\begin{tblr}", 0, end)
    return tex[tex.index("}\n", tex.index("hline", start)) : tex.rindex(r"\end{tblr}", 0, end)]


def _cells(text: str) -> list[tuple[float, float]]:
    return [(float(mean), float(std)) for mean, std in CELL.findall(text)]


def _rows(body: str) -> list[str]:
    return [row.strip() for row in body.split("\\\\") if row.strip()]


def _write(path: Path, header: list[str], rows: list[list]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    print(f"{path}: {len(rows)} numbers")


def table1(tex: str) -> list[list]:
    rows = []
    for row in _rows(_table(tex, "tab1"))[1:]:
        metric = row.split("&")[0].strip().lower()
        for model, (mean, std) in zip(TABLE1_MODELS, _cells(row)):
            rows.append([metric, model, mean, std])
    return rows


def table2(tex: str) -> list[list]:
    rows = []
    for row in _rows(_table(tex, "tab2"))[1:]:
        parts = row.split("&")
        total = int(parts[0].strip())
        for layers, part in enumerate(parts[1:], start=1):
            mean, std = re.findall(NUMBER + r"\\%", part)
            rows.append([total, layers, float(mean), float(std)])
    return rows


def table3(tex: str) -> list[list]:
    rows = []
    for row in _rows(_table(tex, "tab3"))[1:]:
        metric = row.split("&")[0].strip().lower()
        for model, (mean, std) in zip(TABLE3_MODELS, _cells(row)):
            rows.append([metric, model, mean, std])
    return rows


def table4(tex: str) -> list[list]:
    rows = []
    for row in _rows(_table(tex, "tab4"))[2:]:
        parts = [part.strip() for part in row.split("&")]
        dataset, size, dim = parts[0], int(parts[1]), int(parts[2])
        cells = _cells("&".join(parts[3:]))
        for index, model in enumerate(TABLE4_MODELS):
            train, test = cells[index], cells[3 + index]
            rows.append([dataset, size, dim, model, *train, *test])
    return rows


def table5(tex: str) -> list[list]:
    rows = []
    metric = None
    for row in _rows(_table(tex, "tab5"))[2:]:
        parts = [part.strip() for part in row.split("&")]
        if parts[0]:
            metric = parts[0].lower()
        dataset, size, dim = parts[1], int(parts[2]), int(parts[3])
        for model, part in zip(TABLE5_MODELS, parts[4:]):
            bold = r"\tbf" in part
            found = re.findall(NUMBER + r"\}?\s*\\tpm\s*" + NUMBER, part)
            if found:
                mean, std = found[0]
                rows.append([metric, dataset, size, dim, model, float(mean), float(std), bold])
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tex", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    tex = args.tex.read_text()
    args.out.mkdir(parents=True, exist_ok=True)
    _write(args.out / "table1.csv", ["metric", "model", "rank_mean", "rank_std"], table1(tex))
    _write(
        args.out / "table2.csv",
        ["total_inducing", "layers", "error_mean", "error_std"],
        table2(tex),
    )
    _write(args.out / "table3.csv", ["metric", "model", "rank_mean", "rank_std"], table3(tex))
    _write(
        args.out / "table4.csv",
        ["dataset", "n", "d", "model", "train_mean", "train_std", "test_mean", "test_std"],
        table4(tex),
    )
    _write(
        args.out / "table5.csv",
        ["metric", "dataset", "n", "d", "model", "mean", "std", "bold"],
        table5(tex),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
