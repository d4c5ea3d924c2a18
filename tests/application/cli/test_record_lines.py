"""What ``avdgp fit`` prints after training: scores in the right units, the kept epoch with its
validation NLL, and after ``--save`` where the run is and what to run next."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from avdgp.cli.common import kept_epoch_line, print_next_commands, print_record


def _record(**changes) -> SimpleNamespace:
    fields = dict(
        label="avdgp-ar2p",
        dataset="houses.csv",
        n_train=800,
        n_test=100,
        dim=3,
        epochs=100,
        task="regression",
        test={"nll": 0.5, "rmse": 0.25},
        test_original_units={"nll": 5.1, "rmse": 25.0},
        val={"nll": 0.4321},
        best_epoch=57,
        stopped_epoch=77,
        train_seconds_per_epoch=1.25,
        first_epoch_seconds=9.5,
        predict_seconds=0.04,
    )
    return SimpleNamespace(**{**fields, **changes})


@pytest.mark.parametrize(
    "changes, expected",
    [
        (
            {},
            "kept epoch 57 of 77 (lowest validation NLL 0.4321, standardised units; stopped "
            "after 20 epochs without a lower one)",
        ),
        (
            {"stopped_epoch": 100, "best_epoch": 100},
            "kept epoch 100 of 100 (lowest validation NLL 0.4321, standardised units)",
        ),
        (
            {"task": "classification", "stopped_epoch": 100},
            "kept epoch 57 of 100 (lowest validation NLL 0.4321)",
        ),
        (
            {"best_epoch": None, "stopped_epoch": 100},
            "kept the last epoch, 100 (validation NLL 0.4321, standardised units)",
        ),
        ({"best_epoch": None, "stopped_epoch": 100, "val": None}, "kept the last epoch, 100"),
    ],
)
def test_the_kept_epoch_and_its_validation_nll(changes, expected):
    assert kept_epoch_line(_record(**changes)) == expected


def test_a_regression_record_gives_both_units(capsys):
    print_record(_record())
    assert capsys.readouterr().out.splitlines() == [
        "avdgp-ar2p on houses.csv (n_train 800, n_test 100, D 3, 100 epochs)",
        "  test (standardised units): nll 0.5000, rmse 0.2500",
        "  test (original units):     nll 5.1000, rmse 25.0000",
        "  kept epoch 57 of 77 (lowest validation NLL 0.4321, standardised units; stopped after "
        "20 epochs without a lower one)",
        "  1.25 s/epoch (first epoch 9.5 s), predict 0.04 s",
    ]


def test_a_classification_record_names_no_units(capsys):
    record = _record(
        task="classification",
        test={"nll": 0.3, "error_rate": 0.05},
        test_original_units=None,
        best_epoch=None,
        stopped_epoch=100,
    )
    print_record(record)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "  test: nll 0.3000, error_rate 0.0500"
    assert lines[2] == "  kept the last epoch, 100 (validation NLL 0.4321)"
    assert "units" not in "".join(lines)


def test_after_save_the_folder_and_the_next_commands(capsys):
    print_next_commands("runs/houses", "houses.csv")
    assert capsys.readouterr().out.splitlines() == [
        "  saved in runs/houses/ (model.keras, weights, run.json); next:",
        "    avdgp predict runs/houses houses.csv --out predictions.csv",
        "    avdgp export runs/houses runs/houses-serving",
    ]
    print_next_commands("m", "d.csv")
    assert capsys.readouterr().out.splitlines()[-1] == "    avdgp export m m-serving"
