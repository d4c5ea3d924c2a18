"""The ``avdgp`` argument parser: every option, its type check, its default and its help text.

Parsing imports neither TensorFlow nor the library (``avdgp --help`` answers at once): the
choices it needs from them are plain data here, checked against their sources by
``tests/cli/test_parser.py``.
"""

from __future__ import annotations

import argparse
import importlib.metadata

from ..errors import CommandLineError

__all__ = ["CommandLineError", "build_parser", "checked"]

#: :class:`gpflux_avdgp.rules.ModelRule`'s values.
RULE_CHOICES = ("ar1", "ar2", "ar2p", "ar2pp")

#: :data:`avdgp.training.distribute.STRATEGY_NAMES`.
STRATEGY_NAMES = ("default", "mirrored", "multiworker")

#: :data:`avdgp.training.config.MAX_LEARNING_RATE`: Adam keeps the rate in a float32.
MAX_LEARNING_RATE = 3.4028234663852886e38


class _HelpFormatter(argparse.HelpFormatter):
    """Help that shows every option's default: ``(default: X)`` is appended to an option whose
    help text does not already say it (a default of ``None`` is stated in the text itself)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        stated = "default" in text or default is None or default is False
        if stated or default == argparse.SUPPRESS or not action.option_strings:  # positionals
            return text
        if isinstance(default, (list, tuple)):
            default = ",".join(map(str, default))
        return f"{text} (default: {str(default).replace('%', '%%')})".strip()


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line (no usage dump) and exit status 2, and
    shows every option's default in its help."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # noqa: D401 - argparse API
        raise CommandLineError(f"{self.prog}: {message} (see '{self.prog} --help')")


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        values = []
    if not values:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")
    return values


def checked(convert, accept, expected: str):
    """An argparse type: ``convert`` the text, then require ``accept(value)``."""

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not accept(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


_positive_int = checked(int, lambda v: v > 0, "a positive integer")


_non_negative_int = checked(int, lambda v: v >= 0, "a non-negative integer")


_positive_float = checked(float, lambda v: 0 < v < float("inf"), "a positive number")


_learning_rate = checked(
    float, lambda v: 0 < v <= MAX_LEARNING_RATE, "a positive number up to 3.4e38 (a float32)"
)

_fraction = checked(float, lambda v: 0 <= v < 1, "a number in [0, 1)")


def _target(text: str) -> int | str:
    try:
        return int(text)
    except ValueError:
        return text


MODEL_CHOICES = ("avdgp", "sgp-avi", "idsgp", "svgp", "solve-gp", "dsdgp", "dspp")


def build_parser() -> argparse.ArgumentParser:
    """The ``avdgp`` parser: one sub-parser per command, each added by its ``_add_*``."""
    parser = _Parser(
        prog="avdgp",
        description="Amortized variational deep Gaussian processes: demo, fit, benchmark, "
        "predict with and export saved models.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    for add_command in (
        _add_demo,
        _add_fit,
        _add_bench,
        _add_uncertainty,
        _add_paper,
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


DATA_ROOT_HELP = "folder of UCI data sets (default: $AVDGP_DATA_ROOT, else ../shared/data/uci)"


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
        "--epochs", type=_positive_int, help="epochs per model (default: 40; --full: 100)"
    )
    demo.add_argument(
        "--rows",
        "--num-points",  # its name before 24 November 2026, kept for scripts
        dest="rows",
        type=_positive_int,
        help="rows generated, split 3:2:1 (default: 12000; --full: 80000)",
    )
    demo.add_argument(
        "--total-inducing", type=_positive_int, help="|M| summed over layers (default: 32)"
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
        type=_target,
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
    fit.add_argument("--layers", type=_positive_int, default=3, help="GP layers (deep models)")
    fit.add_argument(
        "--hidden-dims",
        type=_int_list,
        help="intermediate widths (default: 16 for 2 layers, 16,4 for 3, then 4 per extra layer)",
    )
    fit.add_argument(
        "--inducing",
        type=_int_list,
        help="inducing points per layer (default: avdgp 8,4,4; sgp-avi, idsgp 16; svgp 256; "
        "dsdgp, dspp 256,128,128; solve-gp M1,M2 512,512)",
    )
    fit.add_argument("--points", type=_positive_int, default=32, help="S, sigma points")
    fit.add_argument(
        "--guard",
        action="store_true",
        help="avdgp: an input guard, an SVGP on the inputs that takes over where they leave "
        "the training data (gaps, holes, shifts; docs/uncertainty.md)",
    )
    fit.add_argument(
        "--epochs",
        type=_positive_int,
        default=100,
        help="training epochs; on small data an epoch is few steps (rows / --batch-size): the "
        "default AVDGP needed about 80 steps to separate 3 clear blobs (10 epochs of 720 "
        "rows), SVGP about 40",
    )
    fit.add_argument("--batch-size", type=_positive_int, default=100, help="rows per step")
    _add_preset_arguments(fit)
    _add_steps_per_execution(fit)
    fit.add_argument("--seed", type=int, default=0, help="split and model seed")
    fit.add_argument(
        "--split",
        type=int,
        help="test-mask column of a UCI folder (default: a random split by --seed)",
    )
    fit.add_argument(
        "--test-fraction", type=_fraction, default=0.1, help="share of rows held out for testing"
    )
    fit.add_argument(
        "--val-fraction",
        type=_fraction,
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


def _add_bench(commands) -> None:
    bench = commands.add_parser(
        "bench",
        help="the paper's benchmark protocol (resumable)",
        description="Train and score models over data sets and seeds with the paper's "
        "protocol (8:1:1 splits, Adam 0.005, batch 100/500); writes results.csv, tables.md "
        "and PNG plots; finished runs are skipped when rerun.",
    )
    bench.add_argument("--datasets", default="elevators", help="comma-separated names or paths")
    bench.add_argument(
        "--models",
        default="svgp,dsdgp,dspp,idsgp,avdgp-ar2p,avdgp-ar2pp",
        help="comma-separated models (avdgp-ar1|ar2|ar2p|ar2pp, svgp, solve-gp, dsdgp, dspp, "
        "idsgp, sgp-avi)",
    )
    bench.add_argument("--seeds", type=_int_list, default=[0, 1, 2, 3, 4], help="seeds")
    bench.add_argument("--epochs", type=_positive_int, default=100, help="epochs per run")
    _add_preset_arguments(bench)
    _add_steps_per_execution(bench)
    bench.add_argument(
        "--dtype", choices=("float64", "float32"), default="float64", help="float type"
    )
    bench.add_argument(
        "--max-rows", type=_positive_int, help="subsample larger data sets (default: all rows)"
    )
    bench.add_argument("--data-root", help=DATA_ROOT_HELP)
    bench.add_argument("--out", default="avdgp-bench", help="output folder")
    bench.add_argument("--quiet", action="store_true", help="no progress output (results only)")


def _add_uncertainty(commands) -> None:
    command = commands.add_parser(
        "uncertainty",
        help="how far each model's uncertainty can be trusted (resumable)",
        description="Train models on 1-D problems (std far from the data: 'far'; in a gap of "
        "the data: 'gap'; four functions with a gap and a far field: 'trend', 'kink', "
        "'hetero', 'wiggle', or 'functions' for all four), a 2-D square with a hole ('hole') "
        "and UCI sets under covariate shift (train below a quantile of one input, test above "
        "it: NAME, NAME@COLUMN, NAME@pc1, or 'shifts' for the sweep of six sets); writes "
        "uncertainty.csv, uncertainty.md, band and reliability figures; finished runs are "
        "skipped when rerun.",
    )
    command.add_argument(
        "--problems",
        default="far,gap,concrete",
        help="comma-separated: far, gap, trend, kink, hetero, wiggle, functions, hole, shifts, "
        "UCI names or paths (NAME@COLUMN or NAME@pc1 picks the shifted input)",
    )
    command.add_argument(
        "--models",
        default="avdgp-ar2p,avdgp-ar2pp,svgp,dsdgp,dspp",
        help="comma-separated models, as for bench",
    )
    command.add_argument("--seeds", type=_int_list, default=[0, 1, 2], help="seeds")
    command.add_argument("--epochs", type=_positive_int, default=100, help="epochs per run")
    command.add_argument(
        "--preset", choices=("default", "paper"), default="default", help="settings, as for fit"
    )
    command.add_argument(
        "--column", type=int, default=0, help="input column the shift cuts, from 0"
    )
    command.add_argument(
        "--quantile", type=float, default=0.8, help="train below this quantile of it"
    )
    command.add_argument(
        "--rows",
        type=_positive_int,
        help="at most this many rows of a UCI set, a random subset (default: all)",
    )
    command.add_argument("--data-root", help=DATA_ROOT_HELP)
    command.add_argument("--out", default="avdgp-uncertainty", help="output folder")
    command.add_argument("--quiet", action="store_true", help="no progress output (results only)")


PAPER_TABLES = ("table1", "table2", "table3", "table4", "table5", "inference-ablation")


def _add_paper(commands) -> None:
    paper = commands.add_parser(
        "paper",
        help="one of the paper's tables or its ablation figure, beside the paper's numbers",
        description="Run what TABLE still misses (resumable: every finished run is a row "
        "under --out) and write TABLE.md and TABLE.csv with the paper's numbers beside ours. "
        "Tables 1, 3 and 5 share their UCI runs; Table 4 times short runs of its own; Table 2 "
        "and the ablation run the toy problem.",
    )
    paper.add_argument("table", choices=PAPER_TABLES, metavar="TABLE", help=", ".join(PAPER_TABLES))
    paper.add_argument(
        "--budget",
        default="reduced",
        help="reduced (default): 3 seeds, the toy at the demo's size; full: the paper's 5 "
        "seeds and toy size (hours to days on a CPU)",
    )
    paper.add_argument(
        "--preset",
        choices=("default", "paper"),
        default="default",
        help="'default': the package's settings (best validation epoch, patience 20); "
        "'paper': the paper's (last epoch, mean-field q(u) for DS-DGP and DSPP)",
    )
    paper.add_argument(
        "--seeds", type=_int_list, help="seeds (default: the budget's, reduced 0,1,2)"
    )
    paper.add_argument(
        "--datasets", help="comma-separated UCI names (default: the table's data sets)"
    )
    paper.add_argument("--data-root", help=DATA_ROOT_HELP)
    paper.add_argument(
        "--sizes", type=_int_list, help="table2: the |M| rows (default: 16,32,64,128)"
    )
    paper.add_argument(
        "--models",
        help="UCI tables: comma-separated models of the table to train (default all; the table "
        "shows all)",
    )
    paper.add_argument("--out", default="avdgp-paper", help="output folder")
    paper.add_argument(
        "--render-only", action="store_true", help="write the table from the runs there are"
    )
    paper.add_argument("--quiet", action="store_true", help="no progress output (results only)")


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
        type=_target,
        help="target column of DATA with D + 1 columns, left out (default: the one fit used)",
    )
    predict.add_argument(
        "--batch-size", type=_positive_int, default=1000, help="rows predicted at once"
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


def _add_steps_per_execution(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--steps-per-execution",
        type=_positive_int,
        default=1,
        metavar="K",
        help="training steps per call of Keras' train function: same results, less per-step "
        "overhead (e.g. 10 for small models; a NaN is then located to K batches)",
    )


def _add_preset_arguments(parser: argparse.ArgumentParser) -> None:
    """``--preset`` and the optimisation settings it sets, each overridable."""
    parser.add_argument(
        "--preset",
        choices=("default", "paper"),
        default="default",
        help="'default': the package's defaults (inducing points start global, cosine "
        "learning-rate decay, weights of the epoch with the best validation NLL); 'paper': "
        "the AVDGP paper's exact settings (docs/experiments/learning.md lists the differences)",
    )
    parser.add_argument(
        "--learning-rate",
        type=_learning_rate,
        help="Adam's (initial) step size (default: 0.005)",
    )
    parser.add_argument(
        "--schedule",
        choices=("constant", "cosine"),
        help="learning-rate schedule (default: cosine; paper: constant)",
    )
    parser.add_argument(
        "--restore-best",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="end with the weights of the epoch of lowest validation NLL (default: yes; "
        "paper: no); needs validation rows",
    )
    parser.add_argument(
        "--patience",
        type=_non_negative_int,
        metavar="N",
        help="with --restore-best, stop after N epochs without a better validation NLL "
        "(default: 20; paper: 0, train all epochs)",
    )
