"""The ``avdgp`` parser: every option shows its default, parsing loads no TensorFlow, and the
choices it keeps as plain data agree with their sources in the library and the application."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from avdgp.cli import arguments
from avdgp.cli import parser as cli_parser


def _sub_parsers() -> dict[str, argparse.ArgumentParser]:
    parser = cli_parser.build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(commands.choices)


def test_the_choices_kept_as_data_agree_with_their_sources():
    from avdgp.training.config import DEFAULT_BACKUP_INTERVAL, MAX_LEARNING_RATE
    from avdgp.training.distribute import STRATEGY_NAMES
    from avdgp.zoo.spec import ModelKind
    from gpflux_avdgp.rules import ModelRule

    assert arguments.RULE_CHOICES == tuple(rule.value for rule in ModelRule)
    assert arguments.STRATEGY_NAMES == STRATEGY_NAMES
    assert arguments.MAX_LEARNING_RATE == MAX_LEARNING_RATE
    assert arguments.DEFAULT_BACKUP_INTERVAL == DEFAULT_BACKUP_INTERVAL
    assert set(arguments.MODEL_CHOICES) == {kind.value for kind in ModelKind}


@pytest.mark.parametrize("command", sorted(_sub_parsers()))
def test_every_option_has_help_and_every_default_is_shown(command):
    sub_parser = _sub_parsers()[command]
    formatter = sub_parser._get_formatter()
    for action in sub_parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        name = "/".join(action.option_strings) or action.metavar or action.dest
        assert action.help, f"avdgp {command} {name}: no help"
        flag = action.nargs == 0  # --quiet, --full, --render-only, --[no-]restore-best
        if action.option_strings and not flag:
            shown = formatter._get_help_string(action)
            assert "default" in shown, f"avdgp {command} {name}: no default in {shown!r}"


def test_a_default_is_shown_as_the_parser_holds_it(capsys):
    with pytest.raises(SystemExit):
        cli_parser.build_parser().parse_args(["bench", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--seeds SEEDS seeds (default: 0,1,2,3,4)" in text
    assert "--epochs EPOCHS epochs per run (default: 100)" in text


def _run(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "avdgp", *arguments],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("arguments", [["--help"], ["fit", "--help"], ["--version"]])
def test_help_and_version_load_neither_tensorflow_nor_the_library(arguments):
    """``-X importtime`` lists every module the process imported on stderr."""
    done = _run(*arguments)
    assert done.returncode == 0, done.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "avdgp.cli.parser" in imported  # the listing works
    assert not {name for name in imported if name.split(".")[0] == "tensorflow"}
    assert "gpflux_avdgp" not in imported and "numpy" not in imported
    if arguments == ["--version"]:
        from importlib.metadata import version

        assert done.stdout.strip() == f"avdgp {version('gpflux_avdgp')}"
    elif arguments == ["--help"]:
        assert "--version" in done.stdout and "predict" in done.stdout
    else:
        assert "--batch-size BATCH_SIZE rows per step (default: 100)" in " ".join(
            done.stdout.split()
        )
