"""The ``avdgp`` argument parser: every option, its type check, its default and its help text.

Parsing imports neither TensorFlow nor the library (``avdgp --help`` answers at once): the
choices it needs from them are plain data in :mod:`.arguments`, checked against their sources
by ``tests/application/cli/test_parser.py``.
"""

from __future__ import annotations

import argparse
import importlib.metadata

from .arguments import (
    DEFAULT_BACKUP_INTERVAL,
    MODEL_CHOICES,
    RULE_CHOICES,
    STRATEGY_NAMES,
    Parser,
    add_preset_arguments,
    add_steps_per_execution,
    fraction,
    int_list,
    positive_int,
    seconds,
    target_column,
)
from .experiment_parsers import add_bench, add_paper, add_uncertainty

__all__ = ["build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The ``avdgp`` parser: one sub-parser per command, each added by its ``_add_*``."""
    parser = Parser(
        prog="avdgp",
        description="Amortized variational deep Gaussian processes: demo, fit, benchmark, "
        "predict with and export saved models.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    commands.required = True
    for add_command in (
        _add_demo,
        _add_fit,
        add_bench,
        add_uncertainty,
        add_paper,
        _add_predict,
        _add_export,
    ):
        add_command(commands)
    return parser


def _version() -> str:
    """The installed package's version (no import of the package, so no TensorFlow)."""
    try:
        return importlib.metadata.version("gpflux_avdgp")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "(not installed)"


def _add_demo(commands) -> None:
    demo = commands.add_parser(
        "demo",
        help="the paper's toy 'DGP' classification problem (no download)",
        description="Train SGP-AVI and AVDGP with 2 and 3 layers on the toy 'DGP' letters "
        "problem, print test error rates and write PNG figures.",
    )
    demo.add_argument("--out", default="avdgp-demo", help="output folder")
    demo.add_argument(
        "--full",
        action="store_true",
        help="the paper's settings: 40000 training points, 100 epochs, S = 32 (slow on CPU)",
    )
    demo.add_argument(
        "--epochs", type=positive_int, help="epochs per model (default: 40; --full: 100)"
    )
    demo.add_argument(
        "--rows",
        "--num-points",  # its name before 24 November 2026, kept for scripts
        dest="rows",
        type=positive_int,
        help="rows generated, split 3:2:1 (default: 12000; --full: 80000)",
    )
    demo.add_argument(
        "--total-inducing", type=positive_int, help="|M| summed over layers (default: 32)"
    )
    demo.add_argument("--seed", type=int, default=0, help="data and model seed")
    demo.add_argument(
        "--preset",
        choices=("default", "paper"),
        default="default",
        help="'default': the package's defaults; 'paper': the paper's settings (inducing points "
        "start as noisy copies of the input, constant learning rate)",
    )
    demo.add_argument("--quiet", action="store_true", help="no progress output (results only)")


def _add_fit(commands) -> None:
    fit = commands.add_parser(
        "fit",
        help="train one model on your data and report test metrics",
        description="Train one model on DATA: a CSV/CSV.gz file (header optional), an .npz "
        "with X and y, or a folder with data.csv.gz and test_mask.csv.gz. Inputs (and "
        "regression targets) are standardised with training statistics; metrics are "
        "reported in standardised units and in original units.",
    )
    fit.add_argument(
        "data",
        metavar="DATA",
        help="CSV or CSV.gz file (header optional), .npz with X and y, UCI folder, or CSV shards "
        "(folder or glob pattern)",
    )
    fit.add_argument(
        "--target",
        type=target_column,
        default=-1,
        help="target column: index or header name (default: -1, the last column)",
    )
    fit.add_argument(
        "--task",
        choices=("regression", "classification"),
        default="regression",
        help="classification reads the target as class labels, numbers or text: 2 classes "
        "by a Bernoulli (probit) likelihood, more by GPflow's MultiClass (RobustMax)",
    )
    fit.add_argument("--model", choices=MODEL_CHOICES, default="avdgp", help="model family")
    fit.add_argument(
        "--rule",
        choices=RULE_CHOICES,
        default="ar2p",
        help="amortization rule of avdgp: ar1, ar2 (Monte Carlo), ar2p (learnable sigma "
        "points), ar2pp (sigma points, predictive objective)",
    )
    fit.add_argument("--layers", type=positive_int, default=3, help="GP layers (deep models)")
    fit.add_argument(
        "--hidden-dims",
        type=int_list,
        help="intermediate widths (default: 16 for 2 layers, 16,4 for 3, then 4 per extra layer)",
    )
    fit.add_argument(
        "--inducing",
        type=int_list,
        help="inducing points per layer (default: avdgp 8,4,4; sgp-avi, idsgp 16; svgp 256; "
        "dsdgp, dspp 256,128,128; solve-gp M1,M2 512,512)",
    )
    fit.add_argument("--points", type=positive_int, default=32, help="S, sigma points")
    fit.add_argument(
        "--guard",
        action="store_true",
        help="avdgp: an input guard, an SVGP on the inputs that takes over where they leave "
        "the training data (gaps, holes, shifts; docs/uncertainty.md)",
    )
    fit.add_argument(
        "--epochs",
        type=positive_int,
        default=100,
        help="training epochs (default 100); on small data an epoch is few steps (rows / "
        "--batch-size): the "
        "default AVDGP needed about 80 steps to separate 3 clear blobs (10 epochs of 720 "
        "rows), SVGP about 40",
    )
    fit.add_argument("--batch-size", type=positive_int, default=100, help="rows per step")
    add_preset_arguments(fit)
    add_steps_per_execution(fit)
    fit.add_argument("--seed", type=int, default=0, help="split and model seed")
    fit.add_argument(
        "--split",
        type=int,
        help="test-mask column of a UCI folder (default: a random split by --seed)",
    )
    fit.add_argument(
        "--test-fraction", type=fraction, default=0.1, help="share of rows held out for testing"
    )
    fit.add_argument(
        "--val-fraction",
        type=fraction,
        default=0.1,
        help="share of the other rows kept to pick the best epoch",
    )
    fit.add_argument(
        "--test-data",
        metavar="SHARDS",
        help="test CSV shards (glob pattern, folder or file); streams DATA as training shards "
        "(default: none, the test rows come from DATA)",
    )
    fit.add_argument(
        "--dtype", choices=("float64", "float32"), default="float64", help="float type"
    )
    fit.add_argument(
        "--save",
        metavar="DIR",
        help="save weights, model and run.json here, for 'avdgp predict' and 'avdgp export' "
        "(default: not saved)",
    )
    fit.add_argument(
        "--backup-interval",
        type=seconds,
        default=DEFAULT_BACKUP_INTERVAL,
        metavar="SECONDS",
        help="with --save: back the run up after an epoch once this long has passed since the "
        "last backup, and after the last epoch (0: every epoch); an interrupted run resumes "
        "from its last backup",
    )
    fit.add_argument(
        "--json", metavar="FILE", help="write the result record as JSON (default: none)"
    )
    fit.add_argument("--quiet", action="store_true", help="no progress output (results only)")
    fit.add_argument(
        "--strategy",
        choices=STRATEGY_NAMES,
        default="default",
        help="data-parallel training with the loss trajectory of one device: 'mirrored' over "
        "this machine's GPUs (without GPUs: its CPU, split into $AVDGP_CPU_DEVICES logical "
        "devices), 'multiworker' over the cluster in $TF_CONFIG (run the same command on "
        "every worker; the chief prints and saves); default: one device",
    )


def _add_predict(commands) -> None:
    predict = commands.add_parser(
        "predict",
        help="predict DATA with a model saved by 'avdgp fit --save'",
        description="Predict every row of DATA (the formats of 'fit') with the model in "
        "MODEL_DIR, in the targets' original units. DATA has the model's D feature columns, "
        "or D + 1 with the target column (dropped; --target picks it, default: the one "
        "used by 'fit'). Writes CSV: mean,std,lower_95,upper_95 (regression), "
        "label,p_<label>,... (classification: the most probable label and each class's "
        "probability), one row per DATA row; labels as in the training data.",
    )
    predict.add_argument("model_dir", metavar="MODEL_DIR", help="folder of 'avdgp fit --save'")
    predict.add_argument(
        "data",
        metavar="DATA",
        help="rows to predict: a CSV file (read by the header's names if it has one), or .npz",
    )
    predict.add_argument("--out", metavar="FILE", help="CSV file to write (default: stdout)")
    predict.add_argument(
        "--target",
        type=target_column,
        help="target column of DATA with D + 1 columns, left out (default: the one fit used)",
    )
    predict.add_argument(
        "--batch-size", type=positive_int, default=1000, help="rows predicted at once"
    )
    predict.add_argument(
        "--quiet", action="store_true", help="no progress lines on stderr (results only)"
    )


def _add_export(commands) -> None:
    export = commands.add_parser(
        "export",
        help="export a model saved by 'avdgp fit --save' as a TensorFlow SavedModel",
        description="Write a TensorFlow SavedModel with the signatures predict_f, predict_y "
        "and log_density that serves with TensorFlow alone (no gpflux_avdgp, GPflow or "
        "GPflux). It takes raw features and answers in the targets' original units.",
    )
    export.add_argument("model_dir", metavar="MODEL_DIR", help="folder of 'avdgp fit --save'")
    export.add_argument(
        "export_dir", metavar="EXPORT_DIR", help="folder to write the SavedModel to (new)"
    )
    export.add_argument(
        "--quiet", action="store_true", help="no progress lines on stderr (results only)"
    )
