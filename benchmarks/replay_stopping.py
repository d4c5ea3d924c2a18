"""Replay early-stopping rules on full-length runs (``avdgp bench --patience 0``).

Every run of ``curves.jsonl`` holds its validation and test NLL after each epoch. A rule picks
the epoch of lowest validation NLL among the epochs it would have trained; the cosine schedule
spans all epochs whatever the rule, so the replay gives what the rule would have returned.
Prints, per data set and model, the test NLL (mean over seeds) each rule keeps, then per rule
its change against the default over all of them and the epochs it trains::

    python benchmarks/replay_stopping.py docs/experiments/paper/stopping/curves.jsonl
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

#: ``name -> (patience in epochs, patience floor in training steps, first epoch at which
#: stopping is allowed)``: the patience of a run is ``max(epochs, ceil(floor / steps per
#: epoch))``; ``None`` epochs: never stop.
RULES = {
    "P=10": (10, 0, 1),
    "P=20 (default)": (20, 0, 1),
    "P=40": (40, 0, 1),
    "P=20 after epoch 50": (20, 0, 50),
    "P=20 after epoch 75": (20, 0, 75),
    "P=3000 steps": (1, 3000, 1),
    "P=20, at least 2000 steps": (20, 2000, 1),
    "all epochs": (None, 0, 1),
}
BATCH_SIZE = 100


def kept_epoch(val_nll: list[float], patience, start: int) -> tuple[int, int]:
    """``(kept epoch, stopped epoch)``, 1-based, of ``EarlyStopping`` with ``patience``
    that may stop from epoch ``start`` on."""
    best, best_epoch = float("inf"), 0
    for epoch, value in enumerate(val_nll, start=1):
        if value < best:
            best, best_epoch = value, epoch
        elif patience is not None and epoch >= start and epoch - best_epoch >= patience:
            return best_epoch, epoch
    return best_epoch, len(val_nll)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("curves", type=Path)
    args = parser.parse_args(argv)
    with (args.curves.parent / "results.csv").open(newline="") as handle:
        rows = {
            (row["dataset"], row["model"], int(row["seed"])): int(float(row["n_train"]))
            for row in csv.DictReader(handle)
        }
    table: dict = defaultdict(lambda: defaultdict(list))
    for line in args.curves.read_text().splitlines():
        run = json.loads(line)
        if not run.get("val_nll_curve") or not run.get("test_nll_curve"):
            continue  # trained without validation scoring (--preset paper)
        val = [value for _, value in run["val_nll_curve"]]
        test = [value for _, value in run["test_nll_curve"]]
        if len(val) < run["epochs"]:
            continue  # stopped early: not a full-length run
        steps = -(-rows[run["dataset"], run["model"], int(run["seed"])] // BATCH_SIZE)
        for name, (patience, floor, start) in RULES.items():
            if patience is not None:
                patience = max(patience, -(-floor // steps))  # whole epochs of >= floor steps
            epoch, stopped = kept_epoch(val, patience, start)
            table[run["dataset"], run["model"]][name].append(
                (test[epoch - 1], epoch, stopped, len(val))
            )
    names = list(RULES)
    print("| data set | model | seeds | " + " | ".join(names) + " |")
    print("|---|---|---:|" + "---:|" * len(names))
    for (dataset, model), per_rule in sorted(table.items()):
        cells = []
        for name in names:
            runs = per_rule[name]
            nll = np.mean([r[0] for r in runs])
            stops = "/".join(str(r[2]) for r in runs)
            cells.append(f"{nll:.3f} (stop {stops})")
        print(f"| {dataset} | {model} | {len(per_rule[names[0]])} | " + " | ".join(cells) + " |")
    print()
    print(summary(table, names))
    return 0


def summary(table: dict, names: list[str]) -> str:
    """Per rule, against the default over every (data set, model): the mean change of test NLL,
    the largest gain and loss, the pairs it worsens by more than 0.01, and the epochs trained
    as a share of all epochs."""
    default = "P=20 (default)"
    lines = [
        "| rule | mean change of test NLL | best gain | worst loss | pairs worse by > 0.01 "
        "| epochs trained |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    total_epochs = sum(r[3] for per_rule in table.values() for r in per_rule[default])
    for name in names:
        changes, trained = [], 0
        for per_rule in table.values():
            ours = np.mean([r[0] for r in per_rule[name]])
            changes.append(ours - np.mean([r[0] for r in per_rule[default]]))
            trained += sum(r[2] for r in per_rule[name])
        changes = np.array(changes)
        worse = int((changes > 0.01).sum())
        lines.append(
            f"| {name} | {changes.mean():+.3f} | {changes.min():+.3f} | {changes.max():+.3f} | "
            f"{worse} of {len(changes)} | {100 * trained / total_epochs:.0f} % |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
