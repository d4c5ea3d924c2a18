"""Numbers the README and the docs quote are those of the committed result files.

Each quote is rebuilt here from its result file and must appear, as written, in the page that
quotes it: a rerun that commits new results fails this test until the pages say the new
numbers, and a page edited by hand fails it until the numbers come from a run.

- ``docs/experiments/toy/results.json``: ``avdgp demo --out docs/experiments/toy`` (seed 0), with
  its figures; ``toy/seed_1.json`` and ``toy/seed_2.json``: the same with ``--seed 1`` and
  ``--seed 2`` (their ``results.json``); ``toy/time.txt``: the wall clock of the seed-0 run
  (``time avdgp demo``).
- ``docs/experiments/toy_full/results.json``: ``avdgp demo --full`` (seed 0).
"""

from __future__ import annotations

import json
import re

import pytest
from helpers import REPO_ROOT

TOY = REPO_ROOT / "docs" / "experiments" / "toy"
TOY_FULL = REPO_ROOT / "docs" / "experiments" / "toy_full"
MODELS = ("SGP-AVI", "AVDGP-2L", "AVDGP-3L")


def _errors(path) -> list[float]:
    """Test error rates in % of the three demo models."""
    results = json.loads(path.read_text())["results"]
    return [100 * results[model]["error_rate"] for model in MODELS]


def _seeds() -> list[list[float]]:
    return [
        _errors(TOY / "results.json"),
        _errors(TOY / "seed_1.json"),
        _errors(TOY / "seed_2.json"),
    ]


def _wall_clock() -> str:
    """``4 min 7 s`` from ``time``'s ``real 4m7.123s``."""
    match = re.search(r"real\s+(\d+)m([\d.]+)s", (TOY / "time.txt").read_text())
    assert match, "toy/time.txt holds no 'real' line"
    return f"{int(match[1])} min {round(float(match[2]))} s"


def _quotes() -> list[tuple[str, str]]:
    seed0, seed1, seed2 = _seeds()
    means = [sum(column) / 3 for column in zip(seed0, seed1, seed2)]
    full = json.loads((TOY_FULL / "results.json").read_text())["results"]
    full_errors = [100 * full[model]["error_rate"] for model in MODELS]
    a, b, c = seed0
    return [
        (
            "README.md",
            f"test error {a:.1f} % (SGP-AVI), {b:.1f} % (2 layers) and {c:.1f} % (3 layers) "
            f"in {_wall_clock()} on 2 cores, seed 0",
        ),
        (
            "README.md",
            "means of seeds 0-2: " + " / ".join(f"{value:.1f}" for value in means) + " %",
        ),
        (
            "README.md",
            " / ".join(f"{value:.1f}" for value in full_errors) + " %, below the paper's Table 2",
        ),
        *[
            (
                "docs/experiments/toy.md",
                f"| {seed} | " + " | ".join(f"{value:.2f} %" for value in errors) + " |",
            )
            for seed, errors in enumerate((seed0, seed1, seed2))
        ],
        (
            "docs/experiments/toy.md",
            "| mean of seeds 0-2 | " + " | ".join(f"{value:.2f} %" for value in means) + " |",
        ),
        ("docs/experiments/toy.md", f"Time: {_wall_clock()} wall clock for seed 0"),
        *[
            (
                "docs/experiments/toy.md",
                f"| {model} | {100 * full[model]['error_rate']:.2f} % | {full[model]['nll']:.3f} "
                f"| {full[model]['brier']:.3f} | {full[model]['ece']:.3f} | "
                f"{full[model]['seconds']:.0f} |",
            )
            for model in MODELS
        ],
        (
            "docs/experiments/summary.md",
            "{}, {} and {}".format(
                *[
                    f"{name} "
                    + " / ".join(f"{errors[k]:.2f}" for errors in (seed0, seed1, seed2))
                    + " %"
                    for k, name in enumerate(MODELS)
                ]
            ),
        ),
        (
            "docs/experiments/summary.md",
            f"SGP-AVI {full_errors[0]:.2f} %, AVDGP-2L {full_errors[1]:.2f} % and AVDGP-3L "
            f"{full_errors[2]:.2f} %",
        ),
    ]


@pytest.mark.parametrize("page, quote", _quotes(), ids=lambda value: str(value)[:40])
def test_the_page_quotes_the_result_file(page, quote):
    text = " ".join((REPO_ROOT / page).read_text().split())  # line breaks do not matter
    assert quote in text, f"{page} does not quote {quote!r}"
