"""What the ``avdgp`` parsers share: argparse with one-line errors and every default shown,
the option types with their checks, and the choices of the library as plain data (parsing
imports neither TensorFlow nor the library; ``tests/application/cli/test_parser.py`` checks
them against their sources)."""

from __future__ import annotations

import argparse

from ..errors import CommandLineError

__all__ = [
    "DATA_ROOT_HELP",
    "DEFAULT_BACKUP_INTERVAL",
    "MAX_LEARNING_RATE",
    "MODEL_CHOICES",
    "RULE_CHOICES",
    "STRATEGY_NAMES",
    "HelpFormatter",
    "Parser",
    "add_preset_arguments",
    "add_steps_per_execution",
    "checked",
    "fraction",
    "int_list",
    "learning_rate",
    "non_negative_int",
    "positive_float",
    "positive_int",
    "seconds",
    "target_column",
]

#: :class:`gpflux_avdgp.rules.ModelRule`'s values.
RULE_CHOICES = ("ar1", "ar2", "ar2p", "ar2pp")

#: :data:`avdgp.training.distribute.STRATEGY_NAMES`.
STRATEGY_NAMES = ("default", "mirrored", "multiworker")

#: :data:`avdgp.training.config.MAX_LEARNING_RATE`: Adam keeps the rate in a float32.
MAX_LEARNING_RATE = 3.4028234663852886e38

#: ``TrainConfig.backup_interval``'s default (``avdgp.training.config``).
DEFAULT_BACKUP_INTERVAL = 30.0


class HelpFormatter(argparse.HelpFormatter):
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


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line (no usage dump) and exit status 2, and
    shows every option's default in its help."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # noqa: D401 - argparse API
        raise CommandLineError(f"{self.prog}: {message} (see '{self.prog} --help')")


def int_list(text: str) -> list[int]:
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


positive_int = checked(int, lambda v: v > 0, "a positive integer")


non_negative_int = checked(int, lambda v: v >= 0, "a non-negative integer")


positive_float = checked(float, lambda v: 0 < v < float("inf"), "a positive number")


seconds = checked(float, lambda v: 0 <= v < float("inf"), "seconds >= 0")


learning_rate = checked(
    float, lambda v: 0 < v <= MAX_LEARNING_RATE, "a positive number up to 3.4e38 (a float32)"
)

fraction = checked(float, lambda v: 0 <= v < 1, "a number in [0, 1)")


def target_column(text: str) -> int | str:
    try:
        return int(text)
    except ValueError:
        return text


MODEL_CHOICES = ("avdgp", "sgp-avi", "idsgp", "svgp", "solve-gp", "dsdgp", "dspp")


DATA_ROOT_HELP = "folder of UCI data sets (default: $AVDGP_DATA_ROOT, else ../shared/data/uci)"


def add_steps_per_execution(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--steps-per-execution",
        type=positive_int,
        default=1,
        metavar="K",
        help="training steps per call of Keras' train function: same results, less per-step "
        "overhead (e.g. 10 for small models; a NaN is then located to K batches)",
    )


def add_preset_arguments(parser: argparse.ArgumentParser) -> None:
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
        type=learning_rate,
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
        type=non_negative_int,
        metavar="N",
        help="with --restore-best, stop after N epochs without a better validation NLL "
        "(default: 20; paper: 0, train all epochs)",
    )
