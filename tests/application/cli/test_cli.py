"""End-to-end tests of the ``avdgp`` command line (``fit``, ``demo``, ``bench``) on tiny data.

Most cases call :func:`avdgp.cli.main` in-process (TensorFlow is imported once); a few go
through a real ``python -m avdgp`` / ``avdgp`` subprocess to check exit statuses and that
no traceback reaches the user. Training runs use one epoch, a handful of rows, 4 inducing points
and S = 4: most of their cost is tracing the TF graphs, not the optimisation.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import gpflow
import numpy as np
import pytest
from helpers import UCI_ROOT, assert_one_line_cli_error

from avdgp.cli import main
from avdgp.experiments.bench import run as bench

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

#: One epoch of tiny models: every ``fit`` below takes a few seconds, mostly graph tracing.
TINY = ["--epochs", "1", "--batch-size", "50", "--points", "4", "--quiet"]
SHALLOW = ["--inducing", "4"]
DEEP = ["--layers", "2", "--hidden-dims", "2", "--inducing", "4,4"]

RECORD_KEYS = {
    "model",
    "rule",
    "dataset",
    "n_train",
    "n_val",
    "n_test",
    "dim",
    "test",
    "train_seconds_per_epoch",
    "predict_seconds",
    "epochs",
    "seed",
}
REGRESSION_METRICS = {"nll", "rmse", "crps"}
CLASSIFICATION_METRICS = {"nll", "error_rate", "brier"}


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def cli(capsys, *args) -> tuple[int, str, str]:
    """Run ``avdgp ARGS`` in-process; returns ``(exit status, stdout, stderr)``."""
    status = main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def write_table(path: Path, rows, header=None, delimiter: str = ",") -> Path:
    """Write ``rows`` (numbers or strings) as a CSV file, gzip-compressed if ``path`` ends .gz."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter, lineterminator="\n")
    if header is not None:
        writer.writerow(header)
    writer.writerows([[repr(v) if isinstance(v, float) else v for v in row] for row in rows])
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8", newline="") as handle:
            handle.write(buffer.getvalue())
    else:
        path.write_text(buffer.getvalue(), encoding="utf-8", newline="")
    return path


def regression_data(rng: np.random.Generator, rows: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Smooth targets ``[rows]`` of uniform inputs ``[rows, dim]`` plus a little noise."""
    x = rng.uniform(-2.0, 2.0, size=(rows, dim))
    y = np.sin(x[:, 0]) + 0.5 * x[:, 1:].sum(axis=1) + 0.1 * rng.standard_normal(rows)
    return x, y


def write_uci_folder(folder: Path, rng: np.random.Generator, rows: int, dim: int = 2) -> np.ndarray:
    """A UCI-layout folder (``data.csv.gz``, ``test_mask.csv.gz`` with 2 splits); the masks."""
    folder.mkdir(parents=True)
    x, y = regression_data(rng, rows, dim)
    write_table(folder / "data.csv.gz", np.column_stack([x, y]).tolist())
    masks = np.zeros((rows, 2), dtype=int)
    order = rng.permutation(rows)
    masks[order[: rows // 10], 0] = 1
    masks[order[rows // 10 : 2 * (rows // 10)], 1] = 1
    write_table(folder / "test_mask.csv.gz", masks.tolist())
    return masks.astype(bool)


def strict_json(text: str) -> dict:
    """Parse JSON, refusing the non-standard ``NaN`` / ``Infinity`` that ``json.dumps`` allows."""

    def reject(constant):
        raise AssertionError(f"non-finite number {constant} in the JSON output")

    return json.loads(text, parse_constant=reject)


def assert_png(path: Path, min_side: int = 100) -> None:
    """``path`` is a PNG that decodes to an RGB(A) image of a sensible size."""
    from matplotlib import image

    assert path.is_file(), path
    assert path.read_bytes()[:8] == PNG_MAGIC, path
    pixels = image.imread(path)
    assert pixels.ndim == 3 and pixels.shape[2] in (3, 4), pixels.shape
    assert min(pixels.shape[:2]) >= min_side, pixels.shape
    assert np.isfinite(pixels).all() and pixels.std() > 0  # not a blank canvas


def check_record(
    record: dict,
    *,
    model: str,
    rule: Optional[str],
    task: str,
    rows: int,
    dim: int,
    dataset: str,
    n_test: Optional[int] = None,
    epochs: int = 1,
    seed: int = 0,
) -> None:
    """The result record of ``avdgp fit`` has every key, and values that make sense."""
    assert RECORD_KEYS <= record.keys(), RECORD_KEYS - record.keys()
    assert record["model"] == model
    assert record["rule"] == rule
    assert record["task"] == task
    assert record["dataset"] == dataset
    assert record["dim"] == dim
    assert record["epochs"] == epochs
    assert record["seed"] == seed
    assert record["n_train"] + record["n_val"] + record["n_test"] == rows
    assert record["n_train"] >= 2 and record["n_test"] >= 1 and record["n_val"] >= 0
    if n_test is not None:
        assert record["n_test"] == n_test
    for key in ("train_seconds_per_epoch", "predict_seconds", "first_epoch_seconds"):
        assert math.isfinite(record[key]) and record[key] >= 0.0, key
    assert record["train_seconds_per_epoch"] > 0.0
    assert math.isfinite(record["final_train_loss"])

    test = record["test"]
    assert all(math.isfinite(value) for value in test.values()), test
    if task == "regression":
        assert REGRESSION_METRICS <= test.keys()
        assert 0.0 < test["rmse"] < 10.0  # standardised units: predicting 0 scores about 1
        assert test["crps"] > 0.0
        assert 0.0 <= test["coverage_95"] <= 1.0
        original = record["test_original_units"]
        assert REGRESSION_METRICS <= original.keys()
        assert all(math.isfinite(value) for value in original.values())
        assert original["rmse"] > 0.0 and original["crps"] > 0.0
    else:
        assert CLASSIFICATION_METRICS <= test.keys()
        assert 0.0 <= test["error_rate"] <= 1.0
        wrong = test["error_rate"] * record["n_test"]
        assert abs(wrong - round(wrong)) < 1e-6  # a count of misclassified test points
        assert 0.0 <= test["brier"] <= 1.0
        assert test["nll"] > 0.0
        assert record["test_original_units"] is None


# ---------------------------------------------------------------------------------------------
# fit: every model, every input format
# ---------------------------------------------------------------------------------------------


@dataclass
class FitCase:
    """Data for one ``fit`` run and what its record must say."""

    data: Path
    args: list[str]
    rows: int
    dim: int
    dataset: str
    task: str = "regression"
    n_test: Optional[int] = None
    check: Optional[Callable[[dict], None]] = None
    #: the line that says what fit read as target and inputs
    columns_line: Optional[str] = None


def _csv_without_header(tmp: Path, rng) -> FitCase:
    x, y = regression_data(rng, 150, 3)
    path = write_table(tmp / "plain.csv", np.column_stack([x, y]).tolist())
    line = "  data: target the last column, inputs 3 columns"
    return FitCase(path, [], rows=150, dim=3, dataset="plain", columns_line=line)


def _csv_gz_with_header_and_named_target(tmp: Path, rng) -> FitCase:
    x, y = regression_data(rng, 140, 2)
    price = 100.0 * y + 500.0  # target between the inputs, on its own scale
    rows = np.column_stack([x[:, 0], price, x[:, 1]]).tolist()
    path = write_table(tmp / "houses.csv.gz", rows, header=["width", "price", "height"])

    def check(record: dict) -> None:
        # Original-unit scores are standardised ones times the training targets' std: the
        # target must be 'price' (std ~ 100), not an input (std ~ 1.2).
        ratio = record["test_original_units"]["rmse"] / record["test"]["rmse"]
        assert 0.5 * price.std() < ratio < 2.0 * price.std()

    line = "  data: target 'price', inputs width, height"
    return FitCase(
        path,
        ["--target", "price"],
        rows=140,
        dim=2,
        dataset="houses",
        check=check,
        columns_line=line,
    )


def _npz_with_save(tmp: Path, rng) -> FitCase:
    x, y = regression_data(rng, 130, 3)
    path = tmp / "arrays.npz"
    np.savez(path, X=x, y=y)
    save = tmp / "saved"

    def check(record: dict) -> None:
        info = strict_json((save / "run.json").read_text())
        assert info["result"]["test"] == record["test"]
        assert info["result"]["n_train"] == record["n_train"]
        assert info["spec"]["model"] == "avdgp" and info["spec"]["rule"] == "ar2p"
        assert len(info["standardizer"]["x_mean"]) == 3
        assert (save / "weights.index").is_file()
        assert list(save.glob("weights.data-*"))
        if info["keras_file"] is not None:
            assert (save / info["keras_file"]).is_file()

    return FitCase(path, ["--save", str(save)], rows=130, dim=3, dataset="arrays", check=check)


def _uci_folder_split(tmp: Path, rng) -> FitCase:
    masks = write_uci_folder(tmp / "tiny_uci", rng, rows=120)

    def check(record: dict) -> None:
        assert record["layers"] == 3 and record["dims"] == [16, 4, 1]  # default widths
        assert record["num_inducing"] == [4, 4, 4]

    return FitCase(
        tmp / "tiny_uci",
        ["--split", "1"],
        rows=120,
        dim=2,
        dataset="tiny_uci",
        n_test=int(masks[:, 1].sum()),
        check=check,
    )


def _binary_labels_csv(tmp: Path, rng) -> FitCase:
    x = rng.uniform(-1.0, 1.0, size=(150, 2))
    labels = np.where(x[:, 0] * x[:, 1] > 0, 1.0, -1.0)  # {-1, 1} labels
    path = write_table(tmp / "signs.csv", np.column_stack([x, labels]).tolist())
    return FitCase(
        path, ["--task", "classification"], rows=150, dim=2, dataset="signs", task="classification"
    )


def _float32_csv(tmp: Path, rng) -> FitCase:
    x, y = regression_data(rng, 120, 2)
    path = write_table(tmp / "single.csv", np.column_stack([x, y]).tolist())

    def check(record: dict) -> None:
        assert record["dtype"] == "float32"
        assert gpflow.default_float() == np.float64  # the CLI restores GPflow's default

    return FitCase(path, ["--dtype", "float32"], rows=120, dim=2, dataset="single", check=check)


def _labels_one_two_semicolons(tmp: Path, rng) -> FitCase:
    x = rng.uniform(-1.0, 1.0, size=(140, 3))
    labels = np.where(x[:, 0] + x[:, 2] > 0, 2, 1)  # {1, 2} labels
    rows = [[*map(float, row), int(label)] for row, label in zip(x, labels)]
    path = write_table(tmp / "twos.csv", rows, header=["a", "b", "c", "y"], delimiter=";")
    return FitCase(
        path, ["--task", "classification"], rows=140, dim=3, dataset="twos", task="classification"
    )


def _energy_split(tmp: Path, rng) -> FitCase:
    folder = UCI_ROOT / "energy"
    if not (folder / "data.csv.gz").is_file():
        pytest.skip(f"benchmark data not found at {folder}")
    masks = np.loadtxt(folder / "test_mask.csv.gz", delimiter=",")
    return FitCase(
        folder,
        ["--split", "0"],
        rows=768,
        dim=8,
        dataset="energy",
        n_test=int(masks[:, 0].sum()),
    )


def _tab_csv_with_header(tmp: Path, rng) -> FitCase:
    x, y = regression_data(rng, 110, 2)
    path = write_table(
        tmp / "tabbed.csv", np.column_stack([x, y]).tolist(), header=["u", "v", "t"], delimiter="\t"
    )
    return FitCase(path, [], rows=110, dim=2, dataset="tabbed")


# All in the slow suite: by default, test_cli_export's fixtures run `avdgp fit --save` for a deep
# AVDGP regression and classification, and the zoo's models train in test_experiments.
SLOW = pytest.mark.slow
FIT_CASES = [
    pytest.param("avdgp", "ar1", DEEP, _csv_without_header, id="avdgp-ar1-csv", marks=SLOW),
    pytest.param(
        "avdgp", "ar2", DEEP, _csv_gz_with_header_and_named_target, id="avdgp-ar2-csvgz", marks=SLOW
    ),
    pytest.param("avdgp", "ar2p", DEEP, _npz_with_save, id="avdgp-ar2p-npz-save", marks=SLOW),
    pytest.param(
        "avdgp",
        "ar2pp",
        ["--inducing", "4,4,4"],
        _uci_folder_split,
        id="avdgp-ar2pp-uci",
        marks=SLOW,
    ),
    pytest.param(
        "sgp-avi", None, SHALLOW, _binary_labels_csv, id="sgp-avi-classification", marks=SLOW
    ),
    pytest.param("idsgp", None, SHALLOW, _float32_csv, id="idsgp-float32", marks=SLOW),
    pytest.param(
        "svgp", None, SHALLOW, _labels_one_two_semicolons, id="svgp-classification", marks=SLOW
    ),
    pytest.param("dsdgp", None, DEEP, _energy_split, id="dsdgp-energy", marks=SLOW),
    pytest.param("dspp", None, DEEP, _tab_csv_with_header, id="dspp-tsv", marks=SLOW),
    pytest.param(
        "solve-gp", None, ["--inducing", "6,5"], _csv_without_header, id="solve-gp", marks=SLOW
    ),
]


@pytest.mark.parametrize("model, rule, sizes, make_case", FIT_CASES)
def test_fit_models_and_formats(capsys, tmp_path, rng, model, rule, sizes, make_case):
    case = make_case(tmp_path, rng)
    out_json = tmp_path / "out" / "record.json"  # the parent folder is created
    rule_args = ["--rule", rule] if rule else []
    status, out, err = cli(
        capsys,
        "fit",
        case.data,
        "--model",
        model,
        *rule_args,
        *sizes,
        *TINY,
        *case.args,
        "--json",
        out_json,
    )
    assert status == 0, err
    assert "Traceback" not in err
    record = strict_json(out_json.read_text())
    check_record(
        record,
        model=model,
        rule=rule,
        task=case.task,
        rows=case.rows,
        dim=case.dim,
        dataset=case.dataset,
        n_test=case.n_test,
    )
    label = f"avdgp-{rule}" if rule else model
    assert record["label"] == label
    assert out.startswith(f"{label} on {case.dataset} (n_train {record['n_train']}")
    if case.task == "classification":
        assert "  test: nll " in out.splitlines()[1] and "units" not in out
    else:
        assert out.splitlines()[1].startswith("  test (standardised units): nll ")
    kept = (
        f"  kept the last epoch, {record['stopped_epoch']}"
        if record["best_epoch"] is None
        else f"  kept epoch {record['best_epoch']} of {record['stopped_epoch']}"
    )
    assert any(line.startswith(kept) for line in out.splitlines()), out
    if case.columns_line is not None:
        assert case.columns_line in out.splitlines(), out
    if case.check is not None:
        case.check(record)


@pytest.mark.parametrize("named", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_fit_says_what_it_reads_before_the_first_epoch(capsys, tmp_path, rng, named):
    """The target, the inputs and the flag that picks another target, on stderr before any
    epoch (issue 50: a wrong target was said only in the last line, minutes later)."""
    case = (_csv_gz_with_header_and_named_target if named else _csv_without_header)(tmp_path, rng)
    tiny = [arg for arg in TINY if arg != "--quiet"]
    status, _, err = cli(capsys, "fit", case.data, *SHALLOW, *tiny, *case.args)
    assert status == 0, err
    lines = err.splitlines()
    first_epoch = next(i for i, line in enumerate(lines) if "epoch 1/" in line)
    early = f"avdgp fit: {case.rows} rows; {case.columns_line.strip()}"
    if not named:
        early += " (the target is the last column; --target NAME picks another)"
    assert early in lines[:first_epoch], err


@pytest.mark.slow
def test_fit_with_an_input_guard_saves_it_with_the_model(capsys, tmp_path, rng):
    import gpflux_avdgp

    x, y = regression_data(rng, 120, 2)
    data = write_table(tmp_path / "d.csv", np.column_stack([x, y]).tolist())
    out_json, saved = tmp_path / "record.json", tmp_path / "run"
    args = ("fit", data, *DEEP, *TINY, "--guard", "--save", saved, "--json", out_json)
    status, out, err = cli(capsys, *args)
    assert status == 0, err
    assert strict_json(out_json.read_text())["label"] == "avdgp-ar2p:guard"
    model = gpflux_avdgp.load_model(next(saved.glob("*.keras")))
    assert model.guard is not None and model.guard.placed
    status, out, err = cli(capsys, "fit", data, "--model", "svgp", "--guard", "--quiet")
    assert_one_line_cli_error(status, out, err, "--guard: an input guard is for --model avdgp")


@pytest.mark.slow
def test_fit_same_seed_gives_identical_metrics(capsys, tmp_path, rng):
    x, y = regression_data(rng, 120, 2)
    data = write_table(tmp_path / "repeat.csv", np.column_stack([x, y]).tolist())
    records = []
    for name in ("first", "second"):
        path = tmp_path / f"{name}.json"
        status, _, err = cli(
            capsys, "fit", data, "--rule", "ar2p", *DEEP, *TINY, "--seed", "3", "--json", path
        )
        assert status == 0, err
        records.append(strict_json(path.read_text()))
    first, second = records
    assert first["seed"] == second["seed"] == 3
    assert first["test"] == second["test"]
    assert first["test_original_units"] == second["test_original_units"]
    assert first["val"] == second["val"]
    assert first["final_train_loss"] == second["final_train_loss"]


@pytest.mark.slow
def test_fit_steps_per_execution_gives_the_same_run(capsys, tmp_path, rng):
    """``--steps-per-execution 4`` (3 steps per epoch here: one partial call) changes nothing
    in the record but the setting itself, up to floating-point rounding."""
    x, y = regression_data(rng, 150, 2)
    data = write_table(tmp_path / "spe.csv", np.column_stack([x, y]).tolist())
    records = {}
    for steps in ("1", "4"):
        path = tmp_path / f"spe{steps}.json"
        status, _, err = cli(
            capsys, "fit", data, "--rule", "ar2", *DEEP, *TINY, "--epochs", "2",
            "--steps-per-execution", steps, "--json", path,
        )  # fmt: skip
        assert status == 0, err
        records[steps] = strict_json(path.read_text())
    assert records["4"]["steps_per_execution"] == 4
    assert records["1"]["steps_per_execution"] == 1
    for key in ("test", "test_original_units", "val"):  # equal up to rounding
        assert records["4"][key] == pytest.approx(records["1"][key], rel=1e-9)
    final_losses = records["4"]["final_train_loss"], records["1"]["final_train_loss"]
    assert final_losses[0] == pytest.approx(final_losses[1], rel=1e-6)  # Keras: a float32 mean


# default suite: test_main_maps_each_error_type_to_its_exit_status, test_resume's NaN tests
@pytest.mark.slow
def test_fit_diverged_training_exits_3(capsys, tmp_path, rng):
    x, y = regression_data(rng, 120, 2)
    data = write_table(tmp_path / "wild.csv", np.column_stack([x, y]).tolist())
    status, out, err = cli(capsys, "fit", data, *DEEP, *TINY, "--learning-rate", "1e30")
    assert_one_line_cli_error(status, out, err, "avdgp fit: training diverged:", code=3)
    assert gpflow.default_float() == np.float64


# ---------------------------------------------------------------------------------------------
# demo
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_demo_writes_figures_and_error_rates(capsys, tmp_path):
    out_dir = tmp_path / "demo"
    status, out, err = cli(
        capsys,
        "demo",
        "--epochs",
        "1",
        "--rows",
        "300",
        "--total-inducing",
        "8",
        "--out",
        out_dir,
    )
    assert status == 0, err
    # progress on stderr, results on stdout
    assert "Training SGP-AVI" in err and "[AVDGP-3L] epoch 1/1" in err
    assert "Test error rates" not in err and "epoch" not in out
    assert (
        "Test error rates (paper, Table 2" in out
        and f"Figures and results.json in {out_dir}/" in out
    )
    for title in ("SGP-AVI", "AVDGP-2L", "AVDGP-3L"):
        assert f"{title}: test error rate " in out
    for name in ("training_data.png", "predictive_probability.png", "inducing_points.png"):
        assert_png(out_dir / name)
    summary = strict_json((out_dir / "results.json").read_text())
    assert summary["settings"]["epochs"] == 1 and summary["settings"]["num_rows"] == 300
    assert 0 < summary["n_train"] + summary["n_test"] <= 300
    results = summary["results"]
    assert set(results) == {"SGP-AVI", "AVDGP-2L", "AVDGP-3L"}
    for title, scores in results.items():
        assert 0.0 <= scores["error_rate"] <= 1.0, title
        assert math.isfinite(scores["nll"]) and 0.0 <= scores["brier"] <= 1.0, title
        assert sum(scores["num_inducing"]) == 8, title
    assert sorted(Path(p).name for p in summary["figures"]) == [
        "inducing_points.png",
        "learning_curves.png",
        "predictive_probability.png",
        "training_data.png",
    ]
    assert_png(out_dir / "learning_curves.png")
    for title, scores in results.items():  # the curve ends at the last step with the result
        steps, errors = zip(*scores["test_error_curve"])
        assert list(steps) == sorted(steps) and steps[-1] == 2  # 150 training rows, batch 100
        assert errors[-1] == pytest.approx(100 * scores["error_rate"]), title
    assert summary["settings"]["preset"] == "default"


# ---------------------------------------------------------------------------------------------
# bench
# ---------------------------------------------------------------------------------------------


def _results(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.slow
def test_bench_tables_plots_and_resuming(capsys, tmp_path, rng):
    root = tmp_path / "uci"
    sizes = {"alpha": 60, "beta": 50}
    for name, rows in sizes.items():
        write_uci_folder(root / name, rng, rows=rows)
    out = tmp_path / "bench"
    models = ["avdgp-ar2p", "svgp"]
    command = [
        "bench",
        "--data-root",
        root,
        "--datasets",
        "alpha,beta",
        "--models",
        ",".join(models),
        "--epochs",
        "1",
        "--out",
        out,
    ]

    status, stdout, err = cli(capsys, *command, "--seeds", "0,1")
    assert status == 0, err
    rows = _results(out / "results.csv")
    assert len(rows) == 2 * 2 * 2
    assert {(r["dataset"], r["model"], r["seed"]) for r in rows} == {
        (d, m, s) for d in sizes for m in models for s in ("0", "1")
    }
    for row in rows:
        assert row["status"] == "ok" and row["epochs"] == "1" and row["dim"] == "2"
        n_val = math.floor(0.1 * sizes[row["dataset"]] + 0.5)  # 8:1:1 split
        assert int(row["n_train"]) + int(row["n_test"]) + n_val == sizes[row["dataset"]]
        for key in ("nll", "rmse", "crps", "nll_original", "rmse_original", "crps_original"):
            assert math.isfinite(float(row[key])), key
        assert float(row["rmse"]) > 0 and float(row["crps"]) > 0
        assert float(row["train_seconds_per_epoch"]) > 0
        assert row["preset"] == "default" and row["best_epoch"] == row["stopped_epoch"] == "1"
    curves = bench.read_curves(out / "curves.jsonl")
    assert [(c["dataset"], c["model"], c["seed"]) for c in curves] == [
        (r["dataset"], r["model"], int(r["seed"])) for r in rows
    ]
    for curve, row in zip(curves, rows):
        assert len(curve["epoch_seconds"]) == 1 and curve["epoch_seconds"][0] > 0
        assert curve["val_nll_curve"][0][0] == curve["test_nll_curve"][0][0] == 1
        assert curve["test_nll_curve"][0][1] == pytest.approx(float(row["nll"]), rel=1e-5)

    tables = (out / "tables.md").read_text()
    assert tables in stdout
    for title in ("## Test NLL", "## Test RMSE", "## Test CRPS", "## Average ranks"):
        assert title in tables
    assert "| data set | N | D | avdgp-ar2p | svgp |" in tables
    assert "| alpha | 60 | 2 |" in tables and "| beta | 50 | 2 |" in tables  # N: all rows
    rank_rows = [line for line in tables.splitlines() if re.match(r"\| (NLL|RMSE|CRPS) \|", line)]
    assert [line.split("|")[1].strip() for line in rank_rows] == ["NLL", "RMSE", "CRPS"]
    for line in rank_rows:
        means = [float(cell.split("(")[0]) for cell in line.strip("|").split("|")[1:]]
        assert all(1.0 <= m <= 2.0 for m in means) and sum(means) == pytest.approx(3.0)
    for name in ("nll", "rmse", "crps", "time_alpha", "time_beta"):
        assert_png(out / f"{name}.png")

    # Rerunning the same command redoes nothing.
    before = (out / "results.csv").read_bytes()
    status, _, err = cli(capsys, *command, "--seeds", "0,1")
    assert status == 0, err
    assert (out / "results.csv").read_bytes() == before
    assert err.count("done, skipped") == 8
    assert "epoch 1/1" not in err

    # A new seed runs only its own 2 x 2 runs, appended after the old rows.
    status, _, err = cli(capsys, *command, "--seeds", "0,1,2")
    assert status == 0, err
    after = (out / "results.csv").read_bytes()
    assert after.startswith(before)
    new_rows = _results(out / "results.csv")[8:]
    assert {(r["dataset"], r["model"], r["seed"]) for r in new_rows} == {
        (d, m, "2") for d in sizes for m in models
    }
    assert err.count("done, skipped") == 8
    assert err.count("epoch 1/1") == 4
    assert "Runs: 12 finished" in (out / "tables.md").read_text()


# ---------------------------------------------------------------------------------------------
# Bad input: one line on stderr, exit status 2, no traceback
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory) -> Path:
    """A folder of good and broken inputs for the error cases."""
    folder = tmp_path_factory.mktemp("bad_input")
    rng = np.random.default_rng(7)
    x, y = regression_data(rng, 40, 2)
    good = np.column_stack([x, y]).tolist()
    write_table(folder / "good.csv", good)
    write_table(folder / "header.csv", good, header=["a", "b", "target"])
    write_table(folder / "y_first.csv", good, header=["y", "width", "altitude"])
    text_cell = [list(row) for row in good]
    text_cell[4][1] = "abc"
    write_table(folder / "text_cell.csv", text_cell)
    colours = [[row[0], ["red", "blue"][i % 2], row[2]] for i, row in enumerate(good)]
    write_table(folder / "text_column.csv", colours, header=["size", "colour", "price"])
    with_nan = [list(row) for row in good]
    with_nan[9][0] = "nan"
    write_table(folder / "nan.csv", with_nan)
    with_inf = [list(row) for row in good]
    with_inf[2][2] = "inf"
    with_inf[3][2] = "-inf"
    write_table(folder / "inf.csv", with_inf)
    write_table(folder / "few.csv", good[:5])
    write_table(folder / "ragged.csv", good[:3] + [good[3][:2]] + good[4:])
    write_table(folder / "one_column.csv", [[row[0]] for row in good])
    (folder / "empty.csv").write_text("")
    (folder / "data.txt").write_text("1,2,3\n" * 20)
    np.savez(folder / "no_y.npz", X=x)
    write_uci_folder(folder / "uci" / "tiny", rng, rows=40)
    return folder


BAD_INPUT = [
    ("missing-file", ["fit", "{d}/nope.csv"], "nope.csv: no such file or folder"),
    ("missing-folder", ["fit", "{d}/no_folder/"], "no such file or folder"),
    ("non-numeric-cell", ["fit", "{d}/text_cell.csv"], "row 5, column 2 ('abc') is not a number"),
    ("non-numeric-column", ["fit", "{d}/text_column.csv"], "row 2, column 2 ('red')"),
    ("nan", ["fit", "{d}/nan.csv"], "1 value is NaN or infinite (first at row 10, column 1"),
    ("inf", ["fit", "{d}/inf.csv"], "2 values are NaN or infinite (first at row 3, column 3"),
    ("too-few-rows", ["fit", "{d}/few.csv"], "5 data rows, fewer than the 10 required"),
    ("ragged-row", ["fit", "{d}/ragged.csv"], "row 4 has 2 columns but the first row has 3"),
    ("one-column", ["fit", "{d}/one_column.csv"], "need at least 2"),
    ("empty-file", ["fit", "{d}/empty.csv"], "the file is empty"),
    ("target-index-too-big", ["fit", "{d}/good.csv", "--target", "3"], "out of range"),
    ("target-index-too-small", ["fit", "{d}/good.csv", "--target", "-4"], "out of range"),
    ("target-unknown-name", ["fit", "{d}/header.csv", "--target", "cost"], "unknown target"),
    (
        "target-like-column-passed-over",
        ["fit", "{d}/y_first.csv"],
        "y_first.csv: column 'y' looks like the target, but without --target the last column "
        "'altitude' is; give --target y (or --target altitude to keep it)",
    ),
    ("target-name-no-header", ["fit", "{d}/good.csv", "--target", "cost"], "has no header"),
    ("target-for-npz", ["fit", "{d}/no_y.npz", "--target", "0"], "cannot be chosen for .npz"),
    ("npz-without-y", ["fit", "{d}/no_y.npz"], "missing array 'y'"),
    ("unsupported-extension", ["fit", "{d}/data.txt"], "unsupported file type"),
    ("unknown-option", ["fit", "{d}/good.csv", "--bogus"], "unrecognized arguments: --bogus"),
    ("unknown-model", ["fit", "{d}/good.csv", "--model", "gp"], "invalid choice: 'gp'"),
    ("bad-rule", ["fit", "{d}/good.csv", "--rule", "ar3"], "invalid choice: 'ar3'"),
    ("negative-epochs", ["fit", "{d}/good.csv", "--epochs", "-1"], "positive integer, got '-1'"),
    ("zero-epochs", ["fit", "{d}/good.csv", "--epochs", "0"], "positive integer, got '0'"),
    ("text-epochs", ["fit", "{d}/good.csv", "--epochs", "many"], "positive integer"),
    ("bad-learning-rate", ["fit", "{d}/good.csv", "--learning-rate", "nan"], "positive number"),
    ("bad-fraction", ["fit", "{d}/good.csv", "--test-fraction", "1.5"], "in [0, 1)"),
    (
        "fractions-too-big",
        ["fit", "{d}/good.csv", "--test-fraction", "0.5", "--val-fraction", "0.5"],
        "must be < 1",
    ),
    ("bad-dtype", ["fit", "{d}/good.csv", "--dtype", "float16"], "invalid choice: 'float16'"),
    (
        "zero-steps-per-execution",
        ["fit", "{d}/good.csv", "--steps-per-execution", "0"],
        "--steps-per-execution: expected a positive integer, got '0'",
    ),
    ("bad-task", ["fit", "{d}/good.csv", "--task", "ranking"], "invalid choice: 'ranking'"),
    ("negative-seed", ["fit", "{d}/good.csv", "--seed", "-1"], "seed: expected an integer >= 0"),
    (
        "hidden-dims-vs-layers",
        ["fit", "{d}/good.csv", "--layers", "3", "--hidden-dims", "4"],
        "hidden_dims: expected 2 widths for 3 layers",
    ),
    (
        "hidden-dims-not-ints",
        ["fit", "{d}/good.csv", "--hidden-dims", "4,x"],
        "comma-separated integers",
    ),
    ("zero-hidden-dim", ["fit", "{d}/good.csv", "--hidden-dims", "0,4"], "hidden_dims"),
    (
        "inducing-vs-layers",
        ["fit", "{d}/good.csv", "--layers", "2", "--inducing", "4,4,4"],
        "num_inducing: expected 1 or 2 values",
    ),
    ("split-without-masks", ["fit", "{d}/good.csv", "--split", "0"], "no predefined test splits"),
    ("split-out-of-range", ["fit", "{d}/uci/tiny", "--split", "2"], "split 2 is out of range"),
    (
        "regression-target-as-classes",
        ["fit", "{d}/good.csv", "--task", "classification"],
        "numbers, not all integers",
    ),
    ("no-command", [], "the following arguments are required: COMMAND"),
    ("unknown-command", ["train"], "invalid choice: 'train'"),
    ("fit-without-data", ["fit"], "the following arguments are required: DATA"),
    ("bench-unknown-model", ["bench", "--models", "svgp,gp"], "model: expected one of"),
    (
        "bench-unknown-dataset",
        ["bench", "--data-root", "{d}/uci", "--datasets", "nope", "--out", "{d}/b"],
        "unknown data set 'nope'",
    ),
    (
        "bench-missing-root",
        ["bench", "--data-root", "{d}/absent", "--datasets", "tiny", "--out", "{d}/b"],
        "is not a folder",
    ),
    ("bench-bad-seeds", ["bench", "--seeds", "0,one"], "comma-separated integers"),
    ("bench-negative-patience", ["bench", "--patience", "-1"], "non-negative integer, got '-1'"),
    (
        "fit-patience-without-restore-best",
        ["fit", "{d}/good.csv", "--no-restore-best", "--patience", "3"],
        "patience: stopping early needs restore_best=True",
    ),
    ("bench-empty-datasets", ["bench", "--datasets", ","], "--datasets is empty"),
    ("demo-negative-epochs", ["demo", "--epochs", "-3"], "positive integer, got '-3'"),
    (
        "demo-too-few-inducing",
        ["demo", "--quiet", "--num-points", "30", "--total-inducing", "2", "--out", "{d}/demo"],
        "total_inducing: expected at least 4",
    ),
]


@pytest.mark.parametrize("args, expected", [pytest.param(a, e, id=i) for i, a, e in BAD_INPUT])
def test_bad_input_is_one_line_and_exit_2(capsys, bad_files, args, expected):
    status, out, err = cli(capsys, *[arg.format(d=bad_files) for arg in args])
    assert_one_line_cli_error(status, out, err, expected)


def test_help_lists_the_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--help"])
    assert exit_info.value.code == 0
    help_text = capsys.readouterr().out
    for option in ("--target", "--task", "--model", "--rule", "--json", "--save", "--dtype"):
        assert option in help_text
    for model in ("avdgp", "sgp-avi", "idsgp", "svgp", "dsdgp", "dspp"):
        assert model in help_text
    assert "about 80 steps" in " ".join(help_text.split())  # how many a small data set needs


# ---------------------------------------------------------------------------------------------
# Real processes: ``python -m avdgp`` and the ``avdgp`` console script
# ---------------------------------------------------------------------------------------------


def _run(command: list, cwd: Path, **env_settings: str) -> subprocess.CompletedProcess:
    """Run ``command`` with no GPU, no AVDGP_DEBUG and TF_CPP_MIN_LOG_LEVEL unset unless given."""
    env = {key: value for key, value in os.environ.items() if key != "AVDGP_DEBUG"}
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # the package must hide TF's start-up notices itself
    env.update(CUDA_VISIBLE_DEVICES="", **env_settings)
    return subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _avdgp_script() -> Optional[str]:
    """The ``avdgp`` console script on PATH (or beside this interpreter)."""
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return shutil.which("avdgp", path=search)


@pytest.mark.slow
def test_module_missing_file_in_a_real_process(tmp_path):
    result = _run([sys.executable, "-m", "avdgp", "fit", "missing.csv"], tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert result.stderr == "avdgp fit: missing.csv: no such file or folder\n"


@pytest.mark.slow
def test_console_script_unknown_model_in_a_real_process(tmp_path):
    script = _avdgp_script()
    if script is None:
        pytest.skip("the avdgp console script is not installed (pip install -e .)")
    data = write_table(tmp_path / "d.csv", [[1.0, 2.0, 3.0]] * 20)
    result = _run([script, "fit", data, "--model", "deep-gp"], tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("avdgp fit: argument --model: invalid choice: 'deep-gp'")


@pytest.mark.slow
def test_module_fit_in_a_real_process(tmp_path, rng):
    x, y = regression_data(rng, 100, 2)
    data = write_table(tmp_path / "small.csv", np.column_stack([x, y]).tolist())
    command = [sys.executable, "-m", "avdgp", "fit", data, *DEEP, *TINY]
    # TF_CPP_MIN_LOG_LEVEL=2 hides TensorFlow's graph-optimiser warnings during training.
    result = _run([*command, "--json", "small.json"], tmp_path, TF_CPP_MIN_LOG_LEVEL="2")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr == ""  # --quiet: no progress lines
    assert result.stdout.startswith("avdgp-ar2p on small (n_train 80, n_test 10, D 2, 1 epochs)")
    record = strict_json((tmp_path / "small.json").read_text())
    check_record(
        record, model="avdgp", rule="ar2p", task="regression", rows=100, dim=2, dataset="small"
    )


# ------------------------------------------------------------------------- outputs checked early
def test_unwritable_outputs_fail_before_training(capsys, tmp_path, rng):
    x, y = regression_data(rng, 40, 2)
    data = write_table(tmp_path / "d.csv", np.column_stack([x, y]))
    folder = tmp_path / "a_folder"
    folder.mkdir()
    status, out, err = cli(capsys, "fit", str(data), "--json", str(folder), "--quiet")
    assert_one_line_cli_error(status, out, err, "is a folder, expected a file name")
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    status, out, err = cli(capsys, "fit", str(data), "--save", str(a_file), "--quiet")
    assert_one_line_cli_error(status, out, err, "is a file, expected a folder")


@pytest.mark.slow
def test_demo_quiet_prints_its_results_and_nothing_else(capsys, tmp_path):
    out_dir = tmp_path / "demo"
    args = ("demo", "--quiet", "--epochs", "1", "--rows", "300", "--total-inducing", "8")
    status, out, err = cli(capsys, *args, "--out", out_dir)
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert [line.split(":")[0] for line in lines[:3]] == ["SGP-AVI", "AVDGP-2L", "AVDGP-3L"]
    assert lines[4].startswith("Test error rates (paper, Table 2")
    assert lines[-1] == f"Figures and results.json in {out_dir}/"
    assert len(lines) == 9


def test_demo_with_bad_settings_writes_nothing(capsys, tmp_path):
    out_dir = tmp_path / "demo"
    status, out, err = cli(capsys, "demo", "--total-inducing", "2", "--out", str(out_dir))
    assert_one_line_cli_error(status, out, err, "total_inducing")
    assert not out_dir.exists()


def test_hidden_dims_for_one_layer_is_an_error(capsys, tmp_path, rng):
    x, y = regression_data(rng, 40, 2)
    data = write_table(tmp_path / "d.csv", np.column_stack([x, y]))
    args = ("fit", str(data), "--layers", "1", "--hidden-dims", "4", "--quiet")
    status, out, err = cli(capsys, *args)
    assert_one_line_cli_error(status, out, err, "hidden_dims: a 1-layer model")


_LOADED = """
import sys
from avdgp.cli.common import load_tensorflow
assert "gpflow" not in sys.modules
load_tensorflow()
import check_shapes
import gpflux_avdgp
print(check_shapes.get_rewrite_docstrings(), check_shapes.get_enable_check_shapes().value)
"""


@pytest.mark.slow  # a fresh process imports the commands
def test_commands_import_gpflow_without_rewriting_its_docstrings_and_keep_its_shape_checks():
    """Rewriting the docstring of every shape-checked function as GPflow defines it took 1.3 s
    of each command's 7.3 s import of the library (``python -c "import gpflux_avdgp"`` with and
    without ``check_shapes.set_rewrite_docstrings(None)``, three runs each: 7.2-7.4 s against
    5.8-6.1 s); a command shows no docstring, and the checks stay as GPflow sets them."""
    done = subprocess.run(
        [sys.executable, "-c", _LOADED], capture_output=True, text=True, timeout=120,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["DocstringFormat.NONE", "eager_mode_only"]
