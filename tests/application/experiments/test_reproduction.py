"""The reproduction page (``avdgp/experiments/paper/reproduction.py``): a cell's verdict from
pooled stds, a claim's from seed-paired wins, and the committed page rebuilt from its rows."""

from __future__ import annotations

import shutil

import pytest
from helpers import REPO_ROOT

from avdgp.experiments.paper.reproduction import cell_verdict, claim_verdict, render_reproduction

PAGE = REPO_ROOT / "docs" / "experiments" / "reproduction"


def test_a_cell_is_reproduced_within_two_pooled_stds():
    # ours 0.30 +- 0.02 (sample std), paper 0.26 +- 0.02: pooled 0.02, 2.0 stds apart
    ours = [0.28, 0.30, 0.32, 0.30, 0.30]
    sample_std = 0.0141421356
    pooled = ((sample_std**2 + 0.02**2) / 2) ** 0.5
    verdict, distance = cell_verdict(ours, (0.30 - 1.9 * pooled, 0.02), "identical")
    assert verdict == "reproduced" and distance == pytest.approx(1.9)
    assert cell_verdict(ours, (0.30 - 2.1 * pooled, 0.02), "identical")[0] == "worse"
    assert cell_verdict(ours, (0.30 + 2.1 * pooled, 0.02), "near")[0] == "better"
    assert cell_verdict(ours[:3], (0.0, 0.01), "identical")[0] == "worse (3 seeds)"
    assert cell_verdict(ours[:1], (0.3, 0.01), "identical") == ("open (1 seed)", None)
    assert cell_verdict(ours, (0.3, 0.01), "different data") == ("different data", None)


def test_a_claim_needs_four_of_five_seed_paired_wins():
    worse = dict(enumerate([1.0, 1.0, 1.0, 1.0, 1.0]))
    assert claim_verdict(dict(enumerate([0.9, 0.9, 0.9, 0.9, 1.1])), worse) == ("holds", 4, 5)
    assert claim_verdict(dict(enumerate([0.9, 0.9, 0.9, 1.1, 1.1])), worse) == ("mixed", 3, 5)
    assert claim_verdict(dict(enumerate([0.9, 1.1, 1.1, 1.1, 1.1])), worse) == ("fails", 1, 5)
    assert claim_verdict({0: 0.5, 1: 0.5}, worse) == ("open", 2, 2)
    assert claim_verdict({7: 0.5}, worse) == ("open", 0, 0)  # no common seed


def test_the_committed_page_is_rebuilt_from_its_rows(tmp_path):
    """Every number on docs/experiments/reproduction.md comes from reproduction/uci/results.csv."""
    folder = tmp_path / "reproduction"
    (folder / "uci").mkdir(parents=True)
    shutil.copy(PAGE / "uci" / "results.csv", folder / "uci" / "results.csv")
    rebuilt = render_reproduction(folder)
    assert rebuilt == tmp_path / "reproduction.md"
    assert rebuilt.read_text() == PAGE.with_suffix(".md").read_text()
