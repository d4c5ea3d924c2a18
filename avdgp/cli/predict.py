"""``avdgp predict``: predictions of a saved model for the rows of a data file, as CSV.

A CSV file with a header is read by name: its columns are matched to the feature names ``fit``
saved in ``run.json``, in any order, the target column (by its saved name) left out; a missing
or unknown column is refused, named. A file without a header (or a model fitted on one) is read
by position: ``D`` feature columns, or ``D + 1`` with the target (``--target``, default last).
"""

from __future__ import annotations

import collections
import os
import sys
from pathlib import Path
from typing import Iterator, Optional

import numpy as np

from ..errors import CommandLineError
from .common import check_output_file, print_stage, spreadsheet_safe, writing_atomically
from .saved_run import SavedRun, read_saved_run

__all__ = ["predict_command"]


def _feature_columns(
    data: str, num_features: int, target, *, class_labels: bool = False
) -> np.ndarray:
    """Read DATA's feature columns ``[N, D]``: DATA holds exactly the ``D`` features, or
    ``D + 1`` columns one of which is the target (chosen by ``target``), which is dropped; with
    ``class_labels`` (a classifier) that column may hold text labels."""
    from ..data import load_dataset
    from ..data.csv_format import TooFewColumnsError

    lower = data.lower()
    if class_labels and lower.endswith((".csv", ".csv.gz")):
        features = _features_beside_labels(data, num_features, target)
        if features is not None:
            return features
    try:
        dataset = load_dataset(data, min_rows=1)  # target -1: the last column
    except TooFewColumnsError:
        if num_features != 1:
            raise _wrong_width(data, 1, num_features) from None
        return _single_column(data)  # the one feature of a one-feature model
    if lower.endswith(".npz"):
        if dataset.num_features != num_features:
            raise CommandLineError(
                f"avdgp predict: DATA {data}: array 'X' has {dataset.num_features} columns, "
                f"the model expects {num_features} features"
            )
        return np.asarray(dataset.inputs)
    columns = dataset.num_features + 1
    if columns == num_features:  # no target: every column is a feature, in file order
        return np.column_stack([dataset.inputs, dataset.targets])
    if columns != num_features + 1:
        raise _wrong_width(data, columns, num_features)
    if target in (None, -1, columns - 1):
        return np.asarray(dataset.inputs)
    return np.asarray(load_dataset(data, target=target, min_rows=1).inputs)


def _features_beside_labels(data: str, num_features: int, target) -> Optional[np.ndarray]:
    """The features ``[N, D]`` of a CSV file of ``D + 1`` columns whose target column holds
    class labels (numbers or text), or ``None`` for a file of another width."""
    from ..data.csv_format import sniff_layout
    from ..data.tables import check_finite_table, read_csv

    path = Path(data)
    target = -1 if target is None else target
    if not path.is_file() or sniff_layout(path, data, label_column=target).num_columns != (
        num_features + 1
    ):
        return None
    table = read_csv(path, data, label_column=target)
    check_finite_table(table, path, data)
    return np.delete(table.values, table.label_index, axis=1)


def _named_columns(data: str, saved: SavedRun, target: Optional[str]) -> Optional[list[int]]:
    """The file's columns of the model's features, in the model's order, for a CSV file with a
    header and a model whose run saved its feature names; ``None`` otherwise (read by
    position).

    :param target: the name of the target column, left out if the file has it.
    :raises CommandLineError: naming the missing, unknown or repeated columns.
    """
    from ..data.csv_format import DataError, is_number, sniff_layout

    names = saved.data.get("feature_names")
    path = Path(data)
    if not names or not path.is_file() or not data.lower().endswith((".csv", ".csv.gz")):
        return None
    try:
        layout = sniff_layout(path, data, unique_names=False)
    except DataError:  # the whole-file reader says what is wrong
        return None
    if layout.header is None or any(is_number(cell) for cell in layout.header):
        return None  # no header (a row holding a text label is data: 5.1,3.5,setosa)
    header = list(layout.header)
    problems = {
        "missing": [name for name in names if name not in header],
        "unknown": [column for column in header if column not in names and column != target],
        "repeated": sorted(c for c, n in collections.Counter(header).items() if n > 1),
    }
    if any(problems.values()):
        said = "; ".join(
            f"{what} {', '.join(map(repr, columns))}"
            for what, columns in problems.items()
            if columns
        )
        expected = ", ".join(names) + (f" (and the target {target!r})" if target else "")
        raise CommandLineError(
            f"avdgp predict: DATA {data}: columns are read by the header's names, {expected}; "
            + said
        )
    return [header.index(name) for name in names]


def _named_chunks(
    data: str, saved: SavedRun, columns: list[int], target: Optional[str]
) -> Iterator[np.ndarray]:
    """DATA's features ``[n, D]`` in the model's order, chosen by name (:func:`_named_columns`),
    streamed when every cell is a number, read whole otherwise (text class labels), as
    :func:`_input_chunks` does for a file read by position."""
    from ..data.csv_chunks import NotStreamable, feature_chunks
    from ..data.csv_format import sniff_layout

    path = Path(data)
    started = False
    try:
        for chunk in feature_chunks(path, sniff_layout(path, data), None, CHUNK_ROWS):
            started = True
            yield chunk[:, columns]
        return
    except NotStreamable:
        if started:  # rows are out already: report the whole-file reader's error
            _named_table(data, saved, columns, target)
            raise CommandLineError(f"avdgp predict: DATA {data}: cannot be read") from None
    yield _named_table(data, saved, columns, target)


def _named_table(
    data: str, saved: SavedRun, columns: list[int], target: Optional[str]
) -> np.ndarray:
    """The whole file's ``columns`` ``[N, D]``; a classifier's target may hold text labels.

    :raises DataError: naming the first bad row or cell.
    """
    from ..data.csv_format import sniff_layout
    from ..data.tables import check_finite_table, read_csv

    path = Path(data)
    header = sniff_layout(path, data).header or ()
    labels = target if saved.task == "classification" and target in header else None
    table = read_csv(path, data, label_column=labels)
    check_finite_table(table, path, data)
    return table.values[:, columns]


def _single_column(data: str) -> np.ndarray:
    """A one-column CSV file as ``[N, 1]`` (``load_dataset`` needs a target column too)."""
    from ..data.tables import check_finite_table, read_csv

    path = Path(data)
    table = read_csv(path, data)
    check_finite_table(table, path, data)
    return table.values


def _format(value: float) -> str:
    return repr(float(value))


#: Rows read, predicted and written at a time: memory stays flat in the number of rows.
CHUNK_ROWS = 10_000


def _input_chunks(data: str, saved: SavedRun, target) -> Iterator[np.ndarray]:
    """DATA's raw feature rows ``[n, D]`` a chunk at a time: streamed from a numeric CSV file,
    read whole otherwise (``.npz``, folders, text labels) or when the chunked reader meets
    something it does not parse (the whole-file reader then names the line and cell)."""
    from ..data.csv_chunks import NotStreamable

    classifier = saved.task == "classification"
    streamed = None if classifier else _streamed_features(data, saved.num_features, target)
    started = False
    try:
        for chunk in streamed or ():
            started = True
            yield chunk
    except NotStreamable:
        if started:  # rows are out already: report the whole-file reader's error
            _feature_columns(data, saved.num_features, target)
            raise CommandLineError(f"avdgp predict: DATA {data}: cannot be read") from None
    if not started:
        yield _feature_columns(data, saved.num_features, target, class_labels=classifier)


def _streamed_features(data: str, num_features: int, target) -> Optional[Iterator[np.ndarray]]:
    """Chunks of a CSV file's feature columns (``D`` columns, or ``D + 1`` with the target,
    which is dropped), or ``None`` for a file to read whole."""
    from ..data.csv_chunks import feature_chunks
    from ..data.csv_format import DataError, resolve_target, sniff_layout

    path = Path(data)
    if not path.is_file() or not data.lower().endswith((".csv", ".csv.gz")):
        return None
    try:
        layout = sniff_layout(path, data, unique_names=False)
        header = list(layout.header) if layout.header is not None else None
        if layout.num_columns not in (num_features, num_features + 1):
            return None
        drop = None
        if layout.num_columns == num_features + 1:
            drop = resolve_target(
                -1 if target is None else target, layout.num_columns, header, data
            )
    except DataError:  # the whole-file reader says what is wrong
        return None
    return feature_chunks(path, layout, drop, CHUNK_ROWS)


def _prediction_chunks(
    saved: SavedRun, model, inputs: Iterator[np.ndarray], batch_size: int, data: str
) -> Iterator[list[list[str]]]:
    """The CSV rows of ``predict`` for blocks of raw features ``[n, D]``: the header, then the
    rows of each :data:`CHUNK_ROWS` inputs as soon as they are predicted.

    :raises CommandLineError: if DATA holds no row (a header alone), or an input so far from
        the training data that the prediction cannot be computed (:data:`MAX_STANDARDISED`).
    """
    first = True
    for block in inputs:
        step = max(CHUNK_ROWS, batch_size)
        for start in range(0, len(block), step):
            rows = _prediction_rows(saved, model, block[start : start + step], batch_size, data)
            yield rows if first else rows[1:]
            first = False
    if first:
        raise CommandLineError(
            f"avdgp predict: DATA {data}: no data rows to predict (a header alone?)"
        )


#: The largest standardised input predicted, ``|x - mean| / std``: squared distances of 1e160
#: overflow float64 in the kernels (measured: 1e150 predicts, 1e160 ends in NaN); a margin.
MAX_STANDARDISED = 1e100


def _check_reachable(inputs: np.ndarray, data: str) -> None:
    """Refuse standardised ``inputs`` ``[n, D]`` beyond :data:`MAX_STANDARDISED`."""
    far = np.abs(inputs) > MAX_STANDARDISED
    if far.any():
        row, column = (int(i) for i in np.argwhere(far)[0])
        raise CommandLineError(
            f"avdgp predict: DATA {data}: an input in column {column + 1} lies "
            f"{abs(inputs[row, column]):.3g} training standard deviations from the training "
            f"mean, beyond the {MAX_STANDARDISED:.0e} a prediction can be computed at; check "
            "that column's units"
        )


def _prediction_rows(
    saved: SavedRun, model, inputs: np.ndarray, batch_size: int, data: str
) -> list[list[str]]:
    """The CSV rows (header first) of ``predict`` for raw features ``inputs`` ``[N, D]``."""
    from gpflux_avdgp.prediction import predict_mixture

    from .. import metrics
    from ..training import float_type

    scaler = saved.standardizer
    standardised = scaler.transform_x(inputs)
    _check_reachable(np.asarray(standardised), data)
    with float_type(saved.dtype):
        prediction = predict_mixture(model, standardised, batch_size=batch_size)
    if saved.task == "classification":
        return _class_rows(prediction.class_probabilities(), saved.data.get("classes"))
    if prediction.y_means.shape[-1] != 1:
        raise CommandLineError(
            f"avdgp predict: the model has {prediction.y_means.shape[-1]} outputs; predict "
            "writes one target per row"
        )
    weights = prediction.weights  # [N, S]
    means, variances = metrics.rescale_mixture(
        prediction.y_means[..., 0], prediction.y_variances[..., 0], scaler.y_std, scaler.y_mean
    )  # [N, S] each, original units
    mean, variance = metrics.mixture_mean_and_variance(weights, means, variances)  # [N]
    # the library's exact interval, in original units (y_std > 0 keeps the order)
    lower, upper = (b[:, 0] * scaler.y_std + scaler.y_mean for b in prediction.central_interval())
    bounds = np.stack([np.ravel(lower), np.ravel(upper)], axis=1)  # [N, 2]
    rows = [["mean", "std", "lower_95", "upper_95"]]
    rows += [
        [_format(m), _format(np.sqrt(v)), _format(lo), _format(hi)]
        for m, v, (lo, hi) in zip(mean, variance, bounds)
    ]
    return rows


def _class_rows(probabilities: np.ndarray, classes: Optional[list]) -> list[list[str]]:
    """The CSV rows of a classifier: ``label,p_<label>...``, the most probable label and one
    probability per class, each column named after its class (two classes too); labels as the
    training data wrote them.

    :param probabilities: ``[N, 1]`` (Bernoulli) or ``[N, K]``.
    """
    from ..data import format_label

    binary = probabilities.shape[1] == 1
    num_classes = 2 if binary else probabilities.shape[1]
    if classes is None:  # saved before the labels were recorded: the class indices
        classes = [float(k) for k in range(num_classes)]
    if len(classes) != num_classes:
        raise CommandLineError(
            f"avdgp predict: run.json lists {len(classes)} classes, the model predicts "
            f"{num_classes}"
        )
    names = [format_label(value) for value in classes]
    cells = [spreadsheet_safe(name) for name in names]  # "p_" keeps the header's names safe
    if binary:  # p of the second class: the first's is its complement
        probabilities = np.concatenate([1.0 - probabilities, probabilities], axis=1)
    rows = [["label"] + [f"p_{name}" for name in names]]
    for row in probabilities:
        rows.append([cells[int(np.argmax(row))]] + [_format(p) for p in row])
    return rows


def _check_width(data: str, saved: SavedRun) -> None:
    """Before TensorFlow loads: DATA exists and, for a CSV file read by position, has the
    model's ``D`` columns or ``D + 1`` with the target (what :func:`_feature_columns` would
    refuse after the model loaded). Other faults are named while the rows are read."""
    from ..data import DataError
    from ..data.csv_format import sniff_layout

    path = Path(data)
    if not path.exists():
        raise DataError(f"{data}: no such file or folder")
    if not path.is_file() or not data.lower().endswith((".csv", ".csv.gz")):
        return
    try:
        columns = sniff_layout(path, data, unique_names=False).num_columns
    except DataError:  # the whole-file reader says what is wrong
        return
    if columns not in (saved.num_features, saved.num_features + 1):
        raise _wrong_width(data, columns, saved.num_features)


def _wrong_width(data: str, columns: int, num_features: int) -> CommandLineError:
    """DATA read by position has neither the model's ``D`` columns nor ``D + 1``."""
    counted = "1 column" if columns == 1 else f"{columns} columns"
    return CommandLineError(
        f"avdgp predict: DATA {data} has {counted}, the model expects {num_features} features "
        f"(or {num_features + 1} with the target)"
    )


def predict_command(args) -> int:
    import csv

    check_output_file(
        "predict", "--out", args.out, [("DATA", args.data), ("MODEL_DIR", args.model_dir)]
    )
    saved = read_saved_run(args.model_dir, "predict")
    target = args.target if args.target is not None else saved.data.get("target")
    target_name = target if isinstance(target, str) else saved.data.get("target_name")
    columns = _named_columns(args.data, saved, target_name)  # refused before TensorFlow loads
    if columns is None:
        _check_width(args.data, saved)
    read = "by the header's names" if columns is not None else "by position"
    print_stage(args, f"loading the {saved.label} model of {args.model_dir} ({args.data}: {read})")
    model = saved.load_model()
    inputs = (
        _input_chunks(args.data, saved, target)
        if columns is None
        else _named_chunks(args.data, saved, columns, target_name)
    )
    chunks = _prediction_chunks(saved, model, inputs, args.batch_size, args.data)
    if args.out is None:
        try:
            for rows in chunks:
                csv.writer(sys.stdout, lineterminator="\n").writerows(rows)
            sys.stdout.flush()
        except BrokenPipeError:  # e.g. '| head': the reader has all it wants
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    out = Path(args.out)
    header, count = None, 0
    with writing_atomically(out, "predict", "--out") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        for rows in chunks:
            count += len(rows) - (header is None)
            header = header or rows[0]
            writer.writerows(rows)
            if count >= CHUNK_ROWS:  # more than one chunk: how far it is
                print_stage(args, f"{count} rows predicted")
    print(f"{saved.label}: {count} predictions ({', '.join(header)}) in {out}")
    return 0
