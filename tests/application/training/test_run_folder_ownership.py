"""A user's folders are theirs (``avdgp/training/ownership.py``): ``--save`` writes only into a
folder avdgp made (or an empty one), never through a link; each test plants the case and checks
what is left on disk."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_one_line_cli_error, run_cli

from avdgp.errors import UsageError
from avdgp.training.ownership import MARK_FILE, check_no_links, claim_run_dir, open_own_file
from avdgp.training.rundir import holding_run_dir


def _tree(folder: Path) -> dict:
    """Every entry under ``folder`` (links not followed): its kind, content and mtime."""
    seen = {}
    for root, folders, files in os.walk(folder, followlinks=False):
        for name in folders + files:
            path = Path(root) / name
            stat = path.lstat()
            if path.is_symlink():
                seen[str(path)] = ("link", os.readlink(path), stat.st_mtime_ns)
            elif path.is_dir():
                seen[str(path)] = ("folder", None, stat.st_mtime_ns)
            else:
                seen[str(path)] = ("file", path.read_bytes(), stat.st_mtime_ns)
    return seen


@pytest.fixture
def data_csv(tmp_path, rng):
    path = tmp_path / "d.csv"
    np.savetxt(path, rng.normal(size=(40, 3)), delimiter=",", header="a,b,y", comments="")
    return path


def test_fit_refuses_a_users_folder_and_leaves_it_as_it_was(capsys, tmp_path, data_csv):
    folder = tmp_path / "mine"
    (folder / "backup").mkdir(parents=True)
    (folder / "best_epoch").mkdir()
    (folder / "backup" / "thesis.tex").write_text("years of work")
    (folder / "weights.index").write_text("my own index")
    (folder / "notes.txt").write_text("notes")
    before = _tree(folder)
    status, out, err = run_cli(capsys, ["fit", data_csv, "--epochs", "1", "--save", folder])
    assert_one_line_cli_error(
        status,
        out,
        err,
        f"{folder}: not an avdgp run folder and not empty (4 entries, e.g. 'notes.txt'); give "
        "--save a new or empty folder (avdgp writes, replaces and deletes files only in folders "
        "it made)",
    )
    assert _tree(folder) == before


@pytest.mark.parametrize("planted", [".lock", "weights.index", "settings.json", "backup"])
def test_fit_refuses_a_link_in_its_own_run_folder_and_never_writes_through_it(
    capsys, tmp_path, data_csv, planted
):
    folder, victims = tmp_path / "run", tmp_path / "victims"
    victims.mkdir()
    (victims / "file").write_text("the victim's")
    claim_run_dir(folder)  # a run folder of ours
    target = victims if planted == "backup" else victims / "file"
    (folder / planted).symlink_to(target)
    before = _tree(victims)
    status, out, err = run_cli(capsys, ["fit", data_csv, "--epochs", "1", "--save", folder])
    assert_one_line_cli_error(
        status,
        out,
        err,
        f"{folder / planted}: a symbolic link in run folder {folder}; avdgp never writes "
        "through links in a run folder: remove it, or give --save a new folder",
    )
    assert _tree(victims) == before
    assert sorted(path.name for path in folder.iterdir()) == sorted([MARK_FILE, planted])


def test_a_hard_link_in_a_run_folder_is_refused(tmp_path):
    folder = tmp_path / "run"
    claim_run_dir(folder)
    victim = tmp_path / "victim"
    victim.write_text("the victim's")
    os.link(victim, folder / "weights.index")
    with pytest.raises(UsageError, match="a file with another hard link in run folder"):
        with holding_run_dir(folder):
            pass
    assert victim.read_text() == "the victim's"
    assert not (folder / ".lock").exists()


def test_new_and_empty_folders_are_claimed_and_an_older_run_folder_adopted(tmp_path):
    new, empty, older, foreign = (tmp_path / name for name in ("new", "empty", "older", "foreign"))
    empty.mkdir()
    for folder in (older, foreign):
        (folder / "backup").mkdir(parents=True)
    (older / "settings.json").write_text(json.dumps({"spec": {"model": "avdgp"}, "train": {}}))
    (foreign / "settings.json").write_text(json.dumps({"theme": "dark"}))  # a user's own
    for folder in (new, empty, older):
        claim_run_dir(folder)
        assert json.loads((folder / MARK_FILE).read_text()) == {
            "made_by": "avdgp",
            "kind": "run folder",
        }
    claim_run_dir(new)  # a marked folder stays ours (resuming)
    with pytest.raises(UsageError, match="not an avdgp run folder and not empty"):
        claim_run_dir(foreign)
    assert sorted(p.name for p in foreign.iterdir()) == ["backup", "settings.json"]
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    with pytest.raises(UsageError, match="a_file: not a folder"):
        claim_run_dir(a_file)


def test_a_planted_mark_link_does_not_make_a_folder_ours(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("notes")
    (tmp_path / "elsewhere").write_text("{}")
    (folder / MARK_FILE).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UsageError, match="not an avdgp run folder"):
        claim_run_dir(folder)


def test_own_files_are_opened_without_following_a_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("the victim's")
    (tmp_path / "own").symlink_to(victim)
    for mode in ("w", "a+"):
        with pytest.raises(UsageError, match="own: a symbolic link; avdgp never writes through"):
            open_own_file(tmp_path / "own", mode)
    assert victim.read_text() == "the victim's"
    with open_own_file(tmp_path / "fresh", "w") as handle:
        handle.write("ok")
    assert (tmp_path / "fresh").read_text() == "ok"
    check_no_links(tmp_path / "nothing_here")  # a folder that does not exist holds no link
