"""The bench's result files: ``results.csv`` (one row per finished run) and ``curves.jsonl``
(per-epoch seconds, validation and test NLL of every run), read and appended."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from avdgp.training.record import RunRecord

__all__ = ["COLUMNS", "CURVES_FILE", "display_model", "read_curves", "read_results"]

METRICS = ("nll", "rmse", "crps")


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
    "version",
)

#: Per-epoch curves of every finished run, beside ``results.csv``.
CURVES_FILE = "curves.jsonl"


CURVE_KEYS = ("best_epoch", "stopped_epoch", "epoch_seconds", "val_nll_curve", "test_nll_curve")


#: ``preset`` of rows written before the column existed: they ran the paper's settings.
LEGACY_PRESET = "paper"
#: ``version`` of rows written before the column existed (:func:`avdgp.experiments.bench.run.
#: run_version`): their settings are not known, so they never share a cell with a new run.
LEGACY_VERSION = "legacy"


def read_results(path: Path) -> list[dict]:
    """Rows of ``results.csv`` (numbers as floats; empty cells as ``None``)."""
    if not path.exists():
        return []
    rows = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            parsed = {}
            for key, value in row.items():
                if key in ("dataset", "model", "status", "preset", "version"):
                    parsed[key] = value
                elif value == "":
                    parsed[key] = None
                else:
                    parsed[key] = float(value)
            parsed["preset"] = parsed.get("preset") or LEGACY_PRESET
            parsed["version"] = parsed.get("version") or LEGACY_VERSION
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
        row["version"] = row.get("version") or LEGACY_VERSION
    temporary = path.with_suffix(".csv.tmp")
    with temporary.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({key: row.get(key) or "" for key in COLUMNS})
    temporary.replace(path)


def append_row(path: Path, row: dict) -> None:
    if path.exists():
        _upgrade_header(path)
    new = not path.exists()
    with path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        if new:
            writer.writeheader()
        writer.writerow({key: row.get(key, "") for key in COLUMNS})


def append_curve(path: Path, row: dict, record: RunRecord) -> None:
    """One JSON line per finished run: its key, the seconds of every epoch and the validation
    and test NLL after every epoch (for time-to-accuracy plots)."""
    line = {key: row[key] for key in ("dataset", "model", "preset", "version", "seed", "epochs")}
    line.update({key: getattr(record, key) for key in CURVE_KEYS})
    with path.open("a") as handle:
        handle.write(json.dumps(line) + "\n")


def read_curves(path: Path) -> list[dict]:
    """The lines of ``curves.jsonl`` (see :func:`run_bench`); ``[]`` if there is none."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
