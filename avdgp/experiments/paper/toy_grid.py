"""Runs on the toy "DGP" letters beyond the demo: the paper's Table 2 grid (``|M|`` by depth)
and its inference-function ablation (IDSGP's MLP of growing depth against the affine map).

Every finished run is one row of a CSV (:data:`COLUMNS`), appended at once; a rerun skips
the rows already there, so a grid can be spread over sessions. The ablation also keeps each
run's first-layer inducing points for the demo's 64 query inputs (``inducing/*.npy``), so
its figures are redrawn without training.
"""

from __future__ import annotations

import csv
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional, TextIO

import numpy as np
import tensorflow as tf

from avdgp.data import Standardizer
from avdgp.experiments.demo.run import DemoSettings
from avdgp.experiments.demo.toy import toy_splits
from avdgp.training import EpochProgress, TrainConfig, fit_model, float_type
from avdgp.training.runner import score_prediction
from avdgp.zoo import ModelSpec, Task, build_model
from gpflux_avdgp.prediction import predict_mixture

__all__ = [
    "ABLATION_DEPTHS",
    "COLUMNS",
    "KEY_COLUMNS",
    "QUERIES",
    "ToyRun",
    "ablation_run",
    "inducing_file",
    "read_toy_rows",
    "run_toy",
    "table2_run",
]

COLUMNS = (
    "experiment",
    "name",
    "total_inducing",
    "layers",
    "hidden_layers",
    "seed",
    "num_rows",
    "epochs",
    "num_points",
    "preset",
    "error_rate",
    "nll",
    "seconds",
)

#: The columns that identify a run (the others are its results).
KEY_COLUMNS = COLUMNS[:10]

_AXIS = np.linspace(0.1, 0.9, 8)
#: The demo's 64 query inputs ``[64, 2]`` whose amortized inducing points are kept.
QUERIES = np.stack(np.meshgrid(_AXIS, _AXIS), -1).reshape(-1, 2)

#: Share of ``|M|`` per layer: 1 (SGP-AVI), 1:1, 2:1:1 and 4:2:1:1 (the paper's Table 2).
LAYER_SHARES = {1: (1,), 2: (1, 1), 3: (2, 1, 1), 4: (4, 2, 1, 1)}


@dataclass(frozen=True)
class ToyRun:
    """One model of one seed on the toy problem.

    :param experiment: ``"table2"`` or ``"ablation"``.
    :param name: the row's model name (``"SGP-AVI"``, ``"AVDGP-3L"``, ``"IDSGP-3"``, ...).
    :param spec: the model (``seed`` is the run's).
    """

    experiment: str
    name: str
    spec: ModelSpec

    def identity(self, settings: DemoSettings) -> dict:
        """The CSV fields that identify this run under ``settings`` (:data:`KEY_COLUMNS`)."""
        return {
            "experiment": self.experiment,
            "name": self.name,
            "total_inducing": sum(self.spec.resolved_inducing()),
            "layers": self.spec.resolved_layers(),
            "hidden_layers": int(self.spec.extra.get("hidden_layers", 2)),
            "seed": self.spec.seed,
            "num_rows": settings.num_rows,
            "epochs": settings.epochs,
            "num_points": settings.num_sigma_points,
            "preset": settings.preset,
        }


def table2_run(total: int, layers: int, seed: int, settings: DemoSettings) -> ToyRun:
    """The Table 2 cell ``(|M|, L)``: SGP-AVI for one layer, else AVDGP-AR2P with hidden
    widths 2 and ``|M|`` shared as in :data:`LAYER_SHARES`."""
    shares = LAYER_SHARES[layers]
    unit = total // sum(shares)
    if unit < 1 or unit * sum(shares) != total:
        raise ValueError(
            f"total_inducing: {total} does not split {':'.join(map(str, shares))} over "
            f"{layers} layers"
        )
    common = dict(
        task="classification",
        num_points=settings.num_sigma_points,
        seed=seed,
        preset=settings.preset,
    )
    if layers == 1:
        spec = ModelSpec(model="sgp-avi", rule=None, num_inducing=[total], **common)
        return ToyRun("table2", "SGP-AVI", spec)
    spec = ModelSpec(
        num_layers=layers,
        hidden_dims=[2] * (layers - 1),
        num_inducing=[unit * share for share in shares],
        **common,
    )
    return ToyRun("table2", f"AVDGP-{layers}L", spec)


#: The ablation's inducing points (the paper's figure shows ``M = 8`` groups).
ABLATION_INDUCING = 8
#: Hidden layers of IDSGP's amortization MLP in the ablation.
ABLATION_DEPTHS = (1, 2, 3, 4)


def ablation_run(inference: str, hidden_layers: int, seed: int, settings: DemoSettings) -> ToyRun:
    """One shallow model of the inference-function ablation: IDSGP's single MLP with
    ``hidden_layers`` hidden layers (``inference="mlp"``), or the paper's affine map
    (``"affine"``, SGP-AVI, whose networks for ``q(u)`` keep 2 hidden layers)."""
    common = dict(
        task="classification",
        rule=None,
        num_inducing=[ABLATION_INDUCING],
        seed=seed,
        preset=settings.preset,
    )
    if inference == "affine":
        return ToyRun("ablation", "affine", ModelSpec(model="sgp-avi", **common))
    if inference != "mlp":
        raise ValueError(f"inference: expected 'affine' or 'mlp', got {inference!r}")
    spec = ModelSpec(model="idsgp", extra={"hidden_layers": hidden_layers}, **common)
    return ToyRun("ablation", f"MLP-{hidden_layers}", spec)


def read_toy_rows(path: Path) -> list[dict]:
    """The rows of a toy CSV (numbers as floats); ``[]`` if there is none."""
    if not path.exists():
        return []
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        for key in COLUMNS:
            if key not in ("experiment", "name", "preset"):
                row[key] = float(row[key])
    return rows


def _key(fields: dict) -> tuple:
    """A run's identity as a tuple, from :meth:`ToyRun.identity` or a CSV row."""
    return tuple(
        fields[name] if name in ("experiment", "name", "preset") else int(fields[name])
        for name in KEY_COLUMNS
    )


def inducing_file(out: Path, run: ToyRun, settings: DemoSettings) -> Path:
    """Where a run's first-layer inducing points for :data:`QUERIES` are kept."""
    key = "-".join(str(part) for part in _key(run.identity(settings)))
    return out / "inducing" / f"{key}.npy"


def run_toy(
    runs: Iterable[ToyRun],
    settings: DemoSettings,
    out_dir: Path,
    *,
    stream: Optional[TextIO] = sys.stderr,
) -> Path:
    """Train and score every run of ``runs`` not yet in ``out_dir/toy.csv``; returns its path."""
    out = Path(out_dir)
    (out / "inducing").mkdir(parents=True, exist_ok=True)
    path = out / "toy.csv"
    done = {_key(row) for row in read_toy_rows(path)}
    runs = list(runs)

    def say(text: str) -> None:
        if stream is not None:
            print(text, file=stream, flush=True)

    splits: dict = {}
    for count, run in enumerate(runs, start=1):
        identity = run.identity(settings)
        key = _key(identity)
        label = (
            f"[{count}/{len(runs)}] {run.experiment} {run.name} |M| "
            f"{identity['total_inducing']} seed {identity['seed']}"
        )
        if key in done:
            say(f"{label}: done, skipped")
            continue
        say(label)
        if run.spec.seed not in splits:
            splits[run.spec.seed] = toy_splits(settings.num_rows, run.spec.seed)
        row, inducing = _train(run, splits[run.spec.seed], settings, stream)
        np.save(inducing_file(out, run, settings), inducing)
        new = not path.exists()
        with path.open("a", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS)
            if new:
                writer.writeheader()
            writer.writerow(row)
        done.add(key)
        say(f"  test error {100 * row['error_rate']:.2f}% ({row['seconds']:.0f} s)")
    return path


def _train(run: ToyRun, split, settings: DemoSettings, stream) -> tuple[dict, np.ndarray]:
    """Fit one toy model as the demo does (its schedule, last epoch's weights); returns the
    CSV row and the first layer's inducing points ``[64, M, 2]`` for :data:`QUERIES`."""
    scaler = Standardizer.fit(split.x_train, split.y_train, standardize_targets=False)
    x_train, x_test = scaler.transform_x(split.x_train), scaler.transform_x(split.x_test)
    config = TrainConfig.from_preset(
        settings.preset,
        epochs=settings.epochs,
        batch_size=settings.batch_size,
        learning_rate=settings.learning_rate,
        seed=run.spec.seed,
        restore_best=False,
    )
    start = time.perf_counter()
    with float_type(config.dtype):
        built = build_model(run.spec, 2, len(x_train))
        fit_model(built, x_train, split.y_train, config, progress=EpochProgress(run.name, stream))
        prediction = predict_mixture(built.model, x_test, likelihood=built.likelihood)
        scores, _ = score_prediction(prediction, split.y_test, Task.CLASSIFICATION)
        first = built.model.get_layer("gp_layer_1")
        inducing = first.inference(tf.constant(scaler.transform_x(QUERIES))).inducing.numpy()
    row = run.identity(settings)
    row.update(
        error_rate=scores["error_rate"],
        nll=scores["nll"],
        seconds=time.perf_counter() - start,
    )
    return row, inducing * scaler.x_std + scaler.x_mean
